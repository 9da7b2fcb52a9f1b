// OpenFileState: one open of a cached file, as the cache keeps it: the
// version it reads, the origin file behind it, the chunks held in memory for
// it (Readahead) and its read pattern (what to prefetch). Shared by every
// read of the open and the prefetch it causes. Private to cache/.
//
// Thread-safety: the const members are set at construction; reads is
// guarded by mu.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "cache/object_version.h"
#include "cache/readahead.h"
#include "cache/sequential_reads.h"
#include "util/mutex.h"

namespace stoker {

class OpenFileState {
 public:
  // window: the prefetch window (CacheOptions::prefetch_bytes).
  OpenFileState(std::shared_ptr<ObjectVersion> v, std::shared_ptr<OriginHandle> o,
                std::shared_ptr<Readahead> r, bool d, uint64_t window, uint64_t chunk_size)
      : version(std::move(v)),
        origin(std::move(o)),
        readahead(std::move(r)),
        derived(d),
        reads(std::max<uint64_t>(1, window), chunk_size, version->chunks) {}
  const std::shared_ptr<ObjectVersion> version;
  const std::shared_ptr<OriginHandle> origin;
  const std::shared_ptr<Readahead> readahead;
  const bool derived;  // a decoded view's file (DerivedSource::IsDerived)

  Mutex mu;
  SequentialReads reads GUARDED_BY(mu);  // what to prefetch
};

}  // namespace stoker
