// VersionLeases: whole versions' data files lent out, pinned, to readers
// that read them without the cache (FUSE passthrough; the contract is
// WholeFileLease's, cache/object_cache.h).
//
// LeaseWhole lends a version only when every chunk is in the cache, in the
// version's own data file (not a slab slot), verified by this process (a
// file of at most verify_at_open_bytes is checked here, through the page
// cache the kernel will read it from; a larger one must have been read
// through the cache first), the data file is exactly the version's size,
// the version is not superseded and, for a decoded view's file, no range of
// it reads as EIO. Otherwise it says why not (LeaseRefusal) and holds
// nothing. HoldVersion pins a version a restarted daemon's predecessor
// lent, as the kernel still reads it, without checking anything.
//
// Owns nothing between calls: each lease holds its pins and its data file
// until it goes, which must be before the parts it was made with.
//
// Thread-safety: all methods are thread-safe; a lease is used from one
// thread at a time. No lock of its own: it takes the parts' locks (leaves)
// and waits for the Prefetcher's check of the same version
// (Prefetcher::AwaitVerifyAhead), holding none.
#pragma once

#include <cstdint>
#include <memory>

#include "cache/cache_stats.h"
#include "cache/chunk_index.h"
#include "cache/chunk_reader.h"
#include "cache/chunk_store.h"
#include "cache/chunk_writer.h"
#include "cache/derived_source.h"
#include "cache/hit_log.h"
#include "cache/object_cache.h"
#include "cache/open_file_state.h"
#include "cache/prefetcher.h"
#include "cache/resident_chunks.h"

namespace stoker {

class VersionLeases {
 public:
  // The parts it lends with; all outlive it and every lease it made.
  struct Parts {
    uint64_t chunk_size = 0;
    ChunkIndex* index = nullptr;
    ChunkStore* store = nullptr;
    ResidentChunks* resident = nullptr;
    ChunkWriter* writer = nullptr;      // which versions live in a slab
    ChunkReader* reader = nullptr;      // checks chunks not verified yet
    HitLog* hits = nullptr;             // a leased file's open: a hit on every chunk
    Prefetcher* prefetcher = nullptr;   // its check of the version is waited for
    DerivedSource* derived = nullptr;   // views' files with ranges that read as EIO
    CacheCounters* counters = nullptr;  // chunks_verified_at_open
  };
  // verify_at_open_bytes: the largest file whose unverified chunks
  // LeaseWhole checks itself (CacheOptions::verify_at_open_bytes).
  VersionLeases(Parts parts, uint64_t verify_at_open_bytes)
      : p_(parts), verify_at_open_bytes_(verify_at_open_bytes) {}

  // ObjectCache::LeaseWhole: f's version lent whole, or EAGAIN with why.
  Result<std::unique_ptr<WholeFileLease>> LeaseWhole(OpenFileState& f, LeaseRefusal* why);
  // ObjectCache::HoldVersion: chunks [0, chunks) of (object_id, version)
  // pinned where they are not being evicted; fd() is -1.
  std::unique_ptr<WholeFileLease> HoldVersion(uint64_t object_id, uint64_t version,
                                              uint64_t chunks);

 private:
  class PinnedVersion;

  const Parts p_;
  const uint64_t verify_at_open_bytes_;
};

}  // namespace stoker
