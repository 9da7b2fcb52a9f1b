// Eviction: which chunks leave the SSD tier first (EvictionPolicy), and how
// much may be there at all (Quota).
//
// EvictionPolicy is scan-resistant. Plain LRU evicts exactly the chunks an
// epoch-style loader needs next when it cycles through more data than fits,
// and reaches a 0% hit ratio. Instead:
// - A new chunk is probationary. A hit in a later access (not the read that
//   inserted it) promotes it to protected.
// - Fresh probationary chunks are evicted NEWEST-inserted first: the chunks
//   that got in first stay, so a fixed or reshuffled epoch over a dataset
//   larger than the cache keeps hitting the same resident subset. Evicting
//   one only makes room for another fresh one that would go next, so the
//   evictor takes them only down to the high watermark, not the low one:
//   the resident subset is as large as the bound allows.
// - Protected chunks are evicted in LRU order after the probationary ones.
// - A chunk untouched for more than stale_factor x the resident chunk count
//   clock ticks is stale and goes before all of the above (protected LRU
//   first, then probationary oldest first): a working set that changed for
//   good, after a loop or after a one-time scan, is admitted again.
// The clock ticks once per chunk access, hit or miss, cached or not. Both
// queues are kept as ordered keys (in the index); the policy only says where
// a chunk sits (RankOf) and walks cursors over the queues (PickVictims), so
// a simulation and the RocksDB-backed evictor run the same code.
//
// Quota: the hard bound. Bytes are reserved before a chunk is written and
// committed once its record is; a reservation that would pass capacity is
// refused, so the bound is never overshot by chunk data.
//
// Thread-safety: EvictionPolicy is immutable after construction (any thread).
// Quota is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_set>
#include <vector>

#include "cache/chunk.h"
#include "util/mutex.h"

namespace stoker {

enum class HitState : uint8_t { kProbationary = 0, kProtected = 1 };

// Where a chunk sits in the eviction order: queue 0 (probationary) before
// queue 1 (protected); within a queue, smaller order first.
struct EvictionRank {
  uint8_t queue = 0;
  uint64_t order = 0;
  bool operator==(const EvictionRank&) const = default;
  auto operator<=>(const EvictionRank&) const = default;
};

struct ChunkPolicyState {
  HitState state = HitState::kProbationary;
  uint64_t insert_seq = 0;
  uint64_t last_access = 0;
  bool operator==(const ChunkPolicyState&) const = default;
};

class EvictionPolicy {
 public:
  struct Options {
    // Staleness, in multiples of the resident chunk count, after which an
    // untouched chunk is evicted before fresh ones. It must
    // exceed the longest re-reference distance of an epoch (twice the dataset
    // for a reshuffled one) divided by the resident count, or the resident
    // subset of big datasets is thrown out; larger values admit a changed
    // working set more slowly. Default: 16 (simulated: epochs over datasets up
    // to 8x the cache keep their hit ratio; 8 already fails at 8x).
    uint64_t stale_factor = 16;
  };

  EvictionPolicy() = default;
  explicit EvictionPolicy(Options options) : options_(options) {}

  static constexpr uint8_t kProbationaryQueue = 0;
  static constexpr uint8_t kProtectedQueue = 1;

  static EvictionRank RankOf(const ChunkPolicyState& s);
  // A chunk inserted at clock tick now.
  ChunkPolicyState OnInsert(uint64_t now) const;
  // A hit at tick now. REQUIRES: the hit is a later access than the insert.
  ChunkPolicyState OnHit(const ChunkPolicyState& s, uint64_t now) const;
  bool IsStale(uint64_t last_access, uint64_t now, uint64_t resident_chunks) const;

  // A walk over one queue, in eviction order or (probationary oldest first)
  // its reverse.
  class Cursor {
   public:
    virtual ~Cursor() = default;
    virtual bool Valid() const = 0;
    virtual EvictionRank rank() const = 0;
    virtual ChunkKey key() const = 0;
    virtual void Next() = 0;
  };

