// Prefetching: ahead of sequential readers (the chunks after what they read)
// and of readers going through a directory (the files after the one opened).
#include <fcntl.h>

#include <algorithm>

#include "cache/io/direct_io.h"
#include "cache/object_cache_impl.h"
#include "util/checksum.h"
#include "util/log.h"
#include "util/mutex.h"

namespace stoker {

void ObjectCacheImpl::MaybePrefetch(OpenFileState& f, uint64_t off, uint64_t end,
                                    uint64_t last_chunk) {
  if (options_.prefetch_bytes == 0) return;
  SequentialReads::Step step;
  {
    MutexLock l(f.mu);
    step = f.reads.Next(off, end, last_chunk);
    f.readahead->DropBefore(step.drop_before);
  }
  const uint64_t from = step.first;
  const uint64_t until = step.end;
  const uint64_t per_task = std::max<uint64_t>(1, (2ull << 20) / chunk_size_);
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

size_t ObjectCacheImpl::ReadaheadLimit() const {
  // The window, one task's worth that may land before the reader moves on,
  // and the chunks the current read spans.
  return static_cast<size_t>(options_.prefetch_bytes / chunk_size_ + (2ull << 20) / chunk_size_ +
                             4);
}

void ObjectCacheImpl::PrefetchRange(const std::shared_ptr<ObjectVersion>& v,
                                    const std::shared_ptr<OriginHandle>& origin,
                                    const std::shared_ptr<Readahead>& readahead, uint64_t first,
                                    uint64_t end) {
  FetchTally tally;
  Fill fill;
  fill.load_cached = true;
  fill.urgency = Urgency::kPrefetch;
  Status s = FillRange(v, *origin, first, end, &tally, readahead.get(), fill);
  counters_.prefetched_chunks += tally.chunks;
  if (!s.ok()) LOG_DEBUG("prefetch of '{}': {}", v->path, s.message());
}

Status ObjectCacheImpl::FillRange(const std::shared_ptr<ObjectVersion>& v, OriginHandle& origin,
                                  uint64_t first, uint64_t end, FetchTally* tally,
                                  Readahead* readahead, Fill fill) {
  if (v->superseded) return StaleVersion(*v);
  std::vector<uint64_t> missing;
  std::vector<uint64_t> cached;
  for (uint64_t idx = first; idx < end && idx < v->chunks; ++idx) {
    if (readahead && !readahead->Wanted(idx)) continue;
    if (reader_.IsCached(ChunkKey{v->key.object_id, v->key.version, idx})) {
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
  ChunkFetch::DeferredStores defer(&fetch_, v);
  ChunkFetch::Request request;
  request.urgency = fill.urgency;
  request.readahead = readahead;
  request.ahead = readahead != nullptr;
  if (options_.defer_plain_prefetch_stores || derived_->IsDerived(v->path)) request.defer = &defer;
  return fetch_.Fetch(v, origin, missing, request, &bytes, tally);
}

void ObjectCacheImpl::LoadCached(const ObjectVersion& v, const std::vector<uint64_t>& idx,
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
    if (!resident_->TryPin(key, &ok, &at)) continue;  // evicted meanwhile
    if (readahead && !readahead->ClaimCheck(i)) {
      resident_->Unpin(key);  // its reader is reading it
      continue;
    }
    pins.push_back(key);
    if (readahead) claimed.push_back(i);
    if (ok) {
      verified.push_back(i);
      slot = at;
      continue;
    }
    auto rec = index_->GetChunk(key);
    if (rec.ok() && *rec && (*rec)->len == ChunkLength(size, chunk_size_, i) &&
        SlotFits(v, (*rec)->slot)) {
      to_check.push_back({i, (*rec)->xxh3, (*rec)->slot});
      slot = (*rec)->slot;
    }
  }
  const ChunkKey first{v.key.object_id, v.key.version, idx.empty() ? 0 : idx[0]};
  auto file = store_->Get(PlaceOf(first, slot, chunk_size_).file, false);
  if (file.ok()) {
    // For a reader, verified chunks are read too, direct, and held for it:
    // its own reads would go through the page cache, a copy more (and, with
    // replies too large to splice, one more pass of the daemon's CPU over
    // the bytes). Without a reader, readahead(2) brings them into the page
    // cache without waiting.
    if (readahead != nullptr && !verified.empty()) {
      std::vector<ChunkToCheck> held;
      for (uint64_t i : verified) held.push_back({i, 0, slot});
      std::vector<ChunkRead> reads = reader_.Read(v, **file, held, /*direct=*/true);
      for (size_t k = 0; k < reads.size(); ++k) {
        // One that is not read whole is left to its reader.
        if (reads[k].whole()) readahead->Put(held[k].idx, reads[k].bytes(), ReadaheadLimit());
      }
    }
    for (size_t a = 0; readahead == nullptr && a < verified.size();) {
      size_t b = a;
      while (b + 1 < verified.size() && verified[b + 1] == verified[b] + 1) ++b;
      const ChunkKey ka{v.key.object_id, v.key.version, verified[a]};
      const uint64_t off = PlaceOf(ka, slot, chunk_size_).off;
      const uint64_t end = off + ChunkOffset(chunk_size_, verified[b] - verified[a]) +
                           ChunkLength(size, chunk_size_, verified[b]);
      (void)::readahead((*file)->fd(), static_cast<off64_t>(off), end - off);
      a = b + 1;
    }
    if (!to_check.empty()) {
      std::vector<ChunkBytes> checked;
      std::vector<char> good =
          reader_.Check(v, **file, to_check, readahead != nullptr ? &checked : nullptr);
      for (size_t i = 0; i < good.size(); ++i) {
        if (good[i]) {
          if (readahead) readahead->Put(to_check[i].idx, checked[i], ReadaheadLimit());
          continue;
        }
        ChunkKey bad{v.key.object_id, v.key.version, to_check[i].idx};
        pins.erase(std::find(pins.begin(), pins.end(), bad));  // Check unpinned it
      }
    }
  }
  // After the Puts: a reader waiting for one of these finds it held.
  if (readahead) readahead->EndChecks(claimed);
  for (const ChunkKey& k : pins) resident_->Unpin(k);
}

void ObjectCacheImpl::MaybePrefetchDir(const std::string& path) {
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

void ObjectCacheImpl::PrefetchFile(const std::string& path) {
  auto opened = OpenAs(path, false, Opener::kBackground);
  if (!opened.ok()) return;  // gone, or not a file: the reader will find out
  const auto& file = opened->file;
  Fill fill;
  fill.load_cached = true;
  fill.urgency = Urgency::kPrefetch;
  // A cache near its bound would evict something to take these, or refuse
  // them after reading them from the origin: there, only what it holds is
  // read ahead.
  // The same when its disk is full, or the version could not be recorded.
  const uint64_t ahead =
      options_.dir_prefetch_files *
      std::min<uint64_t>(options_.dir_prefetch_bytes, static_cast<uint64_t>(opened->st.st_size));
  fill.fetch_missing =
      !file->version->uncached && quota_.RoomBelowLow(ahead) && !writer_.FreeSpaceLow(ahead);
  FetchTally tally;
  Status s = FillRange(file->version, *file->origin, 0,
                       ChunkCount(options_.dir_prefetch_bytes, chunk_size_), &tally, nullptr, fill);
  counters_.prefetched_chunks += tally.chunks;
  counters_.dir_prefetched_files++;
  if (!s.ok()) LOG_DEBUG("prefetch of '{}': {}", path, s.message());
}

}  // namespace stoker
