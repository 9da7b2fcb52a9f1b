#include "cache/order_prefetcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace stoker {
namespace {

std::vector<std::string> Files(const std::string& prefix, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

// Records the files fetched; while closed, fetches wait at the gate.
class Fetches {
 public:
  Result<uint64_t> Fetch(const std::string& path) {
    MutexLock l(mu_);
    started_.insert(path);
    cv_.notify_all();
    cv_.Wait(mu_, [&]() REQUIRES(mu_) { return open_; });
    if (path.find("missing") != std::string::npos) return Status::NotFound("gone");
    done_.insert(path);
    cv_.notify_all();
    return uint64_t{100};
  }
  void SetOpen(bool open) {
    MutexLock l(mu_);
    open_ = open;
    cv_.notify_all();
  }
  // Waits until pred holds of (started, done).
  bool WaitFor(
      const std::function<bool(const std::set<std::string>&, const std::set<std::string>&)>& pred) {
    MutexLock l(mu_);
    return cv_.WaitFor(mu_, std::chrono::seconds(60),
                       [&]() REQUIRES(mu_) { return pred(started_, done_); });
  }
  std::set<std::string> started() {
    MutexLock l(mu_);
    return started_;
  }
  std::set<std::string> done() {
    MutexLock l(mu_);
    return done_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool open_ GUARDED_BY(mu_) = true;
  std::set<std::string> started_ GUARDED_BY(mu_);
  std::set<std::string> done_ GUARDED_BY(mu_);
};

class OrderPrefetcherTest : public ::testing::Test {
 protected:
  void Make(size_t ahead, int threads, uint64_t max_order_bytes = 1u << 20) {
    OrderPrefetcher::Options o;
    o.window.ahead = ahead;
    o.max_order_bytes = max_order_bytes;
    o.threads = threads;
    order_ = std::make_unique<OrderPrefetcher>(
        o, &counters_, [this](const std::string& p) { return fetches_.Fetch(p); });
    order_->Start();
  }
  // Waits until the pool has nothing left of the order to do.
  void Settle(uint64_t expect_prefetched) {
    for (int i = 0; i < 6000 && counters_.order_prefetched_files < expect_prefetched; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(counters_.order_prefetched_files.load(), expect_prefetched);
  }

  CacheCounters counters_;
  Fetches fetches_;
  std::unique_ptr<OrderPrefetcher> order_;
};

TEST_F(OrderPrefetcherTest, FetchesTheWindowAndFollowsTheReader) {
  Make(/*ahead=*/3, /*threads=*/2);
  Result<uint64_t> id = order_->Set(Files("f", 10));
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, 1u);
  Settle(3);
  EXPECT_EQ(fetches_.done(), (std::set<std::string>{"f0", "f1", "f2"}));
  order_->Opened("f0");
  order_->Opened("f1");
  Settle(5);
  EXPECT_EQ(fetches_.done(), (std::set<std::string>{"f0", "f1", "f2", "f3", "f4"}));
  EXPECT_EQ(counters_.order_hits.load(), 2u);
  nlohmann::json g = order_->Gauges();
  EXPECT_EQ(g["order_files"], 10);
  EXPECT_EQ(g["order_position"], 2);
  EXPECT_EQ(g["order_id"], 1);
  order_->Opened("elsewhere");  // not in the order: nothing moves
  EXPECT_EQ(order_->Gauges()["order_position"], 2);
}

TEST_F(OrderPrefetcherTest, ANewOrderCancelsWhatTheOldOneQueued) {
  Make(/*ahead=*/10, /*threads=*/1);  // one running, one queued
  fetches_.SetOpen(false);
  ASSERT_TRUE(order_->Set(Files("a", 50)).ok());
  ASSERT_TRUE(fetches_.WaitFor([](auto& started, auto&) { return started.contains("a0"); }));
  ASSERT_TRUE(order_->Set(Files("b", 50)).ok());
  fetches_.SetOpen(true);
  Settle(1 + 10);  // a0, already running, and b's window
  const std::set<std::string> started = fetches_.started();
  EXPECT_FALSE(started.contains("a1"));
  EXPECT_EQ(counters_.order_cancelled.load(), 1u);  // a1, queued behind a0
  for (size_t i = 0; i < 10; ++i) EXPECT_TRUE(started.contains("b" + std::to_string(i)));
  EXPECT_FALSE(started.contains("b10"));
  // Opens of the old order's files move nothing.
  order_->Opened("a5");
  EXPECT_EQ(order_->Gauges()["order_position"], 0);
  EXPECT_EQ(order_->Gauges()["order_id"], 2);
}

TEST_F(OrderPrefetcherTest, ClearStopsFetchingAhead) {
  Make(2, 1);
  ASSERT_TRUE(order_->Set(Files("f", 10)).ok());
  Settle(2);
  order_->Clear();
  order_->Opened("f0");
  order_->Opened("f1");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(fetches_.started().size(), 2u);
  EXPECT_EQ(order_->Gauges()["order_files"], 0);
}

TEST_F(OrderPrefetcherTest, AFileThatCannotBeFetchedIsPassedOver) {
  Make(2, 1);
  ASSERT_TRUE(order_->Set({"missing0", "f1", "f2"}).ok());
  Settle(1);
  EXPECT_EQ(counters_.order_not_fetched.load(), 1u);
  order_->Opened("missing0");
  Settle(2);
  EXPECT_EQ(counters_.order_hits.load(), 0u);
}

TEST_F(OrderPrefetcherTest, RefusesAnEmptyOrAnOversizedOrder) {
  Make(2, 1, /*max_order_bytes=*/OrderWindow::MemoryPerPath(2) * 10);
  Result<uint64_t> empty = order_->Set({});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), EINVAL);
  Result<uint64_t> big = order_->Set(Files("f", 11));  // "f0".."f10": 10 of 2 bytes, 1 of 3
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), EFBIG);
  Result<uint64_t> ok = order_->Set(Files("f", 5));
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(order_->Append(*ok, Files("g", 5)).ok());
  EXPECT_EQ(order_->Gauges()["order_files"], 10);
  Status over = order_->Append(*ok, {"h"});
  EXPECT_EQ(over.code(), EFBIG);
  EXPECT_EQ(order_->Gauges()["order_files"], 0);  // dropped
  EXPECT_EQ(order_->Append(*ok, {"h"}).code(), ESTALE);
}

}  // namespace
}  // namespace stoker
