// CacheOptions: everything that configures the SSD tier of one mount.
// Each field says its default and what it means for a crash.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cache/io/io_backend.h"

namespace stoker {

struct CacheOptions {
  // Directory that holds the index (index/, RocksDB) and chunk data (data/).
  // Created 0700 if missing. One daemon at a time (locked via CACHE_DIR/lock).
  // Default: none, required. Survives crashes: yes, that is its purpose.
  std::string dir;

  // Hard bound on bytes allocated on the cache filesystem by chunk data and
  // the index's own files together. Default: 10 GiB. Must be at least
  // 4 chunks. Never exceeded, also not after a crash.
  uint64_t capacity_bytes = 10ull << 30;

  // Chunk size: the unit of fetching, checksumming and eviction. A cache
  // created with one chunk size keeps it; opening it with another size is
  // refused (kCacheMismatch, nothing changed) unless reset.
  // Default: 1 MiB.
  uint64_t chunk_size = 1ull << 20;

  // Empty the cache dir (its index and data) when it is opened, whatever it
  // holds: how a cache made with another chunk size or over another origin
  // is taken over. Default: false.
  bool reset = false;

  // The origin's location (Origin::Location): recorded in the index at the
  // first open; opening a cache that records another is refused
  // (kCacheMismatch, nothing changed) unless reset. Default: "" = neither
  // checked nor recorded (tools and tests that open a cache alone).
  std::string origin_location;

  // Who the lock file names as the holder of dir (cache/cache_dir_lock.h),
  // for whoever tries it next: the process that lives as long as the mount
  // (its supervisor, under one; 0: this process) and the mountpoint.
  // Default: this process, no mountpoint.
  pid_t holder_pid = 0;
  std::string holder_mountpoint;

  // Objects of at most this many bytes that fit in one chunk are stored in
  // slots of shared slab files (cache/slab.h) instead of a data file each,
  // which costs the SSD's filesystem far less per object. 0: every object
  // gets its own file. Each chunk's record says where it is, so a cache
  // written with another value (or before slabs) is used as it is.
  // Default: 1 MiB. Survives crashes: slots are taken and freed in the
  // index batches that write and drop their chunks.
  uint64_t slab_max_bytes = 1ull << 20;

  // Chunks of objects with a data file of their own (not in a slab) are
  // written through the page cache instead of with O_DIRECT, so that the
  // bytes a cold read brought in stay in memory as the data file's pages:
  // the one copy a passthrough open (fs/passthrough.h) then reads, while
  // the cold opens are answered with FOPEN_DIRECT_IO and keep no pages of
  // their own. Set by fs/ when passthrough may be used. A power cut may
  // lose such pages after their chunk was recorded: every chunk is checked
  // against its checksum before a process first serves it, so a lost one
  // is fetched again (tests/reliability/part_power_cut.py). Default: false.
  bool data_files_in_page_cache = false;

  // Eviction starts above high (fractions of capacity) and goes down to low;
  // fresh probationary chunks are taken only down to high (see eviction.h).
  // Default: 0.97 and 0.94.
  double high_watermark = 0.97;
  double low_watermark = 0.94;

  // Seconds after which an open re-checks the origin identity of a file.
  // 0 = every open; kNeverSeconds (util/duration.h) = never again once
  // known, also across restarts (a change seen while reading still makes a
  // new version). Default: 60.
  uint64_t revalidate_seconds = 60;

  // Bytes to prefetch ahead of a sequential reader. 0 disables. Default: 8 MiB.
  uint64_t prefetch_bytes = 8ull << 20;

