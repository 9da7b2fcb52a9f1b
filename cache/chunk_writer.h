// ChunkWriter: the one place that puts chunks into the SSD tier and takes
// them out again. It owns the write intents and slab slots in the index,
// the quota's reservations and the disk claims of writes in flight.
//
// A new chunk is written as a transaction, in the shape of CernVM-FS's cache
// manager:
//   begin   the store's write bracket on the version's file (the file cannot
//           be dropped meanwhile, and a superseded version is refused), then
//           a write intent in the index, or for a slab chunk a slot taken
//           with its intent;
//   write   the bytes into the version's file or the slot;
//   commit  the chunk record, in one index batch with the intent's delete:
//           the chunk is visible only from here on;
//   abort   what reached the file is punched, the intent or slot released.
// A crash between begin and commit leaves the intent; ReclaimIntents, at the
// next start, punches the range it names and releases it, so data/ is never
// scanned. Removal punches first and drops the record after: a crash in
// between leaves a record over a hole, which fails its checksum and is
// fetched again.
//
// Before a write the chunk is pinned (ResidentChunks: eviction and drops
// wait), its allocated bytes are reserved in the Quota and claimed on the
// cache's filesystem; a write that finds no room leaves the chunk uncached
// (the reader is served all the same) and asks for eviction.
//
// Thread-safety: all methods are thread-safe. MeasureDisk and NoteEvicted
// are the evictor's (one thread).
#pragma once

#include <sys/statvfs.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "cache/cache_stats.h"
#include "cache/chunk.h"
#include "cache/chunk_index.h"
#include "cache/chunk_store.h"
#include "cache/eviction.h"
#include "cache/fetcher.h"
#include "cache/hit_log.h"
#include "cache/index_size.h"
#include "cache/io/io_backend.h"
#include "cache/object_version.h"
#include "cache/resident_chunks.h"

namespace stoker {

class ChunkWriter {
 public:
  struct Options {
    std::string dir;                        // the cache directory, on the filesystem measured
    uint64_t chunk_size = 0;                // CacheOptions::chunk_size
    uint64_t slab_max_bytes = 0;            // CacheOptions::slab_max_bytes
    uint64_t min_free_bytes = 0;            // CacheOptions::min_free_bytes
    bool data_files_in_page_cache = false;  // CacheOptions::data_files_in_page_cache
  };
  // The parts it writes through; all outlive the writer.
  struct Parts {
    IoBackend* io = nullptr;
    ChunkIndex* index = nullptr;
    ChunkStore* store = nullptr;
    Quota* quota = nullptr;
    ResidentChunks* resident = nullptr;
    IndexSize* index_size = nullptr;
    HitLog* hits = nullptr;
    CacheCounters* counters = nullptr;
    // Asked when the quota refuses a write or is above its high watermark.
    std::function<void()> evict;
  };
  ChunkWriter(Options options, Parts parts);
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;

  // Caches bytes as chunk idx of v unless there is no room (then it is only
  // served); true if it is in the cache now (written here, or there already).
  // Ticks the eviction clock either way: every fetched chunk is an access.
  bool Store(const ObjectVersion& v, uint64_t idx, const ChunkBytes& bytes);

  // Punches key's bytes, then drops its record (and frees its slot).
  // REQUIRES: key latched by the caller (ResidentChunks). Returns the bytes
  // freed (the caller gives them back to the quota); *in_slot (if given):
  // whether the chunk was in a slot (no file of its own to unlink).
  Result<uint64_t> PunchAndDrop(const ChunkKey& key,
                                const std::optional<EvictionRank>& stale_rank = std::nullopt,
                                bool* in_slot = nullptr);
  // Drops a chunk found corrupt or without data (takes its latch), unless
  // verified meanwhile (good bytes written since), or even then with force
  // (its data file is gone). Another reader still pinning it drops it later.
  void DropBad(const ChunkKey& key, bool force = false);

  // The writes a crashed predecessor began and never committed: each
  // intent's range punched, its intent or slot released. Before any write.
  Status ReclaimIntents();

  // Whether v's chunks are written with O_DIRECT (where the bytes allow).
  bool Direct(const ObjectVersion& v) const { return !in_page_cache_.load() || UsesSlab(v); }
  void SetDataFilesInPageCache(bool on) { in_page_cache_ = on; }
  // Whether v's chunk goes to a slab slot when stored.
  bool UsesSlab(const ObjectVersion& v) const {
    return options_.slab_max_bytes != 0 && v.chunks == 1 &&
           v.identity.size <= options_.slab_max_bytes;
  }
  // True if the cache's filesystem lacks room for need more bytes beside its
  // reserve (min_free_bytes) and what writes in flight have claimed.
  bool FreeSpaceLow(uint64_t need);
  // Limits the quota to the cache's share of its filesystem: what it holds
  // there plus what is free beyond the reserve. When others fill the disk
  // the share shrinks below capacity and the evictor gives space back; when
  // they free it, it grows again. Not lowered within kLimitLowerPause of
  // NoteEvicted (what eviction frees shows as free space only once the
  // filesystem commits it: btrfs about 30 s, ZFS about 5 s); raised at once.
  void MeasureDisk();
  static constexpr std::chrono::seconds kLimitLowerPause{30};
  // The evictor freed space just now.
  void NoteEvicted();
  // Says once per process that the cache serves from the origin without
  // caching, and why (the first time only).
  void WarnNotCaching(const std::string& why);

 private:
  // A stored chunk this process has not verified whose record matches
  // bytes: bytes put in its place, and the chunk marked verified.
  void RewriteUnverified(const ObjectVersion& v, const ChunkKey& key, const ChunkRecord& existing,
                         const ChunkBytes& bytes);
  // A new chunk written as a transaction (begin, write, commit or abort).
  // True if committed.
  bool WriteNew(const ObjectVersion& v, const ChunkKey& key, const ChunkBytes& bytes,
                uint64_t alloc, uint64_t tick);
  // Registers a write of v (refused once it is superseded) and opens the
  // file at place (created if missing). REQUIRES: store->EndWrite(v.key)
  // after success.
  Result<std::shared_ptr<DataFile>> BeginWrite(const ObjectVersion& v, const ChunkPlace& place);
  // Writes a chunk's bytes at off of its data file: the aligned head direct
  // where it can (the reader is answered from bytes, not from the file), the
  // rest buffered.
  // direct: O_DIRECT where the bytes allow it (see
  // CacheOptions::data_files_in_page_cache for when not).
  Status WriteData(DataFile& file, const ChunkBytes& bytes, uint64_t off, bool direct);
  // Counts a chunk not cached; says why once per process. Returns false.
  bool NotCached(const char* why);
  // The space kept free on the cache's filesystem.
  uint64_t ReserveBytes(const struct statvfs& vfs) const;

  const Options options_;
  const Parts parts_;
  std::atomic<bool> logged_no_space_{false};
  std::atomic<bool> in_page_cache_;        // Options::data_files_in_page_cache, settable
  std::atomic<uint64_t> disk_claimed_{0};  // bytes claimed by writes in flight
  // When the evictor last freed space (its thread only).
  bool evicted_once_ = false;
  std::chrono::steady_clock::time_point evicted_at_;
};

// Whether a record's slot fits v (only a one-chunk version has one).
inline bool SlotFits(const ObjectVersion& v, const SlotRef& slot) {
  return !slot.valid() || v.chunks == 1;
}

}  // namespace stoker
