// HitLog: the cache's accesses, gathered in memory and applied to the index
// in batches. A hit costs no index write: hits are collected here and
// applied once per flush window (Flush), one clock tick per chunk per window
// (a reader going through a chunk in small requests is one access, not
// many).
//
// The access that inserted a chunk is not a hit on it: its reader's next
// requests for the rest of the chunk, or the first read of a chunk fetched
// ahead, come within a few ticks of the insert. kSameAccessTicks is beyond
// what prefetch (8 chunks ahead per file, 16 files ahead per directory) and
// a few dozen concurrent readers put between them, and well short of an
// epoch. A window of wall time alone is not enough: an epoch over a small
// dataset can take less than one, and its hits would then never promote
// what they hit, leaving the resident subset to go stale (see eviction.h).
//
// Losing what is gathered (a crash) loses recency, never data.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "cache/chunk.h"
#include "cache/chunk_index.h"
#include "cache/eviction.h"
#include "util/mutex.h"

namespace stoker {

class HitLog {
 public:
  static constexpr uint64_t kSameAccessTicks = 128;

  // index and policy outlive this.
  HitLog(ChunkIndex* index, const EvictionPolicy* policy) : index_(index), policy_(policy) {}

  // A read served chunk key from the cache (ticks the index's clock unless
  // key is already hit in this window or was inserted within
  // kSameAccessTicks).
  void RecordHit(const ChunkKey& key);
  // Chunk key was inserted (committed) at clock tick.
  void RecordInsert(const ChunkKey& key, uint64_t tick);
  // Applies the hits gathered so far to the index; new_window also starts a
  // new window of inserts (an insert is remembered for this window and the
  // next).
  void Flush(bool new_window);
  // Hits gathered and not yet flushed.
  size_t pending() const;

 private:
  ChunkIndex* const index_;
  const EvictionPolicy* const policy_;
  mutable Mutex mu_;
  std::unordered_map<ChunkKey, uint64_t, ChunkKeyHash> pending_ GUARDED_BY(mu_);
  // Chunks inserted in this and the previous window, with their tick.
  std::unordered_map<ChunkKey, uint64_t, ChunkKeyHash> inserted_now_ GUARDED_BY(mu_);
  std::unordered_map<ChunkKey, uint64_t, ChunkKeyHash> inserted_prev_ GUARDED_BY(mu_);
};

}  // namespace stoker