  // Files fetched ahead of a reader that opens the files of a directory one
  // after another, in listing or name order (see dir_scan.h); for each, its
  // first dir_prefetch_bytes. 0 disables. Default: 16 files, 8 MiB.
  uint64_t dir_prefetch_files = 16;
  uint64_t dir_prefetch_bytes = 8ull << 20;
  // Prefetch in a sampler's order (cache/order_prefetcher.h): files of the
  // order fetched at most this many files past the reader, and while those
  // fetched and not yet opened hold less than order_ahead_bytes. 0 files:
  // orders are refused. Default: 128 files, 1 GiB. Survives crashes: no (an
  // order is the daemon's memory only; the cached files stay).
  uint64_t order_ahead_files = 128;
  uint64_t order_ahead_bytes = 1ull << 30;
  // Threads that fetch ahead of an order's reader. Default: 16.
  int order_threads = 16;

  // Files whose cached version stays known in memory after their last close
  // (beyond it, an open reads the file's record from the index again).
  // Default: 65536.
  size_t max_object_entries = 65536;
  // Chunks whose checksum this process remembers having verified
  // (ResidentChunks); others are checked again when next read (or opened
  // for passthrough). Bounds memory: about 60 bytes each. Default: 262144
  // (256 GiB of 1 MiB chunks). Survives crashes: no (a new process verifies
  // anew).
  size_t max_verified_chunks = 262144;

  // Memory for bytes made recently and wanted again soon (RecentBytes):
  // chunks read ahead for open files (up to two thirds of it), chunks whose
  // store is put off (deferred_store_bytes of it), decoded view records cut
  // by a read (a sixth of it; they give way first). Crash: memory only,
  // nothing is lost. Default: 384 MiB.
  uint64_t recent_bytes = 384ull << 20;
  // Bytes of chunks a reader fetched from the origin that may wait to be
  // stored until its reply is sent (ObjectCache::Read): the cache write and
  // index update are then off the reader's path. Past it, chunks are stored
  // before the reply, as with 0. Crash: such chunks are not in the cache yet
  // (as a fetch in flight); nothing is left behind. Default: 64 MiB.
  uint64_t deferred_store_bytes = 64ull << 20;
  // Whether a prefetch of a plain file also stores its range only once it
  // has fetched all of it (as a prefetch of a derived file, a decoded view,
  // always does: readers waiting on any of its chunks get them first).
  // Measured on a cold 1 GiB read (bench/large_ab, 6 alternating rounds):
  // 957 MB/s and 0.55 s of daemon CPU per GiB with it, 1123 MB/s and 0.45 s
  // without: the prefetch thread stores in bursts, a reader overtakes it and
  // fetches for itself (prefetched chunks fell from ~940 to ~140 of 1024).
  // Default: false.
  bool defer_plain_prefetch_stores = false;

  // Threads that fetch from the origin for prefetch and warm. Default: 4.
  int fetch_threads = 4;

  // Space kept free on the cache filesystem regardless of capacity: below it
  // new chunks are served from the origin without being cached, and the
  // cache's share of the disk (what it holds plus what is free beyond this)
  // bounds it like capacity, so that it evicts when others take this space.
  // Default: 1 GiB or 5% of the filesystem, whichever is smaller.
  uint64_t min_free_bytes = 0;  // 0 = the default rule above

  // I/O backend for origin and cache files. Default: kAuto (io_uring if the
  // kernel allows it, else syscalls).
  IoBackendKind io_backend = IoBackendKind::kAuto;
  // The backend itself, used instead of one made from io_backend: a test
  // seam (a wrapper that injects faults or holds writes). Default: null.
  std::shared_ptr<IoBackend> io;
  // Read the origin and write chunk data with O_DIRECT where the file
  // systems allow it (cache/io/direct_io.h). Default: true. The mount applies
  // it process-wide, to the origin as well as to the cache.
  bool direct_io = true;
  // An open that could hand a file to the kernel whole (ObjectCache::
  // LeaseWhole) but finds chunks this process has not verified yet checks
  // them first, if the file is at most this big: it reads them (into the
  // page cache, where the kernel then finds them). Larger files are read
  // through the daemon, which checks what it serves, until every chunk is
  // verified. 0: never at open. Default: 1 GiB. Survives crashes: no state.
  uint64_t verify_at_open_bytes = 1ull << 30;
};

}  // namespace stoker
