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

class SetCursor : public EvictionPolicy::Cursor {
 public:
  SetCursor(const Order& order, uint8_t queue)
      : it_(order.lower_bound({EvictionRank{queue, 0}, ChunkKey{}})),
        end_(order.end()),
        queue_(queue) {}
  bool Valid() const override { return it_ != end_ && it_->first.queue == queue_; }
  EvictionRank rank() const override { return it_->first; }
  ChunkKey key() const override { return it_->second; }
  void Next() override { ++it_; }

 private:
  Order::const_iterator it_, end_;
  uint8_t queue_;
};

// A cache of `capacity` equal chunks driven like the daemon drives it: one
// clock tick per access, eviction above high down to low.
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

  void EvictToLow(const std::function<bool(const ChunkKey&)>& accept) {
    while (chunks_.size() > low_) {
      SetCursor prob(order_, EvictionPolicy::kProbationaryQueue);
      SetCursor prot(order_, EvictionPolicy::kProtectedQueue);
      auto victims = policy_.PickVictims(
          prob, prot, clock_, chunks_.size(), chunks_.size() - low_,
          accept ? accept : [](const ChunkKey&) { return true; });
      if (victims.empty()) return;
      for (const auto& v : victims) {
        order_.erase({v.rank, v.key});
        chunks_.erase(v.key.object_id);
      }
    }
  }

  size_t resident() const { return chunks_.size(); }
  bool contains(uint64_t id) const { return chunks_.count(id) > 0; }

 private:
  EvictionPolicy policy_;
  const uint64_t high_, low_;
  uint64_t clock_ = 0;
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

// A working set that changed for good is admitted once the old protected
// chunks have gone untouched for stale_factor cache-fulls of accesses.
TEST(EvictionSimulationTest, ChangedWorkingSetIsAdmitted) {
  const uint64_t capacity = 1000;
  EvictionPolicy::Options o;
  Simulation sim(capacity, o);
  for (int epoch = 0; epoch < 5; ++epoch) {
    for (uint64_t id = 1; id <= 2 * capacity; ++id) sim.Access(id);
  }
  const uint64_t fresh = capacity / 2;  // fits easily
  const uint64_t base = 1000000;
  // Enough epochs of the new set for the old one to turn stale, plus two.
  const uint64_t epochs = o.stale_factor * capacity / fresh + 2;
  double last = 0;
  for (uint64_t e = 0; e < epochs; ++e) {
    uint64_t hits = 0;
    for (uint64_t id = base; id < base + fresh; ++id) hits += sim.Access(id);
    last = static_cast<double>(hits) / fresh;
  }
  EXPECT_GE(last, 0.9);
}

TEST(EvictionSimulationTest, PinnedChunksAreSkipped) {
  Simulation sim(100);
  std::set<uint64_t> pinned = {91, 92, 93};  // newest-inserted: first in line
  auto accept = [&](const ChunkKey& k) { return pinned.count(k.object_id) == 0; };
  for (uint64_t id = 1; id <= 98; ++id) sim.Access(id, accept);
  for (uint64_t id : pinned) EXPECT_TRUE(sim.contains(id)) << id;
  EXPECT_LE(sim.resident(), 97u);
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
  EXPECT_FALSE(q.AboveHigh());
  EXPECT_TRUE(q.TryReserve(35));
  q.Commit(35);
  EXPECT_TRUE(q.AboveHigh());
  EXPECT_EQ(q.BytesOverLow(), 15u);
  q.Free(85);
  EXPECT_EQ(q.used(), 10u);
  q.SetIndexBytes(200);  // the index alone is over: nothing more gets in
  EXPECT_FALSE(q.TryReserve(1));
}

}  // namespace
}  // namespace stoker
