#include "cache/chunk_writer.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "cache/index_format.h"
#include "cache/io/direct_io.h"
#include "util/checksum.h"
#include "util/log.h"

namespace stoker {
namespace {

uint64_t AvailBytes(const struct statvfs& vfs) {
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

// Bytes a write has claimed on the cache's filesystem and not yet written.
// FreeSpaceLow counts them, so that writes running together, each of which
// saw room, do not overrun the reserve between them.
class DiskClaim {
 public:
  DiskClaim(std::atomic<uint64_t>& claimed, uint64_t n) : claimed_(claimed), n_(n) {
    claimed_ += n_;
  }
  ~DiskClaim() { claimed_ -= n_; }
  DiskClaim(const DiskClaim&) = delete;
  DiskClaim& operator=(const DiskClaim&) = delete;

 private:
  std::atomic<uint64_t>& claimed_;
  const uint64_t n_;
};

}  // namespace

ChunkWriter::ChunkWriter(Options options, Parts parts)
    : options_(std::move(options)),
      parts_(std::move(parts)),
      in_page_cache_(options_.data_files_in_page_cache) {}

bool ChunkWriter::Store(const ObjectVersion& v, uint64_t idx, const ChunkBytes& bytes) {
  // Every fetched chunk is an access, cached or not: a full cache that
  // refuses chunks must still age what it holds (see eviction.h).
  const uint64_t tick = parts_.index->Tick();
  if (v.superseded) return false;
  if (v.uncached) {
    parts_.counters->chunks_not_cached++;
    return false;
  }
  const ChunkKey key{v.key.object_id, v.key.version, idx};
  const uint64_t alloc = AllocatedBytes(bytes.len);
  // Claimed until the write is done; the claim itself is counted below.
  DiskClaim claim(disk_claimed_, alloc);
  // The evictor measures the disk each round, and gives the reserve back if
  // others took it.
  if (FreeSpaceLow(0)) return NotCached("the cache filesystem is low on free space");
  parts_.index_size->Refresh();
  if (!parts_.quota->TryReserve(alloc)) {
    parts_.counters->chunks_not_cached++;
    parts_.evict();
    return false;
  }
  // A latch on this chunk is a drop of its bad predecessor (or an eviction)
  // in progress, which is short: wait for it rather than leave the fresh
  // bytes uncached.
  bool verified = false;
  bool pinned = parts_.resident->TryPin(key, &verified);
  for (int i = 0; !pinned && i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    pinned = parts_.resident->TryPin(key, &verified);
  }
  if (!pinned) {
    parts_.quota->Release(alloc);
    return false;
  }
  bool present = false;
  bool committed = false;
  bool wrote = false;
  auto existing = parts_.index->GetChunk(key);
  if (!existing.ok()) {
    present = false;
  } else if (verified) {
    present = true;
  } else if (*existing) {
    RewriteUnverified(v, key, **existing, bytes);
    present = true;
  } else {
    wrote = true;
    committed = WriteNew(v, key, bytes, alloc, tick);
    present = committed;
  }
  if (committed) {
    parts_.quota->Commit(alloc);
  } else {
    parts_.quota->Release(alloc);
  }
  parts_.resident->Unpin(key);
  if (wrote && parts_.quota->AboveHigh()) parts_.evict();
  return present;
}

bool ChunkWriter::NotCached(const char* why) {
  // A full quota is the steady state of a cache smaller than its dataset;
  // a full filesystem is worth one warning.
  parts_.counters->chunks_not_cached++;
  WarnNotCaching(why);
  return false;
}

void ChunkWriter::WarnNotCaching(const std::string& why) {
  if (!logged_no_space_.exchange(true)) {
    LOG_WARN("serving from the origin without caching: {}", why);
  }
}

void ChunkWriter::RewriteUnverified(const ObjectVersion& v, const ChunkKey& key,
                                    const ChunkRecord& existing, const ChunkBytes& bytes) {
  // A record this process has not verified: its bytes may be bad ones that
  // a reader found and could not drop yet (we were pinning). Ours are good
  // and match it: put them in place and mark the chunk verified, which
  // makes that reader's drop a no-op.
  const SlotRef slot = existing.slot;
  if (existing.len != bytes.len || !SlotFits(v, slot) ||
      existing.xxh3 != ChunkChecksum(bytes.data.get(), bytes.len)) {
    return;
  }
  const ChunkPlace place = PlaceOf(key, slot, options_.chunk_size);
  auto file = BeginWrite(v, place);
  if (!file.ok()) return;
  if (WriteData(**file, bytes, place.off, Direct(v)).ok()) {
    parts_.resident->MarkVerified(key, slot);
  }
  parts_.store->EndWrite(v.key);
}

bool ChunkWriter::WriteNew(const ObjectVersion& v, const ChunkKey& key, const ChunkBytes& bytes,
                           uint64_t alloc, uint64_t tick) {
  // Begin: the store's write bracket (the version's file cannot be dropped
  // meanwhile), then a write intent in the index, which a slab write takes
  // with its slot (so its file is known only then); a version's own file is
  // opened first.
  const bool slab = UsesSlab(v);
  auto registered = parts_.store->BeginWrite(
      v.key, [&] { return v.superseded.load(); }, /*open_file=*/!slab);
  if (!registered.ok()) {
    if (registered.status().code() != ESTALE) {
      LOG_WARN("caching a chunk: {}", registered.status().message());
    }
    return false;
  }
  bool committed = false;
  SlotRef slot;
  Status s;
  if (slab) {
    auto reserved = parts_.index->ReserveSlot(key, bytes.len);
    s = reserved.status();
    if (s.ok()) slot = *reserved;
  } else {
    s = parts_.index->PutIntent(key);
  }
  const ChunkPlace place = PlaceOf(key, slot, options_.chunk_size);
  std::shared_ptr<DataFile> file = slab ? nullptr : *registered;
  if (s.ok()) {
    // Write, then commit: the chunk record makes it visible.
    if (slab) {
      auto opened = parts_.store->Get(place.file, /*create=*/true);
      s = opened.status();
      if (s.ok()) file = *opened;
    }
    if (s.ok()) s = WriteData(*file, bytes, place.off, Direct(v));
    if (s.ok()) {
      ChunkRecord rec{static_cast<uint32_t>(bytes.len),
                      ChunkChecksum(bytes.data.get(), bytes.len),
                      alloc,
                      tick,
                      HitState::kProbationary,
                      tick,
                      slot};
      s = parts_.index->CommitChunk(key, rec);
      committed = s.ok();
    }
    if (!committed) {
      // Abort: whatever reached the file goes; the intent covers a crash
      // right here.
      if (file) (void)ChunkStore::Punch(file->fd(), place.off, place.span);
      (void)(slab ? parts_.index->ReleaseSlot(key, slot) : parts_.index->DeleteIntent(key));
    }
  }
  if (committed) {
    parts_.resident->MarkVerified(key, slot);
    parts_.hits->RecordInsert(key, tick);
    parts_.counters->chunks_written++;
    if (slab) parts_.counters->slab_chunks_written++;
  } else if (s.code() == ENOSPC) {
    (void)NotCached("the cache filesystem is full");
  } else {
    LOG_WARN("caching chunk {} of '{}': {}", key.index, v.path, s.message());
  }
  parts_.store->EndWrite(v.key);
  return committed;
}

Result<std::shared_ptr<DataFile>> ChunkWriter::BeginWrite(const ObjectVersion& v,
                                                          const ChunkPlace& place) {
  const bool own_file = !IsSlabFileKey(place.file);
  STOKER_ASSIGN_OR_RETURN(auto file, parts_.store->BeginWrite(
                                         v.key, [&] { return v.superseded.load(); }, own_file));
  if (own_file) return file;
  auto slab = parts_.store->Get(place.file, /*create=*/true);
  if (!slab.ok()) parts_.store->EndWrite(v.key);
  return slab;
}

Status ChunkWriter::WriteData(DataFile& file, const ChunkBytes& bytes, uint64_t off, bool direct) {
  const char* p = bytes.data.get();
  uint64_t head = RoundDownToDirect(bytes.len);
  int dfd = direct && head >= kMinDirectBytes && RoundDownToDirect(off) == off && IsDirectAligned(p)
                ? file.direct_fd()
                : -1;
  if (dfd >= 0) {
    Status s = parts_.io->Write(dfd, p, head, static_cast<off_t>(off));
    if (s.code() == EINVAL) {
      file.DisableDirect();  // opened, but the file system will not write direct
    } else {
      if (!s.ok() || head == bytes.len) return s;
      return parts_.io->Write(file.fd(), p + head, bytes.len - head,
                              static_cast<off_t>(off + head));
    }
  }
  return parts_.io->Write(file.fd(), p, bytes.len, static_cast<off_t>(off));
}

Result<uint64_t> ChunkWriter::PunchAndDrop(const ChunkKey& key,
                                           const std::optional<EvictionRank>& stale_rank,
                                           bool* in_slot) {
  SlotRef slot;
  auto rec = parts_.index->GetChunk(key);
  if (rec.ok() && *rec) slot = (*rec)->slot;
  if (in_slot) *in_slot = slot.valid();
  // Punch before dropping the record: a crash in between leaves a record
  // over a hole, which fails its checksum and is re-fetched. A slot's
  // blocks must go before the slot can be taken again.
  const ChunkPlace place = PlaceOf(key, slot, options_.chunk_size);
  auto file = parts_.store->Get(place.file, false);
  if (file.ok()) {
    Status s = ChunkStore::Punch((*file)->fd(), place.off, place.span);
    if (!s.ok()) LOG_ERROR("freeing a cached chunk: {}", s.message());
  }
  return parts_.index->DropChunk(key, stale_rank);
}

void ChunkWriter::DropBad(const ChunkKey& key, bool force) {
  ResidentChunks& resident = *parts_.resident;
  if (!(force ? resident.TryLatchForEvict(key) : resident.TryLatchForDrop(key))) return;
  auto freed = PunchAndDrop(key);
  if (freed.ok()) {
    parts_.quota->Free(*freed);
  } else {
    LOG_WARN("dropping a bad chunk: {}", freed.status().message());
  }
  resident.ReleaseLatch(key);
}

Status ChunkWriter::ReclaimIntents() {
  ChunkIndex& index = *parts_.index;
  std::vector<std::string> bad;
  std::vector<std::pair<ChunkKey, SlotRef>> intents;
  STOKER_RETURN_IF_ERROR(index.ForEach(kIntentPrefix, [&](std::string_view k, auto value) {
    auto key = DecodeIntentKey(k);
    auto slot = DecodeIntent(value);
    if (key.ok() && slot.ok()) {
      intents.emplace_back(*key, *slot);
    } else {
      bad.emplace_back(k);  // a slot it named is fsck's to find
    }
    return true;
  }));
  for (const auto& k : bad) STOKER_RETURN_IF_ERROR(index.DeleteRaw(k));
  for (const auto& [key, slot] : intents) {
    STOKER_ASSIGN_OR_RETURN(auto rec, index.GetChunk(key));
    const bool owned = rec && (*rec).slot == slot;  // committed there after all
    if (!owned) {
      const ChunkPlace place = PlaceOf(key, slot, options_.chunk_size);
      auto file = parts_.store->Get(place.file, false);
      if (file.ok()) {
        Status s = ChunkStore::Punch((*file)->fd(), place.off, place.span);
        if (!s.ok()) LOG_WARN("reclaiming an interrupted chunk write: {}", s.message());
      }
    }
    if (slot.valid() && !owned) {
      STOKER_RETURN_IF_ERROR(index.ReleaseSlot(key, slot));
    } else {
      STOKER_RETURN_IF_ERROR(index.DeleteIntent(key));
    }
    const VersionKey v = key.version_key();
    auto unlinked = parts_.store->UnlinkIfIdle(v, [&]() -> Result<bool> {
      STOKER_ASSIGN_OR_RETURN(bool has, index.HasChunks(v));
      return !has;
    });
    STOKER_RETURN_IF_ERROR(unlinked.status());
  }
  if (!intents.empty()) LOG_INFO("reclaimed {} interrupted chunk writes", intents.size());
  return Status::OK();
}

uint64_t ChunkWriter::ReserveBytes(const struct statvfs& vfs) const {
  if (options_.min_free_bytes != 0) return options_.min_free_bytes;
  return std::min<uint64_t>(1ull << 30, static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize / 20);
}

bool ChunkWriter::FreeSpaceLow(uint64_t need) {
  struct statvfs vfs;
  if (::statvfs(options_.dir.c_str(), &vfs) != 0) return true;
  return AvailBytes(vfs) < ReserveBytes(vfs) + need + disk_claimed_.load();
}

void ChunkWriter::MeasureDisk() {
  struct statvfs vfs;
  if (::statvfs(options_.dir.c_str(), &vfs) != 0) return;
  // What the cache has on the disk as the quota counts it: chunks committed
  // and reserved (a reservation not written yet is still in avail too, which
  // errs high; FreeSpaceLow keeps the reserve there), the index, and its
  // headroom (not on the disk, but counted on both sides).
  Quota& quota = *parts_.quota;
  const uint64_t held = quota.used();
  const uint64_t room = held + AvailBytes(vfs);
  const uint64_t reserve = ReserveBytes(vfs);
  const uint64_t limit = room > reserve ? room - reserve : 0;
  if (limit < quota.limit() && evicted_once_ &&
      std::chrono::steady_clock::now() - evicted_at_ < kLimitLowerPause) {
    return;
  }
  quota.SetLimit(limit);
}

void ChunkWriter::NoteEvicted() {
  evicted_once_ = true;
  evicted_at_ = std::chrono::steady_clock::now();
}

}  // namespace stoker
