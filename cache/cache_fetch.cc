// ObjectCache misses: collapsing concurrent fetches, one origin read per run
// of consecutive chunks, the identity check after it, and prefetching ahead
// of sequential readers.
#include <fcntl.h>

#include <algorithm>

#include "cache/io/direct_io.h"
#include "cache/object_cache_impl.h"
#include "util/checksum.h"
#include "util/log.h"
#include "util/mutex.h"

namespace stoker {
namespace {

// One origin read covers at most this many bytes of consecutive misses.
constexpr uint64_t kMaxRunBytes = 8ull << 20;

}  // namespace

ObjectCacheImpl::DeferredStores::~DeferredStores() {
  for (const auto& [idx, bytes] : chunks_) {
    cache_->writer_.Store(*v_, idx, bytes);
    cache_->unstored_.Remove(ChunkKey{v_->key.object_id, v_->key.version, idx});
  }
}

bool ObjectCacheImpl::DeferredStores::Defer(uint64_t idx, const ChunkBytes& bytes) {
  if (!cache_->unstored_.Add(ChunkKey{v_->key.object_id, v_->key.version, idx}, bytes)) {
    return false;
  }
  chunks_.emplace_back(idx, bytes);
  return true;
}

// One FetchChunks call: what it was asked, what it has, and this round's
// flights (a flight abandoned by a prefetch, EAGAIN, is joined again in the
// next round).
struct ObjectCacheImpl::FetchJob {
  const std::shared_ptr<ObjectVersion>& v;
  OriginHandle& origin;
  const std::vector<uint64_t>& idx;
  std::vector<ChunkBytes>* out;
  FetchTally* tally;
  Readahead* readahead;
  bool ahead;
  DeferredStores* defer;
  std::vector<char> done;  // per chunk: has its bytes or its error
  Status first_error;
  bool expedited = false;
  std::vector<std::shared_ptr<Fetcher::Flight>> flights;
  std::vector<char> leader;  // per chunk: this call leads its flight
  ChunkKey Key(size_t i) const { return ChunkKey{v->key.object_id, v->key.version, idx[i]}; }
};

Status ObjectCacheImpl::FetchChunks(const std::shared_ptr<ObjectVersion>& v, OriginHandle& origin,
                                    const std::vector<uint64_t>& idx, std::vector<ChunkBytes>* out,
                                    FetchTally* tally, Readahead* readahead, bool ahead,
                                    DeferredStores* defer) {
  FetchJob job{v,     origin, idx,          out,   tally, readahead, ahead,
               defer, {},     Status::OK(), false, {},    {}};
  out->assign(idx.size(), ChunkBytes{});
  job.done.assign(idx.size(), 0);
  for (int round = 0; round < 8; ++round) {
    if (!JoinFlights(job)) return job.first_error;
    TakeHeld(job);
    // Lead first, wait after: see fetcher.h.
    LeadRuns(job);
    AwaitFollowed(job);
  }
  return job.first_error.ok() ? Status::IOError("fetch of '" + v->path + "' kept being abandoned")
                              : job.first_error;
}

bool ObjectCacheImpl::JoinFlights(FetchJob& job) {
  const size_t n = job.idx.size();
  job.flights.assign(n, nullptr);
  job.leader.assign(n, 0);
  bool pending = false;
  for (size_t i = 0; i < n; ++i) {
    if (job.done[i]) continue;
    pending = true;
    bool lead = false;
    job.flights[i] = fetcher_.Join(job.Key(i), &lead);
    job.leader[i] = lead;
  }
  return pending;
}

void ObjectCacheImpl::TakeHeld(FetchJob& job) {
  // A fetch that completed between our miss and our Join has stored the
  // chunk already, or left it in this file's readahead or in unstored_
  // (leaders do that before completing): use that, not the origin. A
  // prefetch whose reader went past the chunk meanwhile gives it up.
  for (size_t i = 0; i < job.idx.size(); ++i) {
    if (!job.leader[i]) continue;
    const ChunkKey key = job.Key(i);
    std::optional<ChunkBytes> stored;
    if (job.readahead) stored = job.readahead->Get(job.idx[i]);
    if (!stored) stored = unstored_.Get(key);
    if (!stored) stored = reader_.LoadStored(*job.v, job.idx[i]);
    if (stored) {
      (*job.out)[i] = *stored;
      fetcher_.Complete(key, job.flights[i], *stored);
    } else if (job.ahead && job.readahead && !job.readahead->Wanted(job.idx[i])) {
      fetcher_.Complete(key, job.flights[i], Status::Error(EAGAIN, "prefetch no longer needed"));
    } else {
      continue;
    }
    job.leader[i] = 0;
    job.done[i] = 1;
  }
}

void ObjectCacheImpl::LeadRuns(FetchJob& job) {
  // Consecutive chunks this call leads are read from the origin as one run.
  const size_t n = job.idx.size();
  const uint64_t max_run = std::max<uint64_t>(1, kMaxRunBytes / chunk_size_);
  for (size_t i = 0; i < n;) {
    if (!job.leader[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < n && job.leader[j + 1] && job.idx[j + 1] == job.idx[j] + 1 &&
           j + 1 - i < max_run) {
      ++j;
    }
    auto run = origin_reader_.ReadRun(*job.v, job.origin, job.idx[i], j - i + 1);
    for (size_t k = i; k <= j; ++k) {
      const ChunkKey key = job.Key(k);
      job.done[k] = 1;
      if (!run.ok()) {
        fetcher_.Complete(key, job.flights[k], run.status());
        continue;
      }
      const ChunkBytes& bytes = (*run)[k - i];
      if (job.defer == nullptr || !job.defer->Defer(job.idx[k], bytes)) {
        writer_.Store(*job.v, job.idx[k], bytes);
      }
      // Held even when cached: eviction takes the newest chunks first,
      // which are just the ones fetched ahead of their reader.
      if (job.readahead) job.readahead->Put(job.idx[k], bytes, ReadaheadLimit());
      (*job.out)[k] = bytes;
      job.tally->chunks++;
      job.tally->bytes += bytes.len;
      fetcher_.Complete(key, job.flights[k], bytes);
    }
    if (!run.ok() && job.first_error.ok()) job.first_error = run.status();
    i = j + 1;
  }
}

void ObjectCacheImpl::AwaitFollowed(FetchJob& job) {
  for (size_t i = 0; i < job.idx.size(); ++i) {
    if (job.done[i]) continue;
    if (!job.expedited) {
      // Who leads the fetch may produce it at a lower priority (a
      // prefetch, a warm): a derived origin moves that work up to ours.
      derived_->Expedite(job.v->path);
      job.expedited = true;
    }
    counters_.collapsed_misses++;
    auto r = Fetcher::Wait(job.flights[i]);
    if (r.ok()) {
      (*job.out)[i] = *r;
      job.done[i] = 1;
    } else if (r.status().code() != EAGAIN) {
      job.done[i] = 1;
      if (job.first_error.ok()) job.first_error = r.status();
    }
  }
}

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
  DeferredStores defer(this, v);
  const bool defer_stores = options_.defer_plain_prefetch_stores || derived_->IsDerived(v->path);
  return FetchChunks(v, origin, missing, &bytes, tally, readahead, readahead != nullptr,
                     defer_stores ? &defer : nullptr);
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
