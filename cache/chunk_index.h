// ChunkIndex: the RocksDB index of one cache directory (CACHE_DIR/index).
// Holds the meta record, one object record per cached path, one chunk record
// per present chunk, the eviction order, and write/drop intents (format in
// cache/index_format.h).
//
// Every mutation is one WriteBatch: a chunk's record, its eviction key, the
// usage/counts in the meta record and the deletion of its write intent are
// committed together, so usage is right after a crash. Writes go to the WAL
// without fsync: a process crash loses nothing; a power loss may lose the
// newest records, which leaves orphan space (for fsck), never wrong bytes,
// because data is only served after its checksum matched.
//
// Thread-safety: all methods are thread-safe. Reads go straight to RocksDB;
// mutations are serialized by one mutex so that the meta record (usage,
// counts, clock) is read-modified-written consistently and a record is never
// resurrected by a concurrent update.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/chunk.h"
#include "cache/eviction.h"
#include "cache/index_format.h"
#include "util/mutex.h"
#include "util/status.h"

namespace rocksdb {
class DB;
}

namespace stoker {

class ChunkIndex {
 public:
  struct Options {
    std::string path;  // the index directory
    bool create_if_missing = true;
    uint64_t chunk_size_if_new = 0;  // meta of a new index; REQUIRES > 0 if creating
    uint64_t block_cache_bytes = 32ull << 20;
    uint64_t write_buffer_bytes = 16ull << 20;
    // Opens without writing anything (no room needed, no LOG; writes fail
    // with ENOTSUP; never creates): for a check that repairs nothing.
    // Default: false.
    bool read_only = false;
  };
  // Opens (creating if allowed). The meta record is read back as stored; a
  // caller wanting another chunk size compares meta().chunk_size and wipes.
  // An index without any record (new, or cut by a power loss before its
  // meta record was synced) gets its meta record from chunk_size_if_new
  // (created() is then true); with chunk_size_if_new 0 it is damaged.
  // A damaged index is EBADMSG, naming the damage: a corrupt file, a
  // MANIFEST or CURRENT missing while the rest is there, an undecodable meta
  // record, records without a meta record. Failures of the world keep their codes (ENOSPC, EACCES,
  // EIO...).
  static Result<std::unique_ptr<ChunkIndex>> Open(const Options& options);
  // Rebuilds a damaged index at path in place from what is left of it
  // (RocksDB's RepairDB: every record it can still read from the SST and
  // WAL files; unreadable ones are lost). Nothing it keeps may be trusted
  // before a check against the data files (fsck). REQUIRES: no one has the
  // index open.
  static Status Salvage(const std::string& path);
  ~ChunkIndex();

  IndexMeta meta() const;
  // True if this Open made the index (there was no meta record).
  bool created() const { return created_; }
  // Advances the eviction clock; the value is persisted with the next batch.
  uint64_t Tick() { return clock_.fetch_add(1) + 1; }
  uint64_t clock() const { return clock_.load(); }
  // Bytes of batches written so far: how much the WAL grew (for the quota
  // between two measurements of the index's size).
  uint64_t bytes_written() const { return bytes_written_.load(); }

  // The origin the cache holds (its location); none in a cache made before
  // the record was, or not yet written.
  Result<std::optional<std::string>> GetOrigin();
  Status PutOrigin(const std::string& location);

  // A record of a kind the index does not interpret (a kept listing).
  Result<std::optional<std::string>> GetRaw(std::string_view key);
  Status PutRaw(std::string_view key, std::string_view value);

  // Objects.
  Result<std::optional<ObjectRecord>> GetObject(const std::string& path);
  // A new path: assigns rec.object_id and returns the record as stored.
  Result<ObjectRecord> CreateObject(const std::string& path, ObjectRecord rec);
  // Same object and version (a revalidation that found no change).
  Status UpdateObject(const std::string& path, const ObjectRecord& rec);
  // A new version replaces old; old's chunks get a drop intent.
  Status ReplaceObject(const std::string& path, const ObjectRecord& rec, const VersionKey& old);
  // The path is gone at the origin: its record goes, its chunks get a drop intent.
  Status DeleteObject(const std::string& path, const VersionKey& old);

  // Chunks.
  Result<std::optional<ChunkRecord>> GetChunk(const ChunkKey& key);
  Status PutIntent(const ChunkKey& key);
  Status DeleteIntent(const ChunkKey& key);
  // Record + eviction key + usage + intent deletion, in one batch (with
  // rec.slot marked taken in its slab's bitmap, if it has one).
  Status CommitChunk(const ChunkKey& key, const ChunkRecord& rec);