  enum class VictimKind : uint8_t {
    kStaleProtected,
    kStaleProbationary,
    kFreshProbationary,  // evicted only down to the high watermark
    kProtected,
  };
  struct Victim {
    EvictionRank rank;
    ChunkKey key;
    VictimKind kind;
    // Stale victims go down to the low watermark; the others (fresh
    // probationary, protected) only to the high one.
    bool stale() const {
      return kind == VictimKind::kStaleProtected || kind == VictimKind::kStaleProbationary;
    }
  };
  // Up to max victims in policy order, of which at most max_not_stale are
  // not stale (fresh probationary or protected), from three walks: the
  // probationary queue newest first and oldest first, and the protected
  // queue. accept(key) is asked for each candidate and may refuse it (a
  // pinned chunk); a refused chunk is skipped, not retried, and a chunk is
  // never offered twice. Once a fresh probationary chunk was refused, nothing
  // more is offered: an older fresh chunk or a protected one would leave in
  // place of a chunk that goes first as soon as it is unpinned (the next
  // round takes that one). Stale chunks come before any fresh one.
  std::vector<Victim> PickVictims(Cursor& probationary_newest, Cursor& probationary_oldest,
                                  Cursor& protected_lru, uint64_t now, uint64_t resident_chunks,
                                  size_t max, size_t max_not_stale,
                                  const std::function<bool(const ChunkKey&)>& accept) const;

 private:
  Options options_;
};

class Quota {
 public:
  // REQUIRES: 0 < low <= high <= 1.
  Quota(uint64_t capacity, double high_watermark, double low_watermark);

  // Committed bytes as recorded in the index (at open).
  void SetCommitted(uint64_t bytes);
  // The index's own files, as last measured.
  void SetIndexBytes(uint64_t bytes);
  // What the cache may hold for now, when less than its capacity: its share
  // of a filesystem that others fill too. The watermarks and reservations
  // follow it; capacity again once bytes >= capacity.
  void SetLimit(uint64_t bytes);

  // Reserves n bytes for a chunk about to be written. False if that would
  // pass capacity (the chunk is then served uncached).
  [[nodiscard]] bool TryReserve(uint64_t n);
  // The reserved chunk's record was committed: reserved -> committed.
  void Commit(uint64_t n);
  // The reserved chunk was not written.
  void Release(uint64_t n);
  // Committed chunk bytes were evicted or dropped.
  void Free(uint64_t n);

  uint64_t capacity() const { return capacity_; }
  // min(capacity, the last SetLimit).
  uint64_t limit() const;
  uint64_t committed() const;
  uint64_t index_bytes() const;
  // committed + reserved + index bytes.
  uint64_t used() const;
  // How many reservations were committed so far: a change says that chunks
  // newer than what an eviction round looked at are in the cache.
  uint64_t commits() const;
  bool AboveHigh() const;
  // The same without reservations: what is in the cache now. In-flight
  // chunks commit as the newest, so evicting older fresh chunks for them
  // would only shrink the resident subset.
  bool CommittedAboveHigh() const;
  // How far that is above the high watermark, in bytes (0 if not above).
  uint64_t CommittedOverHigh() const;
  // Whether a reservation was refused since the last call: the evictor then
  // runs even below the high watermark (a chunk may not fit in the gap
  // between high watermark and capacity).
  bool TakeRefused();
  // Bytes to evict to get down to the low watermark (0 if already there).
  uint64_t BytesOverLow() const;
  // Whether n more bytes fit below the low watermark: taking them would not
  // make anything be evicted.
  bool RoomBelowLow(uint64_t n) const;

 private:
  const uint64_t capacity_;
  const double high_watermark_;
  const double low_watermark_;
  mutable Mutex mu_;
  uint64_t limit_ GUARDED_BY(mu_) = 0;
  uint64_t high_ GUARDED_BY(mu_) = 0;
  uint64_t low_ GUARDED_BY(mu_) = 0;
  uint64_t committed_ GUARDED_BY(mu_) = 0;
  uint64_t reserved_ GUARDED_BY(mu_) = 0;
  uint64_t index_ GUARDED_BY(mu_) = 0;
  uint64_t commits_ GUARDED_BY(mu_) = 0;
  bool refused_ GUARDED_BY(mu_) = false;
};

}  // namespace stoker
