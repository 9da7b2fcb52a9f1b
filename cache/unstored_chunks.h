// UnstoredChunks: chunks fetched from the origin whose store into the cache
// was put off until their reader has its reply (see ObjectCache::Read). Until
// the store is done, a read of the same chunk is answered from these bytes
// instead of going to the origin a second time: they are the origin's bytes
// of that version, as a fetch would return them.
//
// Bounded: Add refuses what would take the held bytes past max_bytes (the
// caller then stores before answering, as without deferral). Holds no
// cache state: a crash loses nothing that was in the cache.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "cache/chunk.h"
#include "cache/fetcher.h"
#include "util/mutex.h"

namespace stoker {

class UnstoredChunks {
 public:
  explicit UnstoredChunks(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // Holds bytes for key; false (and nothing held) if key is held already or
  // the bound would be passed.
  bool Add(const ChunkKey& key, const ChunkBytes& bytes);
  std::optional<ChunkBytes> Get(const ChunkKey& key) const;
  // Its store is done (or given up).
  void Remove(const ChunkKey& key);
  uint64_t bytes() const;

 private:
  const uint64_t max_bytes_;
  mutable Mutex mu_;
  std::unordered_map<ChunkKey, ChunkBytes, ChunkKeyHash> chunks_ GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace stoker
