// OriginReader: the only part of the cache that reads an origin file's
// bytes. One call reads a run of consecutive chunks in one origin read into
// one aligned buffer (so that the origin can read it direct and the cache
// write it direct), then checks that what was read is the version the open
// stands for: a read that meets another version's bytes is never cached and
// never mixed with this one's (ESTALE; the version is marked changed at the
// origin, and the next open revalidates).
//
// Another inode with the same size and times on the same filesystem is a
// copy (the origin came back from a backup) or a rename-over within one
// clock tick: the chunks the index holds tell which (HoldsCachedBytes).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/cache_stats.h"
#include "cache/chunk_index.h"
#include "cache/derived_source.h"
#include "cache/fetcher.h"
#include "cache/object_version.h"

namespace stoker {

class OriginReader {
 public:
  // The parts it reads with; all outlive the reader.
  struct Parts {
    uint64_t chunk_size = 0;
    ChunkIndex* index = nullptr;       // the chunks a moved file must match
    DerivedSource* derived = nullptr;  // a derived file's bytes count as produced
    CacheCounters* counters = nullptr;
  };
  explicit OriginReader(Parts parts) : p_(parts) {}

  // Chunks [first, first + n) of v from origin, one ChunkBytes each (sharing
  // one buffer). ESTALE: the origin's file is not v any more (changed,
  // replaced or gone); EIO: it returned fewer bytes than v has; the
  // origin's own errors as they are (a failed file is forgotten by origin,
  // so that the next read opens the path again). who: whom the run is read
  // for (OriginFile::ReadAtAligned).
  Result<std::vector<ChunkBytes>> ReadRun(const ObjectVersion& v, OriginHandle& origin,
                                          uint64_t first, uint64_t n, Urgency who);

 private:
  // Whether file, another inode with v's size and times, holds v's bytes:
  // every chunk of v in the index is read from it and matches its checksum
  // (and there is at least one).
  bool HoldsCachedBytes(const ObjectVersion& v, OriginFile& file);
  // What a read's failure tells the caller (ESTALE for a file changed or gone).
  Status OriginError(const ObjectVersion& v, const Status& s);

  const Parts p_;
};

}  // namespace stoker
