// Prefetcher: reading ahead of readers, on the worker pool at its high
// priority, and filling a range of a file for a warm.
//
// - A sequential reader (SequentialReads): the chunks a window past it are
//   fetched, and cached ones read back and checked, into its open file's
//   Readahead, so that its next reads find them in memory.
// - A reader going through a directory in order (DirScan): the first chunks
//   of the files after the one it opened are fetched into the cache; the very
//   next one, if the cache holds it whole, is only checked (VerifyAhead), so
//   that its open is leased to the kernel at once (LeaseWhole waits for such
//   a check rather than repeat it: AwaitVerifyAhead).
// - A reader going through a sampler's order (OrderPrefetcher): whole files
//   ahead of it (FetchWhole).
// - Near its bound (or with its disk full) the cache reads ahead only what it
//   holds: a prefetch never evicts to make room.
//
// Thread-safety: all methods are thread-safe. Start before the first
// AfterRead or AfterOpen; the pool stops before the Prefetcher goes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "cache/cache_stats.h"
#include "cache/chunk_fetch.h"
#include "cache/chunk_index.h"
#include "cache/chunk_reader.h"
#include "cache/chunk_store.h"
#include "cache/chunk_writer.h"
#include "cache/derived_source.h"
#include "cache/dir_scan.h"
#include "cache/eviction.h"
#include "cache/open_file_state.h"
#include "cache/options.h"
#include "cache/raw_reader.h"
#include "cache/resident_chunks.h"
#include "cache/worker_pool.h"
#include "util/mutex.h"

namespace stoker {

// How FillRange treats the chunks of its range.
struct Fill {
  bool fetch_missing = true;  // fetch absent chunks from the origin
  // Verify cached chunks not yet verified, and have the kernel read the
  // verified ones into the page cache, so that the reader finds them there.
  bool load_cached = false;
  Urgency urgency = Urgency::kPrefetch;  // whom the range is fetched for
};

class Prefetcher {
 public:
  // The parts it reads ahead with; all outlive it.
  struct Parts {
    uint64_t chunk_size = 0;
    ChunkIndex* index = nullptr;
    ChunkStore* store = nullptr;
    Quota* quota = nullptr;
    ResidentChunks* resident = nullptr;
    ChunkWriter* writer = nullptr;
    ChunkReader* reader = nullptr;
    ChunkFetch* fetch = nullptr;
    DerivedSource* derived = nullptr;
    CacheCounters* counters = nullptr;
    // Opens a path as the cache's background work (no change reported, no
    // directory scan started).
    std::function<Result<RawReader::Opened>(const std::string& path)> open;
    // Lists the regular files of a directory (DirScan's lister).
    DirScan::Lister list;
  };
  // options: prefetch_bytes, dir_prefetch_files, dir_prefetch_bytes,
  // defer_plain_prefetch_stores, verify_at_open_bytes and
  // data_files_in_page_cache are used.
  Prefetcher(const CacheOptions& options, Parts parts);

  void Start(WorkerPool* pool) { pool_ = pool; }

  // A read of [off, end) of f, whose last chunk is last_chunk, was served:
  // queues what its read pattern says to fetch ahead.
  void AfterRead(OpenFileState& f, uint64_t off, uint64_t end, uint64_t last_chunk);
  // path was opened by a reader: queues the files a directory scan says to
  // read ahead of it.
  void AfterOpen(const std::string& path);

  // Fetches whatever is missing of chunks [first, end) of v and stores it
  // before returning, once every reader waiting on those chunks has their
  // bytes. readahead: where the chunks are held too (may be null).
  Status FillRange(const std::shared_ptr<ObjectVersion>& v, OriginHandle& origin, uint64_t first,
                   uint64_t end, FetchTally* tally, Readahead* readahead, Fill fill);

  // Fetches whatever is missing of the whole file, a FillRange of 8 MiB at
  // a time (a warm); stops at the first error.
  Status FillFile(const OpenFileState& file, Fill fill, FetchTally* tally);

  // Fetches whatever is missing of the file at path, whole, ahead of a
  // reader that will open it (at high priority: OrderPrefetcher's
  // FetchFile). Its size in bytes; ENOSPC near the cache's bound, where only
  // what it holds is checked.
  Result<uint64_t> FetchWhole(const std::string& path);

  // Waits while VerifyAhead checks version key.
  void AwaitVerifyAhead(const VersionKey& key);

  // Most chunks a Readahead holds: the window, one task's worth that may
  // land before the reader moves on, and the chunks a read spans.
  static size_t ReadaheadLimit(const CacheOptions& options);

 private:
  void PrefetchRange(const std::shared_ptr<ObjectVersion>& v,
                     const std::shared_ptr<OriginHandle>& origin,
                     const std::shared_ptr<Readahead>& readahead, uint64_t first, uint64_t end);
  // The cached chunks among idx (ascending), verified or read ahead. With a
  // readahead, they are read (and verified, if this process has not) and
  // held there for the reader, claimed while they are read.
  void LoadCached(const ObjectVersion& v, const std::vector<uint64_t>& idx, Readahead* readahead);
  // Whether the cache takes bytes more of v ahead of a reader: not near its
  // bound (a prefetch never evicts to make room), its disk not full, the
  // version recorded.
  bool RoomFor(const ObjectVersion& v, uint64_t bytes) const;
  // Reads ahead the first chunks of a file a directory scan found.
  void PrefetchFile(const std::string& path);
  // The file a scanning reader opens next, if the cache holds it whole and
  // it would be verified at its open (LeaseWhole): verified now, through the
  // page cache, so that the open finds it checked and its pages there.
  // False if the cache does not hold it whole (nothing was checked).
  bool VerifyAhead(const std::string& path);

  const uint64_t prefetch_bytes_;
  const uint64_t dir_prefetch_files_;
  const uint64_t dir_prefetch_bytes_;
  const bool defer_plain_prefetch_stores_;
  const uint64_t verify_at_open_bytes_;
  const bool data_files_in_page_cache_;
  const size_t readahead_limit_;
  const Parts p_;
  DirScan dir_scan_;
  WorkerPool* pool_ = nullptr;  // set by Start

  // Versions VerifyAhead checks now (at most kMaxVerifyAhead).
  static constexpr size_t kMaxVerifyAhead = 2;
  Mutex ahead_mu_;
  CondVar ahead_cv_;
  std::unordered_set<VersionKey, VersionKeyHash> verifying_ahead_ GUARDED_BY(ahead_mu_);
};

}  // namespace stoker
