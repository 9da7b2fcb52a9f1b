// Chunks: the unit of fetching, checksumming and eviction. A cached object
// version is split into fixed-size chunks; chunk i covers bytes
// [i*chunk_size, min((i+1)*chunk_size, size)) of the origin file and lives
// at the same byte offset of the version's sparse data file, so a run of
// present chunks is one contiguous range of one descriptor.
// Thread-safety: values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace stoker {

// Space is counted in filesystem blocks: a chunk of 1 byte costs one block.
inline constexpr uint64_t kBlockSize = 4096;

// One cached version of one origin path. object_id is assigned per path the
// first time it is cached; version increases each time the origin identity
// changes, so a changed file never reaches its old chunks.
struct VersionKey {
  uint64_t object_id = 0;
  uint64_t version = 0;
  bool operator==(const VersionKey&) const = default;
  auto operator<=>(const VersionKey&) const = default;
};

struct ChunkKey {
  uint64_t object_id = 0;
  uint64_t version = 0;
  uint64_t index = 0;
  VersionKey version_key() const { return {object_id, version}; }
  bool operator==(const ChunkKey&) const = default;
  auto operator<=>(const ChunkKey&) const = default;
};

inline uint64_t HashMix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

struct VersionKeyHash {
  size_t operator()(const VersionKey& k) const {
    return HashMix(k.object_id * 0x9e3779b97f4a7c15ULL ^ k.version);
  }
};

struct ChunkKeyHash {
  size_t operator()(const ChunkKey& k) const {
    return HashMix(VersionKeyHash()(k.version_key()) ^ (k.index * 0x9e3779b97f4a7c15ULL));
  }
};

// Bytes of one chunk (or of another piece of a file) in memory. data may alias a larger buffer (one
// origin read for a run of chunks) and keeps it alive.
struct ChunkBytes {
  std::shared_ptr<const char> data;
  size_t len = 0;
  bool from_cache = false;  // read back from the SSD tier, not the origin
};

// Number of chunks of a file of size bytes (0 for an empty file).
inline uint64_t ChunkCount(uint64_t size, uint64_t chunk_size) {
  return size == 0 ? 0 : (size - 1) / chunk_size + 1;
}

// Length of chunk index of a file of size bytes; 0 past the end.
inline uint64_t ChunkLength(uint64_t size, uint64_t chunk_size, uint64_t index) {
  uint64_t start = index * chunk_size;
  if (start >= size) return 0;
  uint64_t left = size - start;
  return left < chunk_size ? left : chunk_size;
}

inline uint64_t ChunkOffset(uint64_t chunk_size, uint64_t index) { return index * chunk_size; }

// Bytes a chunk of len bytes occupies on disk.
inline uint64_t AllocatedBytes(uint64_t len) {
  return (len + kBlockSize - 1) / kBlockSize * kBlockSize;
}

// The chunks a read of [off, off+len) touches, clipped to size. Empty
// (count == 0) when the read starts at or past the end or len is 0.
struct ChunkSpan {
  uint64_t off = 0;  // clipped start
  uint64_t len = 0;  // clipped length
  uint64_t first = 0;
  uint64_t count = 0;
};

inline ChunkSpan SpanOf(uint64_t size, uint64_t chunk_size, uint64_t off, uint64_t len) {
  ChunkSpan s;
  if (off >= size || len == 0) return s;
  s.off = off;
  s.len = len < size - off ? len : size - off;
  s.first = off / chunk_size;
  s.count = (off + s.len - 1) / chunk_size - s.first + 1;
  return s;
}

}  // namespace stoker
