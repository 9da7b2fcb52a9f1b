// FsckPass: one run of the offline check (CheckCache, cache/fsck.h) over an
// open index and data store. Walks the index once per record kind
// (fsck_index.cc: objects, drops, derived records, intents, chunks, eviction
// keys, then the usage record), then data/ (fsck_data.cc: data files and
// slabs against the records kept), and repairs, when asked, only after each
// walk, so a walk never sees its own repairs.
//
// Thread-safety: single-threaded; the caller holds the cache directory's
// lock. Private to cache/fsck*.cc.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cache/chunk_index.h"
#include "cache/chunk_store.h"
#include "cache/fsck.h"

namespace stoker {

// How findings name what they are about.
inline std::string FsckName(const VersionKey& v) { return ChunkStore::RelativePath(v); }
inline std::string FsckName(const ChunkKey& k) {
  return FsckName(k.version_key()) + " chunk " + std::to_string(k.index);
}
inline std::string FsckName(const SlotRef& s) {
  return FsckName(SlabFileKey(s.slot_class, s.slab)) + " slot " + std::to_string(s.slot);
}

class FsckPass {
 public:
  FsckPass(const std::string& dir, bool repair, ChunkIndex* index, ChunkStore* store)
      : dir_(dir),
        repair_(repair),
        index_(index),
        store_(store),
        chunk_size_(index->meta().chunk_size) {}
  Status Run();
  FsckReport& report() { return r_; }

 private:
  using SlotId = std::tuple<uint32_t, uint32_t, uint32_t>;
  static SlotId IdOf(const SlotRef& s) { return {s.slot_class, s.slab, s.slot}; }

  void Problem(std::string line) { r_.problems.push_back(std::move(line)); }
  void Repaired(const Status& s);
  void Punch(const ChunkKey& key, const SlotRef& slot);
  // Drops key's record and frees its slot; the slot is punched unless
  // another record owns it.
  void DropChunk(const ChunkKey& key);
  Status CheckOrigin();
  Status CheckListings();
  Status CheckObjects();
  // Derived records (a view's layout) of a version no longer cached: left
  // by a put that raced the version's drop. Harmless but never reclaimed.
  Status CheckDerived();
  Status CheckDrops();
  Status CheckIntents();
  // The problem with a decodable chunk record, or "" if it is good.
  std::string CheckChunk(const ChunkKey& key, const ChunkRecord& rec);
  Status CheckChunks();
  void Keep(const ChunkKey& key, const ChunkRecord& rec);
  Status CheckEvictionKeys();
  Status CheckDataFiles();
  void Orphan(const std::string& path, const std::string& why, bool is_dir);
  void CheckSubdir(const std::string& data, const std::string& sub);
  // Slab files: one with no bitmap record is an orphan; in the others, data
  // outside the kept chunks' slots is.
  void CheckSlabFiles(const std::string& path, const std::vector<std::string>& names);
  // Slab bitmaps: a slot taken by no kept record and no pending intent is
  // leaked (a lost write: space the quota does not see); repair punches it
  // and frees it. An undecodable bitmap is rebuilt from the records.
  Status CheckSlabs();
  // Space in a data file beyond its chunks' (a write whose record was lost).
  void CheckFileSpace(const std::string& file,
                      const std::vector<std::pair<uint64_t, uint64_t>>& ranges);
  Status CheckUsage();

  const std::string dir_;
  const bool repair_;
  ChunkIndex* const index_;
  ChunkStore* const store_;
  const uint64_t chunk_size_;
  FsckReport r_;
  std::map<VersionKey, uint64_t> sizes_;  // current versions -> object size
  std::set<VersionKey> drops_;
  std::map<VersionKey, std::vector<std::pair<uint64_t, uint64_t>>> files_;  // kept chunk ranges
  std::map<std::string, ChunkKey> expected_evict_;
  std::map<SlotId, ChunkKey> owners_;  // slots of checked chunk records
  std::set<SlotId> kept_slots_;        // slots of kept chunk records
  std::set<SlotId> intent_slots_;      // slots of pending (unrepaired) intents
  std::set<VersionKey> slabs_;         // slabs with a bitmap record
  uint64_t recorded_usage_ = 0, recorded_chunks_ = 0;
  uint64_t kept_usage_ = 0, kept_chunks_ = 0, kept_objects_ = 0, all_objects_ = 0;
  IndexMeta before_;
};

}  // namespace stoker
