// EvictionPolicy and Quota. The simulation runs the real PickVictims over an
// in-memory copy of the two order queues (the index keeps the same keys in
// RocksDB), with the evictor's watermarks.
#include "cache/eviction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

namespace stoker {
namespace {

using Order = std::set<std::pair<EvictionRank, ChunkKey>>;

// One queue of the order, walked from its start or (reverse) its end.
class SetCursor : public EvictionPolicy::Cursor {
 public:
  SetCursor(const Order& order, uint8_t queue, bool reverse = false) {
    auto lo = order.lower_bound({EvictionRank{queue, 0}, ChunkKey{}});
    auto hi = order.lower_bound({EvictionRank{static_cast<uint8_t>(queue + 1), 0}, ChunkKey{}});
    for (auto it = lo; it != hi; ++it) items_.push_back(*it);
    if (reverse) std::reverse(items_.begin(), items_.end());
  }
  bool Valid() const override { return pos_ < items_.size(); }
  EvictionRank rank() const override { return items_[pos_].first; }
  ChunkKey key() const override { return items_[pos_].second; }
  void Next() override { ++pos_; }

 private:
  std::vector<std::pair<EvictionRank, ChunkKey>> items_;
  size_t pos_ = 0;
};

// The object ids PickVictims takes from order at tick now (up to max, any
// of them not stale), refusing the chunks in pinned.
std::vector<uint64_t> PickIds(const EvictionPolicy& p, const Order& order, uint64_t now, size_t max,
                              const std::set<uint64_t>& pinned) {
  SetCursor newest(order, 0), oldest(order, 0, true), prot(order, 1);
  auto victims = p.PickVictims(newest, oldest, prot, now, order.size(), max, max,
                               [&](const ChunkKey& k) { return pinned.count(k.object_id) == 0; });
  std::vector<uint64_t> ids;
  for (const auto& v : victims) ids.push_back(v.key.object_id);
  return ids;
}

// A cache of `capacity` equal chunks driven like the daemon drives it: one
// clock tick per access, eviction above the high watermark.
class Simulation {
 public:
  Simulation(uint64_t capacity, EvictionPolicy::Options o = {})
      : policy_(o), high_(capacity * 97 / 100), low_(capacity * 94 / 100) {}

  bool Access(uint64_t id, const std::function<bool(const ChunkKey&)>& accept = nullptr) {
    uint64_t now = ++clock_;
    ChunkKey key{id, 1, 0};
    auto it = chunks_.find(id);
    if (it != chunks_.end()) {
      order_.erase({EvictionPolicy::RankOf(it->second), key});
      it->second = policy_.OnHit(it->second, now);
      order_.insert({EvictionPolicy::RankOf(it->second), key});
      return true;
    }
    ChunkPolicyState s = policy_.OnInsert(now);
    chunks_[id] = s;
    order_.insert({EvictionPolicy::RankOf(s), key});
    if (chunks_.size() > high_) EvictToLow(accept);
    return false;
  }

  // As the daemon's evictor: stale chunks to the low watermark, others
  // (fresh probationary, protected) only to the high one.
  void EvictToLow(const std::function<bool(const ChunkKey&)>& accept) {
    while (chunks_.size() > low_) {
      SetCursor newest(order_, EvictionPolicy::kProbationaryQueue);
      SetCursor oldest(order_, EvictionPolicy::kProbationaryQueue, true);
      SetCursor prot(order_, EvictionPolicy::kProtectedQueue);
      auto victims = policy_.PickVictims(
          newest, oldest, prot, clock_, chunks_.size(), chunks_.size() - low_,
          chunks_.size() > high_ ? chunks_.size() - high_ : 0,
          accept ? accept : [](const ChunkKey&) { return true; });
      if (victims.empty()) return;
      for (const auto& v : victims) {
        if (chunks_.size() <= low_ || (!v.stale() && chunks_.size() <= high_)) return;
        order_.erase({v.rank, v.key});
        chunks_.erase(v.key.object_id);
        kinds_[static_cast<int>(v.kind)]++;
      }
    }
  }
  uint64_t evicted(EvictionPolicy::VictimKind k) const { return kinds_[static_cast<int>(k)]; }

