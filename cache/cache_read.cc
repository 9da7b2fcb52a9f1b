// ObjectCache reads: serving present chunks from their data file, verifying
// chunks this process has not checked yet, fetching and storing misses, and
// prefetching ahead of sequential readers.
#include <sys/statvfs.h>

#include <algorithm>

#include "cache/object_cache_impl.h"
#include "util/checksum.h"
#include "util/log.h"

namespace stoker {
namespace {

// One origin read covers at most this many bytes of consecutive misses.
constexpr uint64_t kMaxRunBytes = 8ull << 20;

Status Stale(const ObjectVersion& v) {
  return Status::Error(ESTALE, "origin file '" + v.path + "' changed; reopen it");
}

// Accumulates segments, merging neighbours in one descriptor or buffer.
class SegmentBuilder {
 public:
  explicit SegmentBuilder(ReadReply* out) : out_(out) {}
  void Fd(int fd, uint64_t off, size_t len) {
    if (cur_.fd == fd && cur_.mem == nullptr && static_cast<uint64_t>(cur_.off) + cur_.len == off) {
      cur_.len += len;
      return;
    }
    Flush();
    cur_ = {fd, static_cast<off_t>(off), nullptr, len};
  }
  void Mem(const char* p, size_t len) {
    if (cur_.mem != nullptr && cur_.mem + cur_.len == p) {
      cur_.len += len;
      return;
    }
    Flush();
    cur_ = {-1, 0, p, len};
  }
  void Flush() {
    if (cur_.len == 0) return;
    if (cur_.mem) {
      out_->AddMem(cur_.mem, cur_.len);
    } else {
      out_->AddFd(cur_.fd, cur_.off, cur_.len);
    }
    cur_ = {};
  }

 private:
  ReadReply* out_;
  ReadSegment cur_;
};

}  // namespace

Status ObjectCacheImpl::Read(OpenFileState& f, uint64_t off, size_t len, ReadReply* out) {
  const std::shared_ptr<ObjectVersion>& v = f.version;
  if (v->superseded) {
    counters_.errors++;
    return Stale(*v);
  }
  const uint64_t size = v->identity.size;
  ChunkSpan span = SpanOf(size, chunk_size_, off, len);
  if (span.count == 0) return Status::OK();

  auto keep = std::make_unique<PinKeepalive>();
  keep->resident = resident_;
  std::vector<char> from_fd(span.count, 0);
  std::vector<uint64_t> missing;
  std::vector<uint64_t> unverified;
  for (uint64_t c = 0; c < span.count; ++c) {
    uint64_t idx = span.first + c;
    ChunkKey key{v->key.object_id, v->key.version, idx};
    bool verified = false;
    if (!resident_->TryPin(key, &verified)) {
      missing.push_back(idx);
    } else if (verified) {
      from_fd[c] = 1;
      keep->pins.push_back(key);
    } else {
      unverified.push_back(idx);
    }
  }

  // First serve of a chunk in this process: find its record, read it back
  // and check it. A data file gone under its records means those records
  // are wrong: they are dropped and the chunks fetched.
  std::vector<std::pair<uint64_t, uint64_t>> to_check;  // chunk, checksum
  for (uint64_t idx : unverified) {
    ChunkKey key{v->key.object_id, v->key.version, idx};
    auto rec = index_->GetChunk(key);
    if (rec.ok() && *rec && (*rec)->len == ChunkLength(size, chunk_size_, idx)) {
      to_check.emplace_back(idx, (*rec)->xxh3);
      continue;
    }
    resident_->Unpin(key);
    if (!rec.ok() || *rec) DropBadChunk(key);
    missing.push_back(idx);
  }
  if ((!keep->pins.empty() || !to_check.empty()) && !keep->file) {
    auto file = store_->Get(v->key, false);
    if (file.ok()) {
      keep->file = *file;
    } else {
      LOG_WARN("cache data file of '{}' is missing; re-fetching", v->path);
      for (const ChunkKey& k : keep->pins) {
        from_fd[k.index - span.first] = 0;
        to_check.emplace_back(k.index, 0);
      }
      keep->pins.clear();
      for (const auto& [idx, sum] : to_check) {
        ChunkKey k{v->key.object_id, v->key.version, idx};
        resident_->Unpin(k);
        DropBadChunk(k);
        missing.push_back(idx);
      }
      to_check.clear();
    }
  }
  if (!to_check.empty()) {
    std::vector<ReadOp> ops;
    std::vector<std::unique_ptr<char[]>> bufs;
    for (const auto& [idx, sum] : to_check) {
      uint64_t expect = ChunkLength(size, chunk_size_, idx);
      bufs.emplace_back(new char[expect]);
      ReadOp op;
      op.fd = keep->file->fd();
      op.buf = bufs.back().get();
      op.len = expect;
      op.off = static_cast<off_t>(ChunkOffset(chunk_size_, idx));
      ops.push_back(std::move(op));
    }
    io_->ReadBatch(ops);
    for (size_t i = 0; i < ops.size(); ++i) {
      const uint64_t idx = to_check[i].first;
      ChunkKey key{v->key.object_id, v->key.version, idx};
      bool good = ops[i].status.ok() && ops[i].done == ops[i].len &&
                  ChunkChecksum(ops[i].buf, ops[i].len) == to_check[i].second;
      if (good) {
        resident_->MarkVerified(key);
        keep->pins.push_back(key);
        from_fd[idx - span.first] = 1;
        continue;
      }
      if (ops[i].status.ok()) {
        counters_.checksum_failures++;
        LOG_WARN("cached chunk {} of '{}' fails its checksum; re-fetching", idx, v->path);
      } else {
        LOG_WARN("reading cached chunk {} of '{}': {}; re-fetching", idx, v->path,
                 ops[i].status.message());
      }
      resident_->Unpin(key);
      DropBadChunk(key);
      missing.push_back(idx);
    }
  }

  std::vector<ChunkBytes> fetched;
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end());
    FetchTally tally;
    Status s = FetchChunks(v, *f.origin, missing, &fetched, &tally);
    if (!s.ok()) {
      counters_.errors++;
      return s;
    }
  }

  SegmentBuilder seg(out);
  uint64_t hit_bytes = 0;
  size_t m = 0;
  const uint64_t end = span.off + span.len;
  for (uint64_t c = 0; c < span.count; ++c) {
    uint64_t idx = span.first + c;
    uint64_t start = ChunkOffset(chunk_size_, idx);
    uint64_t a = std::max(span.off, start);
    uint64_t b = std::min(end, start + ChunkLength(size, chunk_size_, idx));
    if (from_fd[c]) {
      seg.Fd(keep->file->fd(), a, b - a);
      hit_bytes += b - a;
      RecordHit(ChunkKey{v->key.object_id, v->key.version, idx});
    } else {
      STOKER_CHECK(m < missing.size() && missing[m] == idx, "fetched chunks out of step");
      const ChunkBytes& bytes = fetched[m++];
      seg.Mem(bytes.data.get() + (a - start), b - a);
      if (bytes.from_cache) hit_bytes += b - a;
      keep->buffers.push_back(bytes);
    }
  }
  seg.Flush();
  out->Keep(std::move(keep));
  counters_.bytes_read += span.len;
  counters_.cache_hit_bytes += hit_bytes;
  MaybePrefetch(f, span.off, end, span.first + span.count - 1);
  return Status::OK();
}

