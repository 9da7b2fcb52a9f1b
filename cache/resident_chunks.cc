#include "cache/resident_chunks.h"

#include "util/status.h"

namespace stoker {

void ResidentChunks::MaybeErase(Shard& s,
                                std::unordered_map<ChunkKey, State, ChunkKeyHash>::iterator it) {
  const State& st = it->second;
  if (st.pins == 0 && !st.latched && !st.verified) s.map.erase(it);
}

void ResidentChunks::SetVerified(Shard& s, State& st, bool v) {
  if (st.verified == v) return;
  st.verified = v;
  if (v) {
    s.verified++;
  } else {
    s.verified--;
  }
}

void ResidentChunks::TrimLocked(Shard& s) {
  // Any victims will do (the map's order is arbitrary); a pinned or latched
  // chunk keeps its bit, as a reader or the evictor relies on it.
  for (auto it = s.map.begin(); s.verified > per_shard_ && it != s.map.end();) {
    auto next = std::next(it);
    State& st = it->second;
    if (st.verified && st.pins == 0 && !st.latched) {
      SetVerified(s, st, false);
      MaybeErase(s, it);
    }
    it = next;
  }
}

bool ResidentChunks::TryPin(const ChunkKey& key, bool* verified, SlotRef* slot) {
  Shard& s = ShardOf(key);
  MutexLock l(s.mu);
  State& st = s.map[key];
  if (st.latched) {
    *verified = false;
    return false;
  }
  st.pins++;
  *verified = st.verified;
  if (slot) *slot = st.slot;
  return true;
}

void ResidentChunks::Unpin(const ChunkKey& key) {
  Shard& s = ShardOf(key);
  MutexLock l(s.mu);
  auto it = s.map.find(key);
  STOKER_CHECK(it != s.map.end() && it->second.pins > 0, "unpin of a chunk not pinned");
  it->second.pins--;
  MaybeErase(s, it);
}

void ResidentChunks::MarkVerified(const ChunkKey& key, const SlotRef& slot) {
  Shard& s = ShardOf(key);
  MutexLock l(s.mu);
  auto it = s.map.find(key);
  STOKER_CHECK(it != s.map.end() && it->second.pins > 0, "verified chunk must be pinned");
  SetVerified(s, it->second, true);
  it->second.slot = slot;
  if (s.verified > per_shard_) TrimLocked(s);
}

bool ResidentChunks::TryLatchForEvict(const ChunkKey& key) {
  Shard& s = ShardOf(key);
  MutexLock l(s.mu);
  State& st = s.map[key];
  if (st.pins > 0 || st.latched) return false;
  st.latched = true;
  st.verified_when_latched = st.verified;
  SetVerified(s, st, false);
  return true;
}

bool ResidentChunks::TryLatchForDrop(const ChunkKey& key) {
  Shard& s = ShardOf(key);
  MutexLock l(s.mu);
  auto it = s.map.find(key);
  if (it != s.map.end() && (it->second.pins > 0 || it->second.latched || it->second.verified)) {
    return false;
  }
  State& st = s.map[key];
  st.latched = true;
  return true;
}

void ResidentChunks::ReleaseLatch(const ChunkKey& key) { EndLatch(key, /*left_in_place=*/false); }

void ResidentChunks::Unlatch(const ChunkKey& key) { EndLatch(key, /*left_in_place=*/true); }

void ResidentChunks::EndLatch(const ChunkKey& key, bool left_in_place) {
  Shard& s = ShardOf(key);
  MutexLock l(s.mu);
  auto it = s.map.find(key);
  STOKER_CHECK(it != s.map.end() && it->second.latched, "release of a chunk not latched");
  it->second.latched = false;
  if (left_in_place) SetVerified(s, it->second, it->second.verified_when_latched);
  it->second.verified_when_latched = false;
  MaybeErase(s, it);
}

void ResidentChunks::ForgetVersion(const VersionKey& v) {
  Shard& s = ShardOf(ChunkKey{v.object_id, v.version, 0});
  MutexLock l(s.mu);
  for (auto it = s.map.begin(); it != s.map.end();) {
    auto next = std::next(it);
    if (it->first.version_key() == v) {
      SetVerified(s, it->second, false);
      it->second.verified_when_latched = false;
      MaybeErase(s, it);
    }
    it = next;
  }
}

size_t ResidentChunks::size() const {
  size_t n = 0;
  for (auto& s : shards_) {
    MutexLock l(s.mu);
    n += s.map.size();
  }
  return n;
}

size_t ResidentChunks::verified() const {
  size_t n = 0;
  for (auto& s : shards_) {
    MutexLock l(s.mu);
    n += s.verified;
  }
  return n;
}

bool ResidentChunks::pinned(const ChunkKey& key) const {
  Shard& s = ShardOf(key);
  MutexLock l(s.mu);
  auto it = s.map.find(key);
  return it != s.map.end() && it->second.pins > 0;
}

}  // namespace stoker
