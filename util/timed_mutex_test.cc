#include "util/timed_mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace stoker {
namespace {

TEST(TimedMutexTest, TryLockFailsWhileHeldAndSucceedsAfter) {
  TimedMutex m;
  ASSERT_TRUE(m.try_lock());
  EXPECT_FALSE(m.try_lock());
  EXPECT_FALSE(m.try_lock_for(std::chrono::milliseconds(20)));
  m.unlock();
  EXPECT_TRUE(m.try_lock_for(std::chrono::milliseconds(20)));
  m.unlock();
}

TEST(TimedMutexTest, AWaiterGetsTheLockWhenItIsReleased) {
  TimedMutex m;
  m.lock();
  std::atomic<bool> got{false};
  std::thread t([&] {
    got = m.try_lock_for(std::chrono::seconds(30));
    if (got) m.unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  m.unlock();
  t.join();
  EXPECT_TRUE(got);
}

TEST(TimedMutexTest, ExcludesConcurrentHolders) {
  TimedMutex m;
  int counter = 0;  // guarded by m; a data race here is what TSan would see
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; i++) {
    threads.emplace_back([&] {
      for (int j = 0; j < 2000; j++) {
        std::unique_lock<TimedMutex> l(m, std::defer_lock);
        if (j % 2 == 0) {
          l.lock();
        } else {
          while (!l.try_lock_for(std::chrono::milliseconds(1))) {
          }
        }
        counter++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 8000);
}

}  // namespace
}  // namespace stoker
