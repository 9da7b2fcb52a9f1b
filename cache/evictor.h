// Evictor: the cache's background thread that keeps it within its bound.
// Each round (kicked by a write, else once a second) it re-measures the
// index (every kIndexMeasureInterval) and the cache's filesystem
// (ChunkWriter::MeasureDisk), flushes the batched hits (HitLog), drops the
// chunks of superseded versions (QueueDrop; a drop survives a crash as a
// drop record in the index, re-queued at start), and, when the quota is
// above its high watermark or refused a write, evicts down towards the low
// one in the policy's order (EvictionPolicy::PickVictims: stale chunks down
// to the low watermark, fresh and resident ones only to the high one).
//
// A chunk is evicted under its latch (ResidentChunks), so a reader that has
// pinned it keeps its bytes; a victim's data file is unlinked once it holds
// no chunk.
//
// Thread-safety: Kick, QueueDrop and pending_drops are thread-safe; Start
// and Stop are the owner's.
#pragma once

#include <atomic>
#include <deque>
#include <set>
#include <thread>
#include <vector>

#include "cache/cache_stats.h"
#include "cache/chunk.h"
#include "cache/chunk_index.h"
#include "cache/chunk_store.h"
#include "cache/chunk_writer.h"
#include "cache/eviction.h"
#include "cache/hit_log.h"
#include "cache/index_size.h"
#include "cache/resident_chunks.h"
#include "util/mutex.h"

namespace stoker {

class Evictor {
 public:
  // The parts it evicts from; all outlive the evictor.
  struct Parts {
    uint64_t chunk_size = 0;
    ChunkIndex* index = nullptr;
    ChunkStore* store = nullptr;
    Quota* quota = nullptr;
    const EvictionPolicy* policy = nullptr;
    ResidentChunks* resident = nullptr;
    ChunkWriter* writer = nullptr;
    HitLog* hits = nullptr;
    IndexSize* index_size = nullptr;
    CacheCounters* counters = nullptr;
  };
  explicit Evictor(Parts parts) : p_(parts) {}
  // Stops (see Stop).
  ~Evictor();
  Evictor(const Evictor&) = delete;
  Evictor& operator=(const Evictor&) = delete;

  // Starts the thread.
  void Start();
  // Stops the thread: an eviction round in progress ends after its current
  // batch; the hits gathered are flushed.
  void Stop();
  // Asks for a round now (a write found the quota full or above high).
  void Kick();
  // Drops v's chunks in the background. REQUIRES: v's drop record is in the
  // index (or v was never recorded).
  void QueueDrop(const VersionKey& v);
  // Versions queued and not yet dropped.
  uint64_t pending_drops() const { return drops_pending_.load(); }

 private:
  void Loop();
  void ProcessDrops();
  // Drops one version's chunks; false if it must wait for a later round
  // (still written, a slab chunk still read, an index error).
  bool DropVersion(const VersionKey& v);
  // Eviction rounds until the quota is down to its low watermark (stale
  // chunks) or its high one (the rest), nothing evictable is left, or Stop.
  void EvictToLow();
  // One round's victims, latched, in policy order; *commits: the quota's
  // commit count before they were picked.
  std::vector<EvictionPolicy::Victim> PickVictims(uint64_t over, uint64_t* commits);
  // What one round did.
  struct Round {
    bool done = false;     // down to a watermark: stop
    bool repick = false;   // a commit since the pick: pick again
    bool failed = false;   // a drop failed
    bool dropped = false;  // a drop went through
    uint64_t evicted = 0;  // bytes freed
  };
  // Evicts victims (each latched) in order; the rest are unlatched. The
  // versions whose file may be empty now go to touched.
  Round EvictVictims(const std::vector<EvictionPolicy::Victim>& victims, uint64_t commits,
                     bool may_repick, std::set<VersionKey>* touched);
  bool Stopping();

  const Parts p_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool kicked_ GUARDED_BY(mu_) = false;
  std::deque<VersionKey> drops_ GUARDED_BY(mu_);
  std::atomic<uint64_t> drops_pending_{0};
  std::thread thread_;
};

}  // namespace stoker
