#include "cache/version_leases.h"

#include <sys/stat.h>

#include <vector>

#include "util/log.h"

namespace stoker {

const char* LeaseRefusalName(LeaseRefusal why) {
  switch (why) {
    case LeaseRefusal::kEmpty:
      return "empty";
    case LeaseRefusal::kSlab:
      return "slab";
    case LeaseRefusal::kNotCached:
      return "not_cached";
    case LeaseRefusal::kNotVerified:
      return "not_verified";
    case LeaseRefusal::kUncached:
      return "disk_full";
    case LeaseRefusal::kStale:
      return "stale";
    case LeaseRefusal::kDataFile:
      return "data_file";
    case LeaseRefusal::kViewErrors:
      return "view_errors";
  }
  return "unknown";
}

// The pins of chunks [0, pinned) of one version, and its data file.
class VersionLeases::PinnedVersion final : public WholeFileLease {
 public:
  PinnedVersion(const Parts& parts, VersionKey key, uint64_t chunks, uint64_t size)
      : resident_(parts.resident),
        hits_(parts.hits),
        key_(key),
        chunks_(chunks),
        size_(size),
        skipped_(chunks, 0) {}
  ~PinnedVersion() override {
    for (uint64_t i = 0; i < pinned_; ++i) {
      if (skipped_[i]) continue;
      resident_->Unpin(ChunkKey{key_.object_id, key_.version, i});
    }
  }
  int fd() const override { return file_ ? file_->fd() : -1; }
  uint64_t object_id() const override { return key_.object_id; }
  uint64_t version() const override { return key_.version; }
  uint64_t chunks() const override { return chunks_; }
  uint64_t size() const override { return size_; }
  void CountOpen() override {
    for (uint64_t i = 0; i < chunks_; ++i) {
      hits_->RecordHit(ChunkKey{key_.object_id, key_.version, i});
    }
  }

  ResidentChunks* const resident_;
  HitLog* const hits_;
  const VersionKey key_;
  const uint64_t chunks_;
  const uint64_t size_;
  uint64_t pinned_ = 0;        // chunks [0, pinned_) were tried
  std::vector<char> skipped_;  // chunks not pinned after all
  std::shared_ptr<DataFile> file_;
};

Result<std::unique_ptr<WholeFileLease>> VersionLeases::LeaseWhole(OpenFileState& f,
                                                                  LeaseRefusal* why) {
  const std::shared_ptr<ObjectVersion>& v = f.version;
  auto refuse = [&](LeaseRefusal r) -> Status {
    *why = r;
    return Status::Error(EAGAIN, std::string("not leased whole: ") + LeaseRefusalName(r));
  };
  if (v->uncached) return refuse(LeaseRefusal::kUncached);
  if (v->superseded) return refuse(LeaseRefusal::kStale);
  if (v->chunks == 0) return refuse(LeaseRefusal::kEmpty);
  if (p_.writer->UsesSlab(*v)) return refuse(LeaseRefusal::kSlab);
  p_.prefetcher->AwaitVerifyAhead(v->key);  // rather than check the same chunks twice
  auto lease = std::make_unique<PinnedVersion>(p_, v->key, v->chunks, v->identity.size);
  // A verified chunk is in its place (a latch clears the bit first), so
  // the index need not be asked; a pin keeps it there.
  std::vector<ChunkToCheck> to_check;
  for (uint64_t i = 0; i < v->chunks; ++i) {
    const ChunkKey key{v->key.object_id, v->key.version, i};
    bool verified = false;
    SlotRef slot;
    if (!p_.resident->TryPin(key, &verified, &slot)) {
      lease->skipped_[i] = 1;
      return refuse(LeaseRefusal::kNotCached);  // the evictor holds it
    }
    lease->pinned_ = i + 1;
    if (slot.valid()) return refuse(LeaseRefusal::kSlab);
    if (verified) continue;
    auto rec = p_.index->GetChunk(key);
    if (!rec.ok() || !*rec || (*rec)->slot.valid() ||
        (*rec)->len != ChunkLength(v->identity.size, p_.chunk_size, i)) {
      return refuse(LeaseRefusal::kNotCached);
    }
    if (v->identity.size > verify_at_open_bytes_) {
      return refuse(LeaseRefusal::kNotVerified);
    }
    to_check.push_back({i, (*rec)->xxh3, {}});
  }
  Result<std::shared_ptr<DataFile>> file = p_.store->Get(v->key, /*create=*/false);
  if (!file.ok()) return refuse(LeaseRefusal::kDataFile);
  if (!to_check.empty()) {
    // First open in this process of a file held whole: check it now, as a
    // read would, through the page cache the kernel will read it from.
    std::vector<char> good = p_.reader->CheckInBatches(*v, **file, to_check);
    bool all = true;
    for (size_t i = 0; i < good.size(); ++i) {
      if (!good[i]) lease->skipped_[to_check[i].idx] = 1;  // Check unpinned it
      all = all && good[i];
    }
    p_.counters->chunks_verified_at_open += to_check.size();
    if (!all) return refuse(LeaseRefusal::kNotVerified);
  }
  struct stat st;
  if (fstat((*file)->fd(), &st) != 0 || static_cast<uint64_t>(st.st_size) != v->identity.size) {
    LOG_WARN("data file of '{}' is {} bytes, not the version's {}; not leased", v->path,
             static_cast<uint64_t>(st.st_size), v->identity.size);
    return refuse(LeaseRefusal::kDataFile);
  }
  // A version replaced while we pinned: its reads fail, so must its lease.
  if (v->superseded) return refuse(LeaseRefusal::kStale);
  // A view file's records that did not decode read as EIO, which only a
  // read through the cache can say.
  if (f.derived && p_.derived->HasUnreadableRanges(v->path)) {
    return refuse(LeaseRefusal::kViewErrors);
  }
  lease->file_ = std::move(file).value();
  return std::unique_ptr<WholeFileLease>(std::move(lease));
}

std::unique_ptr<WholeFileLease> VersionLeases::HoldVersion(uint64_t object_id, uint64_t version,
                                                           uint64_t chunks) {
  auto lease = std::make_unique<PinnedVersion>(p_, VersionKey{object_id, version}, chunks, 0);
  uint64_t missed = 0;
  for (uint64_t i = 0; i < chunks; ++i) {
    bool verified = false;
    if (!p_.resident->TryPin(ChunkKey{object_id, version, i}, &verified)) {
      lease->skipped_[i] = 1;
      missed++;
    }
    lease->pinned_ = i + 1;
  }
  if (missed > 0) LOG_WARN("{} chunks of a held version were being evicted", missed);
  return lease;
}

}  // namespace stoker