Status ObjectCacheImpl::FetchChunks(const std::shared_ptr<ObjectVersion>& v, OriginHandle& origin,
                                    const std::vector<uint64_t>& idx,
                                    std::vector<ChunkBytes>* out, FetchTally* tally) {
  const size_t n = idx.size();
  out->assign(n, ChunkBytes{});
  std::vector<std::shared_ptr<Fetcher::Flight>> flights(n);
  std::vector<char> leader(n, 0);
  for (size_t i = 0; i < n; ++i) {
    bool lead = false;
    flights[i] = fetcher_.Join(ChunkKey{v->key.object_id, v->key.version, idx[i]}, &lead);
    leader[i] = lead;
  }
  // A fetch that completed between our miss and our Join has stored the
  // chunk already (leaders store before completing): use it, not the origin.
  std::vector<char> resolved(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!leader[i]) continue;
    if (auto stored = LoadStored(*v, idx[i])) {
      (*out)[i] = *stored;
      fetcher_.Complete(ChunkKey{v->key.object_id, v->key.version, idx[i]}, flights[i], *stored);
      leader[i] = 0;
      resolved[i] = 1;
    }
  }
  Status first_error;
  const uint64_t max_run = std::max<uint64_t>(1, kMaxRunBytes / chunk_size_);
  // Lead first, wait after: see fetcher.h.
  for (size_t i = 0; i < n;) {
    if (!leader[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < n && leader[j + 1] && idx[j + 1] == idx[j] + 1 && j + 1 - i < max_run) ++j;
    auto run = ReadRun(*v, origin, idx[i], j - i + 1);
    for (size_t k = i; k <= j; ++k) {
      ChunkKey key{v->key.object_id, v->key.version, idx[k]};
      if (run.ok()) {
        const ChunkBytes& bytes = (*run)[k - i];
        StoreChunk(v, idx[k], bytes);
        (*out)[k] = bytes;
        tally->chunks++;
        tally->bytes += bytes.len;
        fetcher_.Complete(key, flights[k], bytes);
      } else {
        fetcher_.Complete(key, flights[k], run.status());
      }
    }
    if (!run.ok() && first_error.ok()) first_error = run.status();
    i = j + 1;
  }
  for (size_t i = 0; i < n; ++i) {
    if (leader[i] || resolved[i]) continue;
    counters_.collapsed_misses++;
    auto r = Fetcher::Wait(flights[i]);
    if (r.ok()) {
      (*out)[i] = *r;
    } else if (first_error.ok()) {
      first_error = r.status();
    }
  }
  return first_error;
}

