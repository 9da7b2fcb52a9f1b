#include "cache/prefetcher.h"

#include <fcntl.h>

#include <algorithm>

#include "cache/io/direct_io.h"
#include "util/log.h"

namespace stoker {

Prefetcher::Prefetcher(const CacheOptions& options, Parts parts)
    : prefetch_bytes_(options.prefetch_bytes),
      dir_prefetch_files_(options.dir_prefetch_files),
      dir_prefetch_bytes_(options.dir_prefetch_bytes),
      defer_plain_prefetch_stores_(options.defer_plain_prefetch_stores),
      verify_at_open_bytes_(options.verify_at_open_bytes),
      data_files_in_page_cache_(options.data_files_in_page_cache),
      readahead_limit_(ReadaheadLimit(options)),
      p_(std::move(parts)),
      dir_scan_(DirScan::Options{static_cast<size_t>(options.dir_prefetch_files)}, p_.list) {}

size_t Prefetcher::ReadaheadLimit(const CacheOptions& options) {
  return static_cast<size_t>(options.prefetch_bytes / options.chunk_size +
                             (2ull << 20) / options.chunk_size + 4);
}

void Prefetcher::AfterRead(OpenFileState& f, uint64_t off, uint64_t end, uint64_t last_chunk) {
  if (prefetch_bytes_ == 0) return;
  SequentialReads::Step step;
  {
    MutexLock l(f.mu);
    step = f.reads.Next(off, end, last_chunk);
    f.readahead->DropBefore(step.drop_before);
  }
  const uint64_t from = step.first;
  const uint64_t until = step.end;
  const uint64_t per_task = std::max<uint64_t>(1, (2ull << 20) / p_.chunk_size);
  for (uint64_t a = from; a < until; a += per_task) {
    uint64_t b = std::min(until, a + per_task);
    auto version = f.version;
    auto origin = f.origin;
    auto readahead = f.readahead;
    pool_->Submit(WorkerPool::Priority::kHigh, [this, version, origin, readahead, a, b] {
      PrefetchRange(version, origin, readahead, a, b);
    });
  }
}

void Prefetcher::PrefetchRange(const std::shared_ptr<ObjectVersion>& v,
                               const std::shared_ptr<OriginHandle>& origin,
                               const std::shared_ptr<Readahead>& readahead, uint64_t first,
                               uint64_t end) {
  FetchTally tally;
  Fill fill;
  fill.load_cached = true;
  fill.urgency = Urgency::kPrefetch;
  Status s = FillRange(v, *origin, first, end, &tally, readahead.get(), fill);
  p_.counters->prefetched_chunks += tally.chunks;
  if (!s.ok()) LOG_DEBUG("prefetch of '{}': {}", v->path, s.message());
}

Status Prefetcher::FillFile(const OpenFileState& file, Fill fill, FetchTally* tally) {
  const uint64_t step = std::max<uint64_t>(1, (8ull << 20) / p_.chunk_size);
  for (uint64_t first = 0; first < file.version->chunks; first += step) {
    STOKER_RETURN_IF_ERROR(
        FillRange(file.version, *file.origin, first, first + step, tally, nullptr, fill));
  }
  return Status::OK();
}

Status Prefetcher::FillRange(const std::shared_ptr<ObjectVersion>& v, OriginHandle& origin,
                             uint64_t first, uint64_t end, FetchTally* tally, Readahead* readahead,
                             Fill fill) {
  if (v->superseded) return StaleVersion(*v);
  std::vector<uint64_t> missing;
  std::vector<uint64_t> cached;
  for (uint64_t idx = first; idx < end && idx < v->chunks; ++idx) {
    if (readahead && !readahead->Wanted(idx)) continue;
    if (p_.reader->IsCached(ChunkKey{v->key.object_id, v->key.version, idx})) {
      cached.push_back(idx);
    } else {
      missing.push_back(idx);
    }
  }
  if (fill.load_cached && !cached.empty()) LoadCached(*v, cached, readahead);
  if (missing.empty() || !fill.fetch_missing) return Status::OK();
  std::vector<ChunkBytes> bytes;
  // A derived file's range is stored when this returns, after every
  // chunk's waiting readers have it: a reader that caught up with the
  // producer does not wait for the cache writes of the chunks before its
  // own. A plain file's is stored chunk by chunk (options.h says why).
  ChunkFetch::DeferredStores defer(p_.fetch, v);
  ChunkFetch::Request request;
  request.urgency = fill.urgency;
  request.readahead = readahead;
  request.ahead = readahead != nullptr;
  if (defer_plain_prefetch_stores_ || p_.derived->IsDerived(v->path)) request.defer = &defer;
  return p_.fetch->Fetch(v, origin, missing, request, &bytes, tally);
}

void Prefetcher::LoadCached(const ObjectVersion& v, const std::vector<uint64_t>& idx,
                            Readahead* readahead) {
  const uint64_t size = v.identity.size;
  std::vector<ChunkKey> pins;
  std::vector<uint64_t> verified;
  std::vector<ChunkToCheck> to_check;
  std::vector<uint64_t> claimed;
  SlotRef slot;  // only a one-chunk version has one: one file for all
  for (uint64_t i : idx) {
    ChunkKey key{v.key.object_id, v.key.version, i};
    bool ok = false;
    SlotRef at;
    if (!p_.resident->TryPin(key, &ok, &at)) continue;  // evicted meanwhile
    if (readahead && !readahead->ClaimCheck(i)) {
      p_.resident->Unpin(key);  // its reader is reading it
      continue;
    }
    pins.push_back(key);
    if (readahead) claimed.push_back(i);
    if (ok) {
      verified.push_back(i);
      slot = at;
      continue;
    }
    auto rec = p_.index->GetChunk(key);
    if (rec.ok() && *rec && (*rec)->len == ChunkLength(size, p_.chunk_size, i) &&
        SlotFits(v, (*rec)->slot)) {
      to_check.push_back({i, (*rec)->xxh3, (*rec)->slot});
      slot = (*rec)->slot;
    }
  }
  const ChunkKey first{v.key.object_id, v.key.version, idx.empty() ? 0 : idx[0]};
  auto file = p_.store->Get(PlaceOf(first, slot, p_.chunk_size).file, false);
  if (file.ok()) {
    // For a reader, verified chunks are read too, direct, and held for it:
    // its own reads would go through the page cache, a copy more (and, with
    // replies too large to splice, one more pass of the daemon's CPU over
    // the bytes). Without a reader, or for a data file kept in the page
    // cache (whose pages are the copy to keep), readahead(2) brings them
    // into the page cache without waiting.
    const bool hold = readahead != nullptr && p_.writer->Direct(v);
    // A file with a data file of its own is, passed through, read by the
    // kernel from that file with the kernel's own readahead, whose folios
    // grow to 2 MiB; readahead(2) ahead of it fills the range with 4 KiB
    // folios (page_cache_ra_unbounded), which cost its reader 10-20% from
    // memory and from the SSD. Left to the kernel.
    const bool kernel_reads =
        readahead == nullptr && data_files_in_page_cache_ && !p_.writer->UsesSlab(v);
    if (hold && !verified.empty()) {
      std::vector<ChunkToCheck> held;
      for (uint64_t i : verified) held.push_back({i, 0, slot});
      std::vector<ChunkRead> reads = p_.reader->Read(v, **file, held, /*direct=*/true);
      for (size_t k = 0; k < reads.size(); ++k) {
        // One that is not read whole is left to its reader.
        if (reads[k].whole()) readahead->Put(held[k].idx, reads[k].bytes(), readahead_limit_);
      }
    }
    for (size_t a = 0; !hold && !kernel_reads && a < verified.size();) {
      size_t b = a;
      while (b + 1 < verified.size() && verified[b + 1] == verified[b] + 1) ++b;
      const ChunkKey ka{v.key.object_id, v.key.version, verified[a]};
      const uint64_t off = PlaceOf(ka, slot, p_.chunk_size).off;
      const uint64_t end = off + ChunkOffset(p_.chunk_size, verified[b] - verified[a]) +
                           ChunkLength(size, p_.chunk_size, verified[b]);
      (void)::readahead((*file)->fd(), static_cast<off64_t>(off), end - off);
      a = b + 1;
    }
    if (!to_check.empty()) {
      std::vector<ChunkBytes> checked;
      std::vector<char> good =
          p_.reader->Check(v, **file, to_check, readahead != nullptr ? &checked : nullptr);
      for (size_t i = 0; i < good.size(); ++i) {
        if (good[i]) {
          if (readahead) readahead->Put(to_check[i].idx, checked[i], readahead_limit_);
          continue;
        }
        ChunkKey bad{v.key.object_id, v.key.version, to_check[i].idx};
        pins.erase(std::find(pins.begin(), pins.end(), bad));  // Check unpinned it
      }
    }
  }
  // After the Puts: a reader waiting for one of these finds it held.
  if (readahead) readahead->EndChecks(claimed);
  for (const ChunkKey& k : pins) p_.resident->Unpin(k);
}

void Prefetcher::AfterOpen(const std::string& path) {
  std::string next;
  std::vector<std::string> ahead = dir_scan_.OnOpen(path, &next);
  bool next_queued = false;
  for (std::string& p : ahead) {
    if (p == next) {
      // One task, so that its chunks are not checked twice at once.
      next_queued = true;
      pool_->Submit(WorkerPool::Priority::kHigh, [this, p = std::move(p)] {
        if (!VerifyAhead(p)) PrefetchFile(p);
      });
      continue;
    }
    pool_->Submit(WorkerPool::Priority::kHigh, [this, p = std::move(p)] { PrefetchFile(p); });
  }
  if (!next.empty() && !next_queued) {
    pool_->Submit(WorkerPool::Priority::kHigh, [this, p = std::move(next)] { VerifyAhead(p); });
  }
}

void Prefetcher::PrefetchFile(const std::string& path) {
  auto opened = p_.open(path);
  if (!opened.ok()) return;  // gone, or not a file: the reader will find out
  const auto& file = opened->file;
  Fill fill;
  fill.load_cached = true;
  fill.urgency = Urgency::kPrefetch;
  const uint64_t ahead =
      dir_prefetch_files_ *
      std::min<uint64_t>(dir_prefetch_bytes_, static_cast<uint64_t>(opened->st.st_size));
  fill.fetch_missing = RoomFor(*file->version, ahead);
  FetchTally tally;
  Status s = FillRange(file->version, *file->origin, 0,
                       ChunkCount(dir_prefetch_bytes_, p_.chunk_size), &tally, nullptr, fill);
  p_.counters->prefetched_chunks += tally.chunks;
  p_.counters->dir_prefetched_files++;
  if (!s.ok()) LOG_DEBUG("prefetch of '{}': {}", path, s.message());
}

bool Prefetcher::RoomFor(const ObjectVersion& v, uint64_t bytes) const {
  // A cache near its bound would evict something to take these, or refuse
  // them after reading them from the origin: there, only what it holds is
  // read ahead. The same when its disk is full, or the version could not
  // be recorded.
  return !v.uncached && p_.quota->RoomBelowLow(bytes) && !p_.writer->FreeSpaceLow(bytes);
}

Result<uint64_t> Prefetcher::FetchWhole(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(RawReader::Opened opened, p_.open(path));
  const uint64_t size = static_cast<uint64_t>(opened.st.st_size);
  Fill fill;
  fill.load_cached = true;
  fill.urgency = Urgency::kPrefetch;
  fill.fetch_missing = RoomFor(*opened.file->version, size);
  FetchTally tally;
  Status s = FillFile(*opened.file, fill, &tally);
  p_.counters->prefetched_chunks += tally.chunks;
  STOKER_RETURN_IF_ERROR(s);
  if (!fill.fetch_missing) return Status::NoSpace("the cache is near its bound");
  return size;
}

void Prefetcher::AwaitVerifyAhead(const VersionKey& key) {
  MutexLock l(ahead_mu_);
  ahead_cv_.Wait(ahead_mu_, [&]() REQUIRES(ahead_mu_) { return !verifying_ahead_.contains(key); });
}

bool Prefetcher::VerifyAhead(const std::string& path) {
  auto opened = p_.open(path);
  if (!opened.ok()) return false;
  const std::shared_ptr<ObjectVersion> v = opened->file->version;
  // What LeaseWhole would check at the open; anything else is left to it.
  if (v->uncached || v->superseded || v->chunks == 0 || p_.writer->UsesSlab(*v) ||
      v->identity.size > verify_at_open_bytes_) {
    return false;
  }
  {
    MutexLock l(ahead_mu_);
    if (verifying_ahead_.contains(v->key)) return true;
    if (verifying_ahead_.size() >= kMaxVerifyAhead) return false;
    verifying_ahead_.insert(v->key);
  }
  std::vector<ChunkKey> pins;
  std::vector<ChunkToCheck> to_check;
  bool whole = true;
  for (uint64_t i = 0; i < v->chunks && whole; ++i) {
    const ChunkKey key{v->key.object_id, v->key.version, i};
    bool verified = false;
    SlotRef slot;
    if (!p_.resident->TryPin(key, &verified, &slot)) {
      whole = false;  // not cached, or being evicted: the open reads through the daemon
      break;
    }
    pins.push_back(key);
    if (verified) continue;
    auto rec = p_.index->GetChunk(key);
    whole = rec.ok() && *rec && !(*rec)->slot.valid() &&
            (*rec)->len == ChunkLength(v->identity.size, p_.chunk_size, i);
    if (whole) to_check.push_back({i, (*rec)->xxh3, {}});
  }
  Result<std::shared_ptr<DataFile>> file = p_.store->Get(v->key, /*create=*/false);
  if (whole && !to_check.empty() && file.ok()) {
    std::vector<char> good = p_.reader->CheckInBatches(*v, **file, to_check);
    for (size_t i = 0; i < good.size(); ++i) {
      if (good[i]) continue;
      const ChunkKey bad{v->key.object_id, v->key.version, to_check[i].idx};
      pins.erase(std::find(pins.begin(), pins.end(), bad));  // Check unpinned it
    }
    p_.counters->chunks_verified_ahead += to_check.size();
  }
  for (const ChunkKey& k : pins) p_.resident->Unpin(k);
  {
    MutexLock l(ahead_mu_);
    verifying_ahead_.erase(v->key);
  }
  ahead_cv_.notify_all();
  return whole;
}

}  // namespace stoker
