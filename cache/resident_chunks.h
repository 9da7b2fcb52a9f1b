// ResidentChunks: what this process knows about cached chunks beyond the
// index: how many live ReadReplies pin each chunk, whether the evictor holds
// it, and whether this process has verified its checksum.
//
// The evictor punches a chunk only after TryLatchForEvict, which fails while
// the chunk is pinned; a pin fails while the chunk is latched. So a byte
// range handed out in a ReadReply is never punched under it, and a reader
// never pins a chunk on its way out. Latching clears the verified bit: a
// chunk written again later is verified again; one left in place gets it
// back (Unlatch).
//
// A verified chunk also remembers where it is (its slab slot, if any), so a
// read serves it without asking the index. The slot is freed only under the
// latch (see ChunkIndex), so a pinned chunk's slot is never reused under its
// reader, and the next pin after a drop finds it unverified and asks the
// index again.
//
// Memory: a verified bit is kept only for the most recently verified chunks
// (max_verified, over all shards): past it, marking one forgets the bits of
// a few others that nobody pins or latches, which are then checked again on
// their next read. A dataset read epoch after epoch thus costs bounded
// memory here, however many files it has.
//
// Thread-safety: all methods are thread-safe (sharded mutexes, sharded by
// version so ForgetVersion touches one shard).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <unordered_map>

#include "cache/chunk.h"
#include "cache/slab.h"
#include "util/mutex.h"

namespace stoker {

class ResidentChunks {
 public:
  // Default: 262144 verified bits (about 15 MiB; 256 GiB of 1 MiB chunks).
  static constexpr size_t kDefaultMaxVerified = 262144;
  explicit ResidentChunks(size_t max_verified = kDefaultMaxVerified)
      : per_shard_(std::max<size_t>(1, max_verified / kShards)) {}

  // Pins key unless the evictor holds it. *verified: verified by this
  // process; then *slot (if given) is where it was verified.
  bool TryPin(const ChunkKey& key, bool* verified, SlotRef* slot = nullptr);
  // REQUIRES: a pin taken by TryPin.
  void Unpin(const ChunkKey& key);
  // REQUIRES: key pinned by the caller (its bytes were checked or written).
  void MarkVerified(const ChunkKey& key, const SlotRef& slot = {});
  // Takes key for eviction or a drop: fails while pinned or held already.
  bool TryLatchForEvict(const ChunkKey& key);
  // The same, and fails if the chunk is verified: a drop decided on a check
  // that found it bad must not take good bytes written since.
  bool TryLatchForDrop(const ChunkKey& key);
  // REQUIRES: a latch taken by TryLatchForEvict. The chunk was evicted or
  // dropped, or may have been: it is no longer verified.
  void ReleaseLatch(const ChunkKey& key);
  // REQUIRES: a latch taken by TryLatchForEvict. The chunk was left in
  // place: it is verified again if it was when latched (unless its version
  // was forgotten meanwhile).
  void Unlatch(const ChunkKey& key);
  // Forgets the verified bits of a dropped version.
  void ForgetVersion(const VersionKey& v);
  // Entries held (pinned, latched or verified), for stats and tests.
  size_t size() const;
  // Chunks whose verified bit is kept.
  size_t verified() const;
  bool pinned(const ChunkKey& key) const;

 private:
  struct State {
    int32_t pins = 0;
    bool latched = false;
    bool verified = false;
    bool verified_when_latched = false;
    SlotRef slot;  // where it was verified
  };
  struct Shard {
    mutable Mutex mu;
    std::unordered_map<ChunkKey, State, ChunkKeyHash> map GUARDED_BY(mu);
    size_t verified GUARDED_BY(mu) = 0;  // entries with verified set
  };
  static constexpr size_t kShards = 64;
  Shard& ShardOf(const ChunkKey& k) const {
    return shards_[VersionKeyHash()(k.version_key()) % shards_.size()];
  }
  static void MaybeErase(Shard& s, std::unordered_map<ChunkKey, State, ChunkKeyHash>::iterator it)
      REQUIRES(s.mu);
  // Sets or clears st's verified bit, counting it.
  static void SetVerified(Shard& s, State& st, bool v) REQUIRES(s.mu);
  // Forgets verified bits of unpinned, unlatched
  // chunks until s is within its share.
  void TrimLocked(Shard& s) REQUIRES(s.mu);
  void EndLatch(const ChunkKey& key, bool left_in_place);

  const size_t per_shard_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace stoker