Result<std::vector<ChunkBytes>> ObjectCacheImpl::ReadRun(const ObjectVersion& v,
                                                         OriginHandle& origin, uint64_t first,
                                                         uint64_t n) {
  const uint64_t size = v.identity.size;
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; ++i) total += ChunkLength(size, chunk_size_, first + i);
  auto origin_error = [&](const Status& s) -> Status {
    if (IsOriginUnavailable(s.code())) counters_.origin_errors++;
    if (s.code() == ENOENT) {
      v.changed_at_origin.store(true);
      return Status::Error(ESTALE, s.message());
    }
    return s;
  };
  auto file = origin.Get();
  if (!file.ok()) return origin_error(file.status());
  std::shared_ptr<char[]> buf(new char[total]);
  counters_.origin_reads++;
  auto got = (*file)->ReadAt(buf.get(), total, ChunkOffset(chunk_size_, first));
  if (!got.ok()) return origin_error(got.status());
  counters_.origin_bytes_read += *got;
  // What was read must be the version this file state stands for, or one
  // read could mix old and new content.
  auto id = (*file)->Identity();
  if (!id.ok()) return origin_error(id.status());
  if (!(*id == v.identity)) {
    v.changed_at_origin.store(true);
    LOG_WARN("origin file '{}' changed while being read; not caching", v.path);
    return Stale(v);
  }
  if (*got != total) {
    return Status::IOError("origin file '" + v.path + "' returned " + std::to_string(*got) +
                           " of " + std::to_string(total) + " bytes");
  }
  counters_.chunks_fetched += n;
  std::vector<ChunkBytes> chunks;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t len = ChunkLength(size, chunk_size_, first + i);
    chunks.push_back(ChunkBytes{std::shared_ptr<const char>(buf, buf.get() + pos), len});
    pos += len;
  }
  return chunks;
}

bool ObjectCacheImpl::FreeSpaceLow(uint64_t need) {
  struct statvfs vfs;
  if (::statvfs(options_.dir.c_str(), &vfs) != 0) return true;
  uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  uint64_t min_free = options_.min_free_bytes;
  if (min_free == 0) {
    min_free = std::min<uint64_t>(1ull << 30, static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize / 20);
  }
  return avail < min_free + need;
}

void ObjectCacheImpl::StoreChunk(const std::shared_ptr<ObjectVersion>& v, uint64_t idx,
                                 const ChunkBytes& bytes) {
  if (v->superseded) return;
  const ChunkKey key{v->key.object_id, v->key.version, idx};
  const uint64_t alloc = AllocatedBytes(bytes.len);
  auto not_cached = [&](const char* why) {
    counters_.chunks_not_cached++;
    if (!logged_no_space_.exchange(true)) {
      LOG_WARN("serving from the origin without caching: {}", why);
    }
  };
  if (FreeSpaceLow(alloc)) return not_cached("the cache filesystem is low on free space");
  RefreshIndexBytes();
  if (!quota_.TryReserve(alloc)) {
    KickEvictor();
    return not_cached("the cache is full (eviction is running)");
  }
  bool verified = false;
  if (!resident_->TryPin(key, &verified)) return quota_.Release(alloc);
  auto done = [&](bool committed) {
    if (committed) {
      quota_.Commit(alloc);
    } else {
      quota_.Release(alloc);
    }
    resident_->Unpin(key);
  };
  auto existing = index_->GetChunk(key);
  if (verified || !existing.ok() || *existing) return done(false);

  auto file = store_->BeginWrite(v->key, [&] { return v->superseded.load(); });
  if (!file.ok()) {
    if (file.status().code() != ESTALE) LOG_WARN("caching a chunk: {}", file.status().message());
    return done(false);
  }
  bool committed = false;
  const uint64_t off = ChunkOffset(chunk_size_, idx);
  Status s = index_->PutIntent(key);
  if (s.ok()) {
    s = io_->Write((*file)->fd(), bytes.data.get(), bytes.len, static_cast<off_t>(off));
    if (s.ok()) {
      uint64_t tick = index_->Tick();
      ChunkRecord rec{static_cast<uint32_t>(bytes.len), ChunkChecksum(bytes.data.get(), bytes.len),
                      alloc, tick, HitState::kProbationary, tick};
      s = index_->CommitChunk(key, rec);
      committed = s.ok();
    }
    if (!committed) {
      // Whatever reached the file goes; the intent covers a crash right here.
      (void)ChunkStore::Punch((*file)->fd(), off, chunk_size_);
      (void)index_->DeleteIntent(key);
    }
  }
  if (committed) {
    resident_->MarkVerified(key);
    RecordInsert(key);
    counters_.chunks_written++;
  } else if (s.code() == ENOSPC) {
    not_cached("the cache filesystem is full");
  } else {
    LOG_WARN("caching chunk {} of '{}': {}", idx, v->path, s.message());
  }
  store_->EndWrite(v->key);
  done(committed);
  if (quota_.AboveHigh()) KickEvictor();
}