  // Slab slots (cache/slab.h). Their bitmaps are read from the index on
  // the first use of a class (not at open) and kept in memory, changed only
  // together with the records that own the slots:
  //  - a slot is taken in the batch that writes key's write intent naming
  //    it, before any byte is written to it;
  //  - it stays taken while the intent or a committed record names it;
  //  - it is freed in the batch that deletes the last of them (ReleaseSlot,
  //    DropChunk, DropVersionChunks).
  // So a crash leaves no slot owned twice and no record on a free slot; a
  // slot taken by neither (a lost write, a power cut) is fsck's.
  // The caller frees a slot only when nothing reads it any more (the chunk
  // latched, see resident_chunks.h), and punches it first.
  //
  // Takes the lowest free slot of the class that holds len bytes (a new
  // slab when all are full) for key's write.
  Result<SlotRef> ReserveSlot(const ChunkKey& key, uint64_t len);
  // Deletes key's intent and frees slot: a write that did not commit.
  Status ReleaseSlot(const ChunkKey& key, const SlotRef& slot);
  // fsck: whether slot is taken; marking it.
  Result<bool> SlotTaken(const SlotRef& slot);
  Status SetSlotTaken(const SlotRef& slot, bool taken);
  // fsck: replaces a slab's bitmap (one rebuilt from the records).
  Status WriteSlab(uint32_t slot_class, uint32_t slab, const SlabBitmap& bitmap);
  // Deletes the chunk's record and eviction key if present; returns the
  // allocated bytes freed (0 if it was not there). stale_rank: an eviction
  // key to delete as well, so an order key without a record cannot stick.
  Result<uint64_t> DropChunk(const ChunkKey& key,
                             const std::optional<EvictionRank>& stale_rank = std::nullopt);
  // Applies batched hits: (chunk, clock tick of its latest hit). Chunks no
  // longer present are skipped.
  Status RecordHits(const std::vector<std::pair<ChunkKey, uint64_t>>& hits,
                    const EvictionPolicy& policy);
  // Deletes up to max chunk records of v; returns the bytes freed and sets
  // *done when none are left, at which point its drop intent is deleted too.
  Result<uint64_t> DropVersionChunks(const VersionKey& v, size_t max, bool* done);
  Result<bool> HasChunks(const VersionKey& v);

  // Derived records of a version (index_format.h): nullopt if absent. They
  // go with the version's last chunks in DropVersionChunks.
  Result<std::optional<std::string>> GetDerived(const VersionKey& v, std::string_view name);
  Status PutDerived(const VersionKey& v, std::string_view name, std::string_view value);

  // Walks, in key order. fn returns false to stop.
  using RawFn = std::function<bool(std::string_view key, std::string_view value)>;
  Status ForEach(char prefix, const RawFn& fn);
  Status ForEachPrefix(const std::string& prefix, const RawFn& fn);

  // A cursor over one eviction queue (reverse: from its end), for
  // EvictionPolicy::PickVictims. Keys that do not decode are skipped.
  std::unique_ptr<EvictionPolicy::Cursor> NewEvictCursor(uint8_t queue, bool reverse = false);

  // fsck: drop an undecodable record; rewrite the meta record.
  Status DeleteRaw(std::string_view key);
  Status WriteMeta(const IndexMeta& meta);

  // Bytes allocated by the index's files (st_blocks of everything in path).
  static uint64_t DiskBytes(const std::string& path);

 private:
  ChunkIndex(rocksdb::DB* db, IndexMeta meta, bool created, bool read_only);
  class Batch;
  Status Write(Batch& batch, const IndexMeta* new_meta) REQUIRES(mu_);

  // The slab bitmaps of one slot class as committed.
  struct SlabClass {
    std::vector<SlabBitmap> slabs;
    uint32_t first_free = 0;  // no free slot in slabs below it
  };
  // Bitmaps changed by one batch, adopted once it is written.
  using SlotEdits = std::map<std::pair<uint32_t, uint32_t>, SlabBitmap>;
  // Loads the class on first use.
  Result<SlabClass*> ClassLocked(uint32_t slot_class) REQUIRES(mu_);
  // Marks slot in edits (from the committed bitmap on
  // first touch) and puts the bitmap into batch.
  Status EditSlotLocked(Batch& batch, SlotEdits& edits, const SlotRef& slot, bool taken)
      REQUIRES(mu_);
  // REQUIRES: the batch with edits written.
  void AdoptLocked(const SlotEdits& edits) REQUIRES(mu_);

  rocksdb::DB* const db_;
  const bool created_;
  const bool read_only_;
  std::atomic<uint64_t> clock_;
  std::atomic<uint64_t> bytes_written_{0};
  mutable Mutex mu_;
  IndexMeta meta_ GUARDED_BY(mu_);
  std::map<uint32_t, SlabClass> slab_classes_ GUARDED_BY(mu_);
};

}  // namespace stoker