  size_t resident() const { return chunks_.size(); }
  bool contains(uint64_t id) const { return chunks_.count(id) > 0; }

 private:
  EvictionPolicy policy_;
  const uint64_t high_, low_;
  uint64_t clock_ = 0;
  uint64_t kinds_[4] = {0, 0, 0, 0};
  std::map<uint64_t, ChunkPolicyState> chunks_;
  Order order_;
};

struct EpochCase {
  uint64_t dataset_multiple;
  bool reshuffle;
};

class EpochTest : public ::testing::TestWithParam<EpochCase> {};

TEST_P(EpochTest, HitRatioAfterFirstEpochIsNearCapacityOverDataset) {
  const uint64_t capacity = 1000;
  const uint64_t dataset = capacity * GetParam().dataset_multiple;
  Simulation sim(capacity);
  std::vector<uint64_t> order(dataset);
  std::iota(order.begin(), order.end(), 1);
  std::mt19937 rng(42);
  const double target = 0.9 * static_cast<double>(capacity) / static_cast<double>(dataset);
  for (int epoch = 1; epoch <= 5; ++epoch) {
    if (GetParam().reshuffle) std::shuffle(order.begin(), order.end(), rng);
    uint64_t hits = 0;
    for (uint64_t id : order) hits += sim.Access(id);
    double ratio = static_cast<double>(hits) / static_cast<double>(dataset);
    if (epoch >= 2) {
      EXPECT_GE(ratio, target) << "epoch " << epoch;
    }
    EXPECT_LE(sim.resident(), capacity);
  }
}

INSTANTIATE_TEST_SUITE_P(Datasets, EpochTest,
                         ::testing::Values(EpochCase{2, false}, EpochCase{2, true},
                                           EpochCase{4, false}, EpochCase{4, true},
                                           EpochCase{8, false}, EpochCase{8, true}),
                         [](const auto& info) {
                           return std::to_string(info.param.dataset_multiple) + "x_" +
                                  (info.param.reshuffle ? "reshuffled" : "fixed");
                         });

// The same scan that the policy survives, under plain LRU, hits nothing:
// the simulation is hard enough to tell the policies apart.
TEST(EvictionSimulationTest, PlainLruWouldMissEveryChunkOfACyclicScan) {
  const uint64_t capacity = 1000, dataset = 2000;
  std::vector<uint64_t> lru;  // front = least recently used
  uint64_t hits = 0;
  for (int epoch = 1; epoch <= 3; ++epoch) {
    for (uint64_t id = 1; id <= dataset; ++id) {
      auto it = std::find(lru.begin(), lru.end(), id);
      if (it != lru.end()) {
        if (epoch > 1) ++hits;
        lru.erase(it);
      } else if (lru.size() == capacity) {
        lru.erase(lru.begin());
      }
      lru.push_back(id);
    }
  }
  EXPECT_EQ(hits, 0u);
}

// Reads a new working set of half the capacity (it fits easily) for enough
// epochs that the old contents turn stale, plus two; returns the last epoch's
// hit ratio.
double HitRatioOfANewWorkingSet(Simulation& sim, uint64_t capacity,
                                const EvictionPolicy::Options& o) {
  const uint64_t fresh = capacity / 2;
  const uint64_t base = 1000000;
  const uint64_t epochs = o.stale_factor * capacity / fresh + 2;
  double last = 0;
  for (uint64_t e = 0; e < epochs; ++e) {
    uint64_t hits = 0;
    for (uint64_t id = base; id < base + fresh; ++id) hits += sim.Access(id);
    last = static_cast<double>(hits) / fresh;
  }
  return last;
}

// A working set that changed for good is admitted once the old protected
// chunks have gone untouched for stale_factor cache-fulls of accesses.
TEST(EvictionSimulationTest, ChangedWorkingSetIsAdmitted) {
  const uint64_t capacity = 1000;
  EvictionPolicy::Options o;
  Simulation sim(capacity, o);
  for (int epoch = 0; epoch < 5; ++epoch) {
    for (uint64_t id = 1; id <= 2 * capacity; ++id) sim.Access(id);
  }
  EXPECT_GE(HitRatioOfANewWorkingSet(sim, capacity, o), 0.9);
}

// The same after a one-time scan: never-hit probationary chunks age out too.
TEST(EvictionSimulationTest, WorkingSetAfterAOneTimeScanIsAdmitted) {
  const uint64_t capacity = 1000;
  EvictionPolicy::Options o;
  Simulation sim(capacity, o);
  for (uint64_t id = 1; id <= 3 * capacity; ++id) sim.Access(id);  // read once, never again
  EXPECT_GE(HitRatioOfANewWorkingSet(sim, capacity, o), 0.9);
  EXPECT_GT(sim.evicted(EvictionPolicy::VictimKind::kStaleProbationary), 0u);
}

// A cache full of fresh probationary chunks keeps them: evicting one only
// admits another that would go next. It evicts down to the high watermark.
TEST(EvictionSimulationTest, FreshChunksAreEvictedOnlyToTheHighWatermark) {
  const uint64_t capacity = 1000;
  Simulation sim(capacity);
  for (uint64_t id = 1; id <= 2 * capacity; ++id) sim.Access(id);
  EXPECT_EQ(sim.resident(), capacity * 97 / 100);
  for (uint64_t id = 1; id <= capacity * 97 / 100; ++id) EXPECT_TRUE(sim.contains(id)) << id;
}

TEST(EvictionPolicyTest, ProbationaryWalksCrossOnce) {
  Order order;
  EvictionPolicy p;
  for (uint64_t i = 1; i <= 5; ++i) {
    order.insert({EvictionPolicy::RankOf(p.OnInsert(i)), ChunkKey{i, 1, 0}});
  }
  SetCursor newest(order, 0), oldest(order, 0, true), prot(order, 1);
  std::vector<uint64_t> offered;
  auto victims = p.PickVictims(newest, oldest, prot, 6, 5, 100, 100, [&](const ChunkKey& k) {
    offered.push_back(k.object_id);
    return true;
  });
  EXPECT_EQ(offered, (std::vector<uint64_t>{5, 4, 3, 2, 1}));
  for (const auto& v : victims) EXPECT_EQ(v.kind, EvictionPolicy::VictimKind::kFreshProbationary);
  // Long after: everything is stale, the oldest goes first.
  SetCursor n2(order, 0), o2(order, 0, true), p2(order, 1);
  victims = p.PickVictims(n2, o2, p2, 1000, 5, 2, 2, [](const ChunkKey&) { return true; });
  ASSERT_EQ(victims.size(), 2u);
  EXPECT_EQ(victims[0].key.object_id, 1u);
  EXPECT_EQ(victims[0].kind, EvictionPolicy::VictimKind::kStaleProbationary);
  EXPECT_EQ(victims[1].key.object_id, 2u);
}

TEST(EvictionSimulationTest, PinnedChunksAreSkipped) {
  Simulation sim(100);
  std::set<uint64_t> pinned = {91, 92, 93};  // newest-inserted: first in line
  auto accept = [&](const ChunkKey& k) { return pinned.count(k.object_id) == 0; };
  for (uint64_t id = 1; id <= 98; ++id) sim.Access(id, accept);
  for (uint64_t id : pinned) EXPECT_TRUE(sim.contains(id)) << id;
  EXPECT_LE(sim.resident(), 97u);
}

// A pinned fresh chunk is not replaced by a protected one: the resident
// subset does not shrink by a chunk each time a new chunk's reply or store
// holds it when the evictor runs.
TEST(EvictionPolicyTest, APinnedFreshChunkDoesNotSendAProtectedOneInItsPlace) {
  Order order;
  EvictionPolicy p;
  for (uint64_t i = 1; i <= 3; ++i) {  // protected, hit at 10..12
    order.insert({EvictionPolicy::RankOf(p.OnHit(p.OnInsert(i), 9 + i)), ChunkKey{i, 1, 0}});
  }
  order.insert({EvictionPolicy::RankOf(p.OnInsert(20)), ChunkKey{4, 1, 0}});  // fresh
  auto pick = [&](const std::set<uint64_t>& pinned) { return PickIds(p, order, 21, 4, pinned); };
  EXPECT_EQ(pick({}), (std::vector<uint64_t>{4, 1, 2, 3}));
  EXPECT_EQ(pick({4}), std::vector<uint64_t>{});
  EXPECT_EQ(pick({1}), (std::vector<uint64_t>{4, 2, 3}));  // a pinned protected one is skipped
  // Stale chunks still go: they are before the fresh one anyway.
  SetCursor newest(order, 0), oldest(order, 0, true), prot(order, 1);
  auto victims = p.PickVictims(newest, oldest, prot, 100000, 4, 4, 4,
                               [](const ChunkKey& k) { return k.object_id != 4; });
  ASSERT_EQ(victims.size(), 3u);
  EXPECT_EQ(victims[0].kind, EvictionPolicy::VictimKind::kStaleProtected);
}

// A pinned fresh chunk holds back the older fresh ones too: they are the
// resident subset that the next epoch hits, and the pinned one goes first
// as soon as its reader is done with it.
TEST(EvictionPolicyTest, APinnedFreshChunkHoldsBackOlderFreshOnes) {
  Order order;
  EvictionPolicy p;
  for (uint64_t i = 1; i <= 3; ++i) {
    order.insert({EvictionPolicy::RankOf(p.OnInsert(i)), ChunkKey{i, 1, 0}});
  }
  auto pick = [&](const std::set<uint64_t>& pinned) { return PickIds(p, order, 4, 3, pinned); };
  EXPECT_EQ(pick({}), (std::vector<uint64_t>{3, 2, 1}));
  EXPECT_EQ(pick({3}), std::vector<uint64_t>{});
  EXPECT_EQ(pick({2}), std::vector<uint64_t>{3});
}

// Only as many victims that are not stale are taken (latched) as asked
// for: a chunk latched and then left in place is one its reader would
// fetch from the origin meanwhile. Stale ones are not counted.
TEST(EvictionPolicyTest, NoMoreThanMaxNotStaleAreLatched) {
  Order order;
  EvictionPolicy p;
  for (uint64_t i = 1; i <= 2; ++i) {  // protected, hit at 10 and 11: stale at 100
    order.insert({EvictionPolicy::RankOf(p.OnHit(p.OnInsert(i), 9 + i)), ChunkKey{i, 1, 0}});
  }
  for (uint64_t i = 3; i <= 5; ++i) {  // fresh, inserted at 80..82
    order.insert({EvictionPolicy::RankOf(p.OnInsert(77 + i)), ChunkKey{i, 1, 0}});
  }
  ASSERT_TRUE(p.IsStale(11, 100, 5));
  ASSERT_FALSE(p.IsStale(80, 100, 5));
  auto pick = [&](size_t max_not_stale) {
    SetCursor newest(order, 0), oldest(order, 0, true), prot(order, 1);
    std::vector<uint64_t> offered;
    auto victims =
        p.PickVictims(newest, oldest, prot, 100, 5, 10, max_not_stale, [&](const ChunkKey& k) {
          offered.push_back(k.object_id);
          return true;
        });
    EXPECT_EQ(victims.size(), offered.size());
    return offered;
  };
  EXPECT_EQ(pick(0), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(pick(1), (std::vector<uint64_t>{1, 2, 5}));
  EXPECT_EQ(pick(2), (std::vector<uint64_t>{1, 2, 5, 4}));
}

TEST(EvictionPolicyTest, ProbationaryNewestFirstThenProtectedLru) {
  EvictionPolicy p;
  ChunkPolicyState a = p.OnInsert(1), b = p.OnInsert(2);
  EXPECT_LT(EvictionPolicy::RankOf(b), EvictionPolicy::RankOf(a));  // newer goes first
  ChunkPolicyState ha = p.OnHit(a, 10), hb = p.OnHit(b, 5);
  EXPECT_EQ(ha.state, HitState::kProtected);
  EXPECT_LT(EvictionPolicy::RankOf(hb), EvictionPolicy::RankOf(ha));  // LRU
  EXPECT_LT(EvictionPolicy::RankOf(a), EvictionPolicy::RankOf(hb));   // probationary before
  EXPECT_EQ(p.OnHit(ha, 3).last_access, 10u);                         // the clock never runs back
}

TEST(EvictionPolicyTest, StalenessScalesWithResidentChunks) {
  EvictionPolicy p(EvictionPolicy::Options{4});
  EXPECT_FALSE(p.IsStale(100, 100 + 400, 100));
  EXPECT_TRUE(p.IsStale(100, 100 + 401, 100));
  EXPECT_FALSE(p.IsStale(100, 50, 100));
  EXPECT_TRUE(p.IsStale(0, 5, 0));  // an empty cache counts as one chunk
}

TEST(QuotaTest, ReservationsNeverPassCapacity) {
  Quota q(100, 0.9, 0.8);
  q.SetIndexBytes(10);
  EXPECT_TRUE(q.TryReserve(50));
  EXPECT_TRUE(q.TryReserve(40));
  EXPECT_FALSE(q.TryReserve(1));
  EXPECT_TRUE(q.TakeRefused());
  EXPECT_FALSE(q.TakeRefused());
  q.Release(40);
  q.Commit(50);
  EXPECT_EQ(q.committed(), 50u);
  EXPECT_EQ(q.used(), 60u);
  EXPECT_TRUE(q.RoomBelowLow(20));
  EXPECT_FALSE(q.RoomBelowLow(21));
  EXPECT_FALSE(q.AboveHigh());
  EXPECT_TRUE(q.TryReserve(35));
  q.Commit(35);
  EXPECT_TRUE(q.AboveHigh());
  EXPECT_TRUE(q.CommittedAboveHigh());
  EXPECT_EQ(q.BytesOverLow(), 15u);
  q.Free(10);
  EXPECT_TRUE(q.TryReserve(10));
  EXPECT_TRUE(q.AboveHigh()) << "reserved bytes count";
  EXPECT_FALSE(q.CommittedAboveHigh()) << "what is in the cache does not pass high";
  q.Release(10);
  q.Free(75);
  EXPECT_EQ(q.used(), 10u);
  q.SetIndexBytes(200);  // the index alone is over: nothing more gets in
  EXPECT_FALSE(q.TryReserve(1));
}

// A disk that others fill shrinks what the cache may hold (SetLimit): the
// watermarks and reservations follow the limit, and never pass capacity.
TEST(QuotaTest, ALimitBelowCapacityMovesTheWatermarks) {
  Quota q(100, 0.9, 0.8);
  ASSERT_TRUE(q.TryReserve(50));
  q.Commit(50);
  EXPECT_FALSE(q.AboveHigh());
  q.SetLimit(40);
  EXPECT_EQ(q.limit(), 40u);
  EXPECT_EQ(q.capacity(), 100u);
  EXPECT_TRUE(q.AboveHigh());
  EXPECT_EQ(q.BytesOverLow(), 50u - 32u);
  EXPECT_FALSE(q.TryReserve(1));
  EXPECT_TRUE(q.TakeRefused());
  q.Free(20);
  EXPECT_FALSE(q.AboveHigh());  // 30 <= 36
  EXPECT_TRUE(q.TryReserve(10));
  EXPECT_FALSE(q.TryReserve(1));
  q.SetLimit(1000);
  EXPECT_EQ(q.limit(), 100u) << "never above capacity";
  EXPECT_TRUE(q.TryReserve(50));
  q.SetLimit(0);
  EXPECT_FALSE(q.TryReserve(1));
  EXPECT_EQ(q.BytesOverLow(), 90u);
}

}  // namespace
}  // namespace stoker
