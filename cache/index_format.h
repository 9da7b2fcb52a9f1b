// The binary format of the chunk index (RocksDB keys and values).
//
// Keys (one leading byte names the record kind; integers big-endian so that
// RocksDB's bytewise order is numeric order):
//   "m"                                  IndexMeta
//   "o" path                             ObjectRecord
//   "c" obj:8 ver:8 idx:8                ChunkRecord (the version is part of the key)
//   "e" queue:1 order:8 obj:8 ver:8 idx:8  eviction order, empty value
//   "w" obj:8 ver:8 idx:8                write intent: data may be in the file
//                                        but the chunk record is not committed
//   "d" obj:8 ver:8                      drop intent: every chunk of this
//                                        version is to be deleted
//   "x" obj:8 ver:8 name                 derived record: a small value made
//                                        from this version (a decoded view's
//                                        layout), dropped with its chunks
//   "s" class:4 slab:4                   SlabBitmap: which slots of a slab
//                                        are taken (cache/slab.h)
//   "l" dir                              KeptListing: a directory's listing,
//                                        kept with --revalidate never
//                                        (cache/kept_listings.h)
//   "r"                                  the origin the cache holds: its
//                                        location (Origin::Location), written
//                                        at the first mount that knows it;
//                                        binaries before it ignore the key
// Values begin with kIndexFormatVersion, then little-endian fixed-width
// fields. A value that does not decode is a Corruption status, never a guess.
// Fields added later go at the end of a value and are optional: a chunk
// record or intent without its slot fields (written before slabs) decodes
// with no slot, so older caches keep working unchanged.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/chunk.h"
#include "cache/eviction.h"
#include "cache/origin/origin.h"
#include "cache/slab.h"
#include "util/status.h"

namespace stoker {

inline constexpr uint8_t kIndexFormatVersion = 1;

struct IndexMeta {
  uint8_t format = kIndexFormatVersion;
  uint64_t chunk_size = 0;
  uint64_t next_object_id = 1;
  uint64_t usage_bytes = 0;  // allocated bytes of committed chunks
  uint64_t chunks = 0;
  uint64_t objects = 0;
  uint64_t clock = 0;  // eviction access clock; insert seqs and last accesses come from it
  bool operator==(const IndexMeta&) const = default;
};

// What a stat of the cached version says beyond its identity, so that an open
// served from the index alone can still answer with the file's attributes.
struct ObjectAttrs {
  uint32_t mode = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t nlink = 0;
  int64_t atime_ns = 0;
  // 512-byte blocks the origin file takes (its st_blocks); -1 in records
  // written before it was kept: then the size's.
  int64_t blocks = -1;
  bool operator==(const ObjectAttrs&) const = default;
};

struct ObjectRecord {
  uint64_t object_id = 0;
  uint64_t version = 0;
  OriginIdentity identity;
  ObjectAttrs attrs;
  int64_t validated_ns = 0;  // wall clock of the last identity check
  bool operator==(const ObjectRecord&) const = default;
};

struct ChunkRecord {
  uint32_t len = 0;
  uint64_t xxh3 = 0;
  uint64_t allocated = 0;
  uint64_t insert_seq = 0;
  HitState state = HitState::kProbationary;
  uint64_t last_access = 0;
  SlotRef slot;  // where the chunk is, if in a slab; else at its offset in the version's file
  bool operator==(const ChunkRecord&) const = default;
};

// One slab's taken slots, a bit per slot (slot i: bit i%64 of word i/64).
struct SlabBitmap {
  uint64_t words[kSlotsPerSlab / 64] = {};
  bool Get(uint32_t slot) const { return (words[slot / 64] >> (slot % 64)) & 1; }
  void Set(uint32_t slot, bool taken) {
    const uint64_t bit = uint64_t{1} << (slot % 64);
    words[slot / 64] = taken ? words[slot / 64] | bit : words[slot / 64] & ~bit;
  }
  bool operator==(const SlabBitmap&) const = default;
};

// Keys.
inline constexpr char kMetaKey[] = "m";
inline constexpr char kObjectPrefix = 'o';
inline constexpr char kChunkPrefix = 'c';
inline constexpr char kEvictPrefix = 'e';
inline constexpr char kIntentPrefix = 'w';
inline constexpr char kDropPrefix = 'd';
inline constexpr char kDerivedPrefix = 'x';
inline constexpr char kSlabPrefix = 's';
inline constexpr char kOriginKey[] = "r";
inline constexpr char kListingPrefix = 'l';

std::string ObjectKey(std::string_view path);
std::string ChunkRecordKey(const ChunkKey& key);
std::string VersionChunkPrefix(const VersionKey& v);  // prefix of its chunk records
std::string EvictOrderKey(const EvictionRank& rank, const ChunkKey& key);
std::string EvictQueuePrefix(uint8_t queue);
std::string IntentKey(const ChunkKey& key);
std::string DropKey(const VersionKey& v);
std::string DerivedKey(const VersionKey& v, std::string_view name);
std::string DerivedVersionPrefix(const VersionKey& v);  // prefix of its derived records
std::string SlabKey(uint32_t slot_class, uint32_t slab);
std::string SlabClassPrefix(uint32_t slot_class);  // prefix of a class's bitmaps

// Decoding keys: Corruption if key is not of that kind or has the wrong size.
Result<std::string> DecodeObjectKey(std::string_view key);
Result<ChunkKey> DecodeChunkRecordKey(std::string_view key);
Result<std::pair<EvictionRank, ChunkKey>> DecodeEvictOrderKey(std::string_view key);
Result<ChunkKey> DecodeIntentKey(std::string_view key);
Result<VersionKey> DecodeDropKey(std::string_view key);
// The version a derived record belongs to.
Result<VersionKey> DecodeDerivedKey(std::string_view key);
// (class, slab) of a slab bitmap key.
Result<std::pair<uint32_t, uint32_t>> DecodeSlabKey(std::string_view key);

// Values.
std::string EncodeMeta(const IndexMeta& m);
Result<IndexMeta> DecodeMeta(std::string_view v);
// A directory's listing as kept: its own attributes and its entries'.
struct KeptListing {
  struct stat self {};
  std::vector<OriginDirEntry> entries;
};
std::string ListingKey(std::string_view dir);
std::string EncodeListing(const KeptListing& l);
Result<KeptListing> DecodeListing(std::string_view v);

// The origin record: the origin's location.
std::string EncodeOrigin(const std::string& location);
Result<std::string> DecodeOrigin(std::string_view v);
std::string EncodeObject(const ObjectRecord& r);
Result<ObjectRecord> DecodeObject(std::string_view v);
std::string EncodeChunk(const ChunkRecord& r);
Result<ChunkRecord> DecodeChunk(std::string_view v);
// An intent carries the slot the write went to, if any.
std::string EncodeIntent(const SlotRef& slot = {});
Result<SlotRef> DecodeIntent(std::string_view v);
std::string EncodeSlabBitmap(const SlabBitmap& b);
Result<SlabBitmap> DecodeSlabBitmap(std::string_view v);

}  // namespace stoker