std::optional<ChunkBytes> ObjectCacheImpl::LoadStored(const ObjectVersion& v, uint64_t idx) {
  auto rec = index_->GetChunk(ChunkKey{v.key.object_id, v.key.version, idx});
  if (!rec.ok() || !*rec || (*rec)->len != ChunkLength(v.identity.size, chunk_size_, idx)) {
    return std::nullopt;
  }
  auto file = store_->Get(v.key, false);
  if (!file.ok()) return std::nullopt;
  std::shared_ptr<char[]> buf(new char[(*rec)->len]);
  auto got = io_->Read((*file)->fd(), buf.get(), (*rec)->len,
                       static_cast<off_t>(ChunkOffset(chunk_size_, idx)));
  // Not pinned: an eviction racing with us yields a hole, which fails here.
  if (!got.ok() || *got != (*rec)->len || ChunkChecksum(buf.get(), *got) != (*rec)->xxh3) {
    return std::nullopt;
  }
  return ChunkBytes{std::shared_ptr<const char>(buf, buf.get()), *got, true};
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

void ObjectCacheImpl::DropBadChunk(const ChunkKey& key) {
  // Another reader still pinning it will drop it, or the next one will.
  if (!resident_->TryLatchForEvict(key)) return;
  auto file = store_->Get(key.version_key(), false);
  if (file.ok()) (void)ChunkStore::Punch((*file)->fd(), ChunkOffset(chunk_size_, key.index), chunk_size_);
  auto freed = index_->DropChunk(key);
  if (freed.ok()) {
    quota_.Free(*freed);
  } else {
    LOG_WARN("dropping a bad chunk: {}", freed.status().message());
  }
  resident_->ReleaseLatch(key);
}

void ObjectCacheImpl::MaybePrefetch(OpenFileState& f, uint64_t off, uint64_t end,
                                    uint64_t last_chunk) {
  if (options_.prefetch_bytes == 0) return;
  const auto& v = f.version;
  uint64_t from = 0, until = 0;
  {
    std::lock_guard<std::mutex> l(f.mu);
    bool sequential = off == f.next_off;
    f.next_off = end;
    if (!sequential) {
      f.prefetched_until = 0;
      return;
    }
    until = std::min(v->chunks, ChunkCount(end + options_.prefetch_bytes, chunk_size_));
    from = std::max(f.prefetched_until, last_chunk + 1);
    // Wait for half a window of new chunks, so that tasks are not one chunk each.
    uint64_t window = std::max<uint64_t>(1, options_.prefetch_bytes / chunk_size_);
    if (from >= until || (until - from < (window + 1) / 2 && until < v->chunks)) return;
    f.prefetched_until = until;
  }
  const uint64_t per_task = std::max<uint64_t>(1, (2ull << 20) / chunk_size_);
  for (uint64_t a = from; a < until; a += per_task) {
    uint64_t b = std::min(until, a + per_task);
    auto version = f.version;
    auto origin = f.origin;
    pool_->Submit(WorkerPool::Priority::kHigh,
                  [this, version, origin, a, b] { PrefetchRange(version, origin, a, b); });
  }
}

void ObjectCacheImpl::PrefetchRange(const std::shared_ptr<ObjectVersion>& v,
                                    const std::shared_ptr<OriginHandle>& origin, uint64_t first,
                                    uint64_t end) {
  FetchTally tally;
  Status s = FillRange(v, *origin, first, end, &tally);
  counters_.prefetched_chunks += tally.chunks;
  if (!s.ok()) LOG_DEBUG("prefetch of '{}': {}", v->path, s.message());
}

Status ObjectCacheImpl::FillRange(const std::shared_ptr<ObjectVersion>& v, OriginHandle& origin,
                                  uint64_t first, uint64_t end, FetchTally* tally) {
  if (v->superseded) return Stale(*v);
  std::vector<uint64_t> missing;
  for (uint64_t idx = first; idx < end && idx < v->chunks; ++idx) {
    if (!IsCached(ChunkKey{v->key.object_id, v->key.version, idx})) missing.push_back(idx);
  }
  if (missing.empty()) return Status::OK();
  std::vector<ChunkBytes> bytes;
  return FetchChunks(v, origin, missing, &bytes, tally);
}

}  // namespace stoker
