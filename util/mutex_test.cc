#include "util/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace stoker {
namespace {

class Counter {
 public:
  void Add() {
    MutexLock l(mu_);
    ++n_;
    cv_.notify_all();
  }
  int Get() {
    MutexLock l(mu_);
    return n_;
  }
  void WaitFor(int n) {
    MutexLock l(mu_);
    cv_.Wait(mu_, [&]() REQUIRES(mu_) { return n_ >= n; });
  }
  bool WaitForWithin(int n, std::chrono::milliseconds limit) {
    MutexLock l(mu_);
    return cv_.WaitFor(mu_, limit, [&]() REQUIRES(mu_) { return n_ >= n; });
  }
  // Unlocks early and retakes the lock.
  int AddTwiceUnlockingBetween() {
    MutexLock l(mu_);
    ++n_;
    l.Unlock();
    if (mu_.TryLock()) {
      mu_.Unlock();
    } else {
      ADD_FAILURE() << "the lock was still held";
    }
    l.Lock();
    return ++n_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int n_ GUARDED_BY(mu_) = 0;
};

TEST(MutexTest, ManyThreadsCountUnderTheLock) {
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) c.Add();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.Get(), 4000);
}

TEST(MutexTest, TryLockFailsWhileHeld) {
  Mutex mu;
  MutexLock l(mu);
  std::thread t([&] { EXPECT_FALSE(mu.TryLock()); });
  t.join();
}

TEST(MutexTest, MutexLockUnlocksEarlyAndRelocks) {
  Counter c;
  EXPECT_EQ(c.AddTwiceUnlockingBetween(), 2);
  EXPECT_EQ(c.Get(), 2);
}

TEST(MutexTest, StdUniqueLockWorksWithIt) {
  Mutex mu;
  {
    std::unique_lock<Mutex> l(mu);
    EXPECT_TRUE(l.owns_lock());
  }
  if (mu.TryLock()) {
    mu.Unlock();
  } else {
    ADD_FAILURE() << "the lock was still held";
  }
}

TEST(CondVarTest, AWaiterWakesWhenThePredicateHolds) {
  Counter c;
  std::thread waiter([&] { c.WaitFor(3); });
  for (int i = 0; i < 3; ++i) c.Add();
  waiter.join();
  EXPECT_EQ(c.Get(), 3);
}

TEST(CondVarTest, WaitForTimesOutWhenThePredicateNeverHolds) {
  Counter c;
  EXPECT_FALSE(c.WaitForWithin(1, std::chrono::milliseconds(20)));
  c.Add();
  EXPECT_TRUE(c.WaitForWithin(1, std::chrono::milliseconds(20)));
}

}  // namespace
}  // namespace stoker
