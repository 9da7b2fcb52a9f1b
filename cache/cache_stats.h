// CacheStats: the counters behind MOUNTPOINT/.stoker/stats.json and
// `stoker stat`. Counters are monotonic for the life of a daemon process
// except the gauges (cache_used_bytes, objects, chunks, ...), which are read
// from the index at snapshot time.
// Thread-safety: counters are atomics; Snapshot() may run concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace stoker {

struct CacheCounters {
  std::atomic<uint64_t> bytes_read{0};         // bytes returned to readers
  std::atomic<uint64_t> read_requests{0};      // reads that returned them
  std::atomic<uint64_t> cache_hit_bytes{0};    // of those, served from the SSD tier
  std::atomic<uint64_t> origin_bytes_read{0};  // bytes read from the origin
  std::atomic<uint64_t> origin_reads{0};       // origin read operations
  // Bytes of derived files (decoded views) produced into the cache: made
  // from raw files the cache reads (and counts above), not read from the
  // origin themselves.
  std::atomic<uint64_t> derived_bytes_produced{0};
  std::atomic<uint64_t> chunks_fetched{0};
  std::atomic<uint64_t> chunks_written{0};
  std::atomic<uint64_t> slab_chunks_written{0};  // of chunks_written: into slab slots
  std::atomic<uint64_t> chunks_not_cached{0};    // served from origin: no space
  std::atomic<uint64_t> evicted_bytes{0};
  std::atomic<uint64_t> evicted_chunks{0};
  std::atomic<uint64_t> revalidations{0};      // identity checks at open
  std::atomic<uint64_t> origin_changes{0};     // of those, found a changed file
  std::atomic<uint64_t> checksum_failures{0};  // cached chunks found corrupt
  // Cached chunks read back and found good, first served in this process;
  // of those, checked by a read that waited for it (not ahead of it).
  std::atomic<uint64_t> chunks_verified{0};
  std::atomic<uint64_t> chunks_verified_by_readers{0};
  // Chunks checked by an open about to hand its file to the kernel whole.
  std::atomic<uint64_t> chunks_verified_at_open{0};
  std::atomic<uint64_t> chunks_verified_ahead{0};  // before a scanning reader's open
  std::atomic<uint64_t> origin_errors{0};
  // Revalidations and lookups of cached files answered from the cache, not
  // asked, while the origin was unreachable (OriginBackoff).
  std::atomic<uint64_t> revalidations_skipped{0};
  // Lookups and getattrs of cached files answered from the cache because
  // the origin was asked about the file less than --revalidate ago.
  std::atomic<uint64_t> attrs_from_cache{0};
  std::atomic<uint64_t> errors{0};                // all errors returned to readers
  std::atomic<uint64_t> collapsed_misses{0};      // readers that waited on another's fetch
  std::atomic<uint64_t> collapsed_checks{0};      // ... on another's check of a cached chunk
  std::atomic<uint64_t> prefetched_chunks{0};     // fetched from the origin ahead of a reader
  std::atomic<uint64_t> dir_prefetched_files{0};  // files fetched ahead of a directory scan
  // Prefetch in a sampler's order (cache/order_prefetcher.h): orders set;
  // files fetched (or found cached) ahead of the reader; opens of files of
  // the order whose fetch had ended before; fetches dropped by a new order;
  // files not fetched (no room in the cache, or gone from the origin).
  std::atomic<uint64_t> orders_set{0};
  std::atomic<uint64_t> order_prefetched_files{0};
  std::atomic<uint64_t> order_hits{0};
  std::atomic<uint64_t> order_cancelled{0};
  std::atomic<uint64_t> order_not_fetched{0};
  std::atomic<uint64_t> warm_files_queued{0};
  std::atomic<uint64_t> warm_files_done{0};
  std::atomic<uint64_t> warm_bytes{0};
};

}  // namespace stoker
