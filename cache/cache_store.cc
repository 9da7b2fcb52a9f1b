// ObjectCache writes: storing a fetched chunk (reserve, intent, pwrite,
// commit), reading one back, and dropping a bad one.
#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "cache/io/direct_io.h"
#include "cache/object_cache_impl.h"
#include "util/checksum.h"
#include "util/log.h"
#include "util/mutex.h"

namespace stoker {

namespace {

uint64_t AvailBytes(const struct statvfs& vfs) {
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

}  // namespace

uint64_t ObjectCacheImpl::ReserveBytes(const struct statvfs& vfs) const {
  if (options_.min_free_bytes != 0) return options_.min_free_bytes;
  return std::min<uint64_t>(1ull << 30, static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize / 20);
}

bool ObjectCacheImpl::FreeSpaceLow(uint64_t need) {
  struct statvfs vfs;
  if (::statvfs(options_.dir.c_str(), &vfs) != 0) return true;
  return AvailBytes(vfs) < ReserveBytes(vfs) + need + disk_claimed_.load();
}

void ObjectCacheImpl::MeasureDisk() {
  struct statvfs vfs;
  if (::statvfs(options_.dir.c_str(), &vfs) != 0) return;
  // What the cache has on the disk as the quota counts it: chunks committed
  // and reserved (a reservation not written yet is still in avail too, which
  // errs high; FreeSpaceLow keeps the reserve there), the index, and its
  // headroom (not on the disk, but counted on both sides).
  const uint64_t held = quota_.used();
  const uint64_t room = held + AvailBytes(vfs);
  const uint64_t reserve = ReserveBytes(vfs);
  const uint64_t limit = room > reserve ? room - reserve : 0;
  // Not lowered for a while after an eviction: what it frees shows as free
  // space only once the filesystem commits it (btrfs about 30 s, ZFS about
  // 5 s), and lowering on each round meanwhile would evict ever more.
  if (limit < quota_.limit() && evicted_once_ &&
      std::chrono::steady_clock::now() - evicted_at_ < kLimitLowerPause) {
    return;
  }
  quota_.SetLimit(limit);
}

namespace {

// Bytes a store has claimed on the cache's filesystem and not yet written.
// FreeSpaceLow counts them, so that stores running together, each of which
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

Status ObjectCacheImpl::WriteData(DataFile& file, const ChunkBytes& bytes, uint64_t off) {
  const char* p = bytes.data.get();
  uint64_t head = RoundDownToDirect(bytes.len);
  int dfd = head >= kMinDirectBytes && RoundDownToDirect(off) == off && IsDirectAligned(p)
                ? file.direct_fd()
                : -1;
  if (dfd >= 0) {
    Status s = io_->Write(dfd, p, head, static_cast<off_t>(off));
    if (s.code() == EINVAL) {
      file.DisableDirect();  // opened, but the file system will not write direct
    } else {
      if (!s.ok() || head == bytes.len) return s;
      return io_->Write(file.fd(), p + head, bytes.len - head, static_cast<off_t>(off + head));
    }
  }
  return io_->Write(file.fd(), p, bytes.len, static_cast<off_t>(off));
}

bool ObjectCacheImpl::StoreChunk(const std::shared_ptr<ObjectVersion>& v, uint64_t idx,
                                 const ChunkBytes& bytes) {
  // Every fetched chunk is an access, cached or not: a full cache that
  // refuses chunks must still age what it holds (see eviction.h).
  const uint64_t tick = index_->Tick();
  if (v->superseded) return false;
  if (v->uncached) {
    counters_.chunks_not_cached++;
    return false;
  }
  const ChunkKey key{v->key.object_id, v->key.version, idx};
  const uint64_t alloc = AllocatedBytes(bytes.len);
  // Claimed until the write is done; the claim itself is counted below.
  DiskClaim claim(disk_claimed_, alloc);
  // The evictor measures the disk each round, and gives the reserve back if
  // others took it.
  if (FreeSpaceLow(0)) return NotCached("the cache filesystem is low on free space");
  RefreshIndexBytes();
  if (!quota_.TryReserve(alloc)) {
    counters_.chunks_not_cached++;
    KickEvictor();
    return false;
  }
  // A latch on this chunk is a drop of its bad predecessor (or an eviction)
  // in progress, which is short: wait for it rather than leave the fresh
  // bytes uncached.
  bool verified = false;
  bool pinned = resident_->TryPin(key, &verified);
  for (int i = 0; !pinned && i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    pinned = resident_->TryPin(key, &verified);
  }
  if (!pinned) {
    quota_.Release(alloc);
    return false;
  }
  bool present = false;
  bool committed = false;
  bool wrote = false;
  auto existing = index_->GetChunk(key);
  if (!existing.ok()) {
    present = false;
  } else if (verified) {
    present = true;
  } else if (*existing) {
    RewriteUnverified(*v, key, **existing, bytes);
    present = true;
  } else {
    wrote = true;
    committed = WriteNewChunk(v, key, bytes, alloc, tick);
    present = committed;
  }
  if (committed) {
    quota_.Commit(alloc);
  } else {
    quota_.Release(alloc);
  }
  resident_->Unpin(key);
  if (wrote && quota_.AboveHigh()) KickEvictor();
  return present;
}

bool ObjectCacheImpl::NotCached(const char* why) {
  // A full quota is the steady state of a cache smaller than its dataset;
  // a full filesystem is worth one warning.
  counters_.chunks_not_cached++;
  if (!logged_no_space_.exchange(true)) {
    LOG_WARN("serving from the origin without caching: {}", why);
  }
  return false;
}

void ObjectCacheImpl::RewriteUnverified(const ObjectVersion& v, const ChunkKey& key,
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
  const ChunkPlace place = PlaceOf(key, slot, chunk_size_);
  auto file = BeginChunkWrite(v, place);
  if (!file.ok()) return;
  if (WriteData(**file, bytes, place.off).ok()) resident_->MarkVerified(key, slot);
  store_->EndWrite(v.key);
}

bool ObjectCacheImpl::WriteNewChunk(const std::shared_ptr<ObjectVersion>& v, const ChunkKey& key,
                                    const ChunkBytes& bytes, uint64_t alloc, uint64_t tick) {
  // Begin: the store's write bracket (the version's file cannot be dropped
  // meanwhile), then a write intent in the index, which a slab write takes
  // with its slot (so its file is known only then); a version's own file is
  // opened first.
  const bool slab = UsesSlab(*v);
  auto registered = store_->BeginWrite(
      v->key, [&] { return v->superseded.load(); }, /*open_file=*/!slab);
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
    auto reserved = index_->ReserveSlot(key, bytes.len);
    s = reserved.status();
    if (s.ok()) slot = *reserved;
  } else {
    s = index_->PutIntent(key);
  }
  const ChunkPlace place = PlaceOf(key, slot, chunk_size_);
  std::shared_ptr<DataFile> file = slab ? nullptr : *registered;
  if (s.ok()) {
    // Write, then commit: the chunk record makes it visible.
    if (slab) {
      auto opened = store_->Get(place.file, /*create=*/true);
      s = opened.status();
      if (s.ok()) file = *opened;
    }
    if (s.ok()) s = WriteData(*file, bytes, place.off);
    if (s.ok()) {
      ChunkRecord rec{static_cast<uint32_t>(bytes.len),
                      ChunkChecksum(bytes.data.get(), bytes.len),
                      alloc,
                      tick,
                      HitState::kProbationary,
                      tick,
                      slot};
      s = index_->CommitChunk(key, rec);
      committed = s.ok();
    }
    if (!committed) {
      // Abort: whatever reached the file goes; the intent covers a crash
      // right here.
      if (file) (void)ChunkStore::Punch(file->fd(), place.off, place.span);
      (void)(slab ? index_->ReleaseSlot(key, slot) : index_->DeleteIntent(key));
    }
  }
  if (committed) {
    resident_->MarkVerified(key, slot);
    RecordInsert(key, tick);
    counters_.chunks_written++;
    if (slab) counters_.slab_chunks_written++;
  } else if (s.code() == ENOSPC) {
    (void)NotCached("the cache filesystem is full");
  } else {
    LOG_WARN("caching chunk {} of '{}': {}", key.index, v->path, s.message());
  }
  store_->EndWrite(v->key);
  return committed;
}

std::optional<ChunkBytes> ObjectCacheImpl::LoadStored(const ObjectVersion& v, uint64_t idx) {
  // Pinned before the record is read: a slot freed and taken by another
  // chunk meanwhile would hold that chunk's bytes.
  const ChunkKey key{v.key.object_id, v.key.version, idx};
  bool verified = false;
  if (!resident_->TryPin(key, &verified)) return std::nullopt;
  std::optional<ChunkBytes> out;
  auto rec = index_->GetChunk(key);
  if (rec.ok() && *rec && (*rec)->len == ChunkLength(v.identity.size, chunk_size_, idx) &&
      SlotFits(v, (*rec)->slot)) {
    const ChunkPlace place = PlaceOf(key, (*rec)->slot, chunk_size_);
    auto file = store_->Get(place.file, false);
    if (file.ok()) {
      std::shared_ptr<char[]> buf = AllocAligned((*rec)->len);
      auto got = io_->Read((*file)->fd(), buf.get(), (*rec)->len, static_cast<off_t>(place.off));
      if (got.ok() && *got == (*rec)->len && ChunkChecksum(buf.get(), *got) == (*rec)->xxh3) {
        out = ChunkBytes{std::shared_ptr<const char>(buf, buf.get()), *got, true};
      }
    }
  }
  resident_->Unpin(key);
  return out;
}

Result<std::shared_ptr<DataFile>> ObjectCacheImpl::BeginChunkWrite(const ObjectVersion& v,
                                                                   const ChunkPlace& place) {
  const bool own_file = !IsSlabFileKey(place.file);
  STOKER_ASSIGN_OR_RETURN(auto file, store_->BeginWrite(
                                         v.key, [&] { return v.superseded.load(); }, own_file));
  if (own_file) return file;
  auto slab = store_->Get(place.file, /*create=*/true);
  if (!slab.ok()) store_->EndWrite(v.key);
  return slab;
}

Result<uint64_t> ObjectCacheImpl::PunchAndDrop(const ChunkKey& key,
                                               const std::optional<EvictionRank>& stale_rank,
                                               bool* in_slot) {
  SlotRef slot;
  auto rec = index_->GetChunk(key);
  if (rec.ok() && *rec) slot = (*rec)->slot;
  if (in_slot) *in_slot = slot.valid();
  // Punch before dropping the record: a crash in between leaves a record
  // over a hole, which fails its checksum and is re-fetched. A slot's
  // blocks must go before the slot can be taken again.
  const ChunkPlace place = PlaceOf(key, slot, chunk_size_);
  auto file = store_->Get(place.file, false);
  if (file.ok()) {
    Status s = ChunkStore::Punch((*file)->fd(), place.off, place.span);
    if (!s.ok()) LOG_ERROR("freeing a cached chunk: {}", s.message());
  }
  return index_->DropChunk(key, stale_rank);
}

bool ObjectCacheImpl::IsCached(const ChunkKey& key) {
  bool verified = false;
  if (resident_->TryPin(key, &verified)) {
    resident_->Unpin(key);
    if (verified) return true;
  }
  auto rec = index_->GetChunk(key);
  return rec.ok() && rec->has_value();
}

void ObjectCacheImpl::DropBadChunk(const ChunkKey& key, bool force) {
  // Another reader still pinning it will drop it, or the next one will.
  if (!(force ? resident_->TryLatchForEvict(key) : resident_->TryLatchForDrop(key))) return;
  auto freed = PunchAndDrop(key);
  if (freed.ok()) {
    quota_.Free(*freed);
  } else {
    LOG_WARN("dropping a bad chunk: {}", freed.status().message());
  }
  resident_->ReleaseLatch(key);
}

}  // namespace stoker
