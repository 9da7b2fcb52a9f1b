// Slab slots: where small objects' chunks live. An object that fits in one
// chunk and is at most CacheOptions::slab_max_bytes is stored in a slot of a
// slab file, data/slab/<slot bytes>-<n>, instead of a file of its own: ext4
// pays 28-155 µs of CPU to create and later unlink a file per object (more
// after many deletions, which eviction churn makes the steady state), a slot
// costs a pwrite and a punch-hole (bench/slab_vs_files.c).
//
// A slot class is a slot size in blocks; every slab of a class holds
// kSlotsPerSlab slots at multiples of the slot size. Classes step by one
// block up to 64 KiB and by 1/8 of the size's power of two above, so a slot
// is at most 1/8 larger than its chunk. The tail of a slot is never written,
// so it allocates no blocks: the quota (AllocatedBytes of the chunk) stays
// exact, and what the classes waste is address space in a sparse file.
//
// Which slots are taken is the slab's bitmap record in the index ("s"),
// changed in the batch that writes the write intent (taken), or drops the
// record or intent (free); see ChunkIndex.
//
// Thread-safety: pure functions and values.
#pragma once

#include <cstdint>

#include "cache/chunk.h"

namespace stoker {

inline constexpr uint32_t kSlotsPerSlab = 1024;

struct SlotRef {
  uint32_t slot_class = 0;  // slot size in blocks; 0: no slot (a per-object file)
  uint32_t slab = 0;
  uint32_t slot = 0;
  bool valid() const { return slot_class != 0; }
  bool operator==(const SlotRef&) const = default;
};

// The class whose slots hold len bytes (len > 0).
inline uint32_t SlotClassFor(uint64_t len) {
  const uint64_t blocks = (len + kBlockSize - 1) / kBlockSize;
  if (blocks <= 16) return static_cast<uint32_t>(blocks);
  uint64_t pow = 16;
  while (pow * 2 <= blocks) pow *= 2;
  const uint64_t step = pow / 8;
  return static_cast<uint32_t>((blocks + step - 1) / step * step);
}

inline uint64_t SlotBytes(uint32_t slot_class) { return uint64_t{slot_class} * kBlockSize; }
inline uint64_t SlotOffset(const SlotRef& s) { return uint64_t{s.slot} * SlotBytes(s.slot_class); }

// The slab file's name in the ChunkStore: object id 0 is never an object's.
inline VersionKey SlabFileKey(uint32_t slot_class, uint32_t slab) {
  return VersionKey{0, (uint64_t{slot_class} << 32) | slab};
}
inline bool IsSlabFileKey(const VersionKey& v) { return v.object_id == 0; }

// Where a chunk's bytes are: the data file (a version's own, or a slab) and
// the offset in it; span: the bytes that belong to the chunk there (what a
// drop punches).
struct ChunkPlace {
  VersionKey file;
  uint64_t off = 0;
  uint64_t span = 0;
};

inline ChunkPlace PlaceOf(const ChunkKey& key, const SlotRef& slot, uint64_t chunk_size) {
  if (!slot.valid()) {
    return ChunkPlace{key.version_key(), ChunkOffset(chunk_size, key.index), chunk_size};
  }
  return ChunkPlace{SlabFileKey(slot.slot_class, slot.slab), SlotOffset(slot),
                    SlotBytes(slot.slot_class)};
}

}  // namespace stoker
