#include "fs/inval_notifier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace stoker {
namespace {

// A gate the notify function waits at, opened by the test.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(InvalNotifierTest, SendsOffTheCallingThread) {
  std::promise<std::thread::id> sender;
  InvalNotifier n([&](uint64_t ino) {
    EXPECT_EQ(ino, 42u);
    sender.set_value(std::this_thread::get_id());
    return 0;
  });
  n.Invalidate(42);
  EXPECT_NE(sender.get_future().get(), std::this_thread::get_id());
  n.Stop();
  EXPECT_EQ(n.sent(), 1u);
}

TEST(InvalNotifierTest, DeduplicatesWhatIsStillQueued) {
  std::mutex mu;
  std::vector<uint64_t> calls;
  std::promise<void> entered;
  Gate gate;
  InvalNotifier n([&](uint64_t ino) {
    {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back(ino);
    }
    if (ino == 1) {
      entered.set_value();
      gate.Wait();
    }
    return -ENOENT;  // the kernel did not know it: not an error
  });
  n.Invalidate(1);
  entered.get_future().wait();  // 1 is being sent; 5 queues behind it
  n.Invalidate(5);
  n.Invalidate(5);
  n.Invalidate(5);
  gate.Open();
  while (n.sent() < 2) std::this_thread::yield();
  n.Stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(calls, (std::vector<uint64_t>{1, 5}));
}

TEST(InvalNotifierTest, SaysWhichDirectoryItIsSendingAnEntryOf) {
  Gate gate;
  std::promise<void> entered;
  InvalNotifier n([](uint64_t) { return 0; },
                  [&](uint64_t parent, const std::string&) {
                    if (parent == 5) {
                      entered.set_value();
                      gate.Wait();
                    }
                    return 0;
                  });
  EXPECT_FALSE(n.SendingEntryIn(5));
  n.InvalidateEntry(5, "a");
  n.InvalidateEntry(6, "b");
  entered.get_future().wait();
  EXPECT_TRUE(n.SendingEntryIn(5));
  EXPECT_FALSE(n.SendingEntryIn(6)) << "only queued";
  gate.Open();
  while (n.sent() < 2) std::this_thread::yield();
  EXPECT_FALSE(n.SendingEntryIn(5));
  n.Stop();
}

TEST(InvalNotifierTest, StopUnblocksAStuckNotification) {
  Gate gate;
  std::promise<void> entered;
  std::atomic<bool> unblocked{false};
  InvalNotifier n([&](uint64_t) {
    entered.set_value();
    gate.Wait();  // stuck in the kernel, as far as the notifier knows
    return -ENOTCONN;
  });
  n.Invalidate(7);
  entered.get_future().wait();
  n.Stop([&] {
    unblocked = true;
    gate.Open();
  });
  EXPECT_TRUE(unblocked);
}

TEST(InvalNotifierTest, NothingIsSentAfterStop) {
  std::atomic<int> calls{0};
  InvalNotifier n([&](uint64_t) { return ++calls, 0; });
  n.Stop();
  n.Invalidate(3);
  n.Stop();  // a second Stop is harmless
  EXPECT_EQ(calls, 0);
}

TEST(InvalNotifierTest, SendsEntriesInOrderAfterTheInodesQueuedBefore) {
  std::mutex mu;
  std::vector<std::string> sent;
  std::promise<void> done;
  InvalNotifier n(
      [&](uint64_t ino) {
        std::lock_guard<std::mutex> lock(mu);
        sent.push_back("ino " + std::to_string(ino));
        return 0;
      },
      [&](uint64_t parent, const std::string& name) {
        std::lock_guard<std::mutex> lock(mu);
        sent.push_back(std::to_string(parent) + "/" + name);
        if (name == "b") done.set_value();
        return -ENOENT;  // the kernel does not hold it: fine
      });
  n.Invalidate(7);
  n.InvalidateEntry(1, "a");
  n.InvalidateEntry(1, "a");  // entries are not deduplicated
  n.InvalidateEntry(3, "b");
  done.get_future().wait();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(sent, (std::vector<std::string>{"ino 7", "1/a", "1/a", "3/b"}));
  EXPECT_EQ(n.entries_pending(), 0u);
}

TEST(InvalNotifierTest, EntriesAreIgnoredWithoutAnEntryFunction) {
  InvalNotifier n([](uint64_t) { return 0; });
  n.InvalidateEntry(1, "a");
  EXPECT_EQ(n.entries_pending(), 0u);
}

TEST(InvalNotifierTest, DropsNodesByIdInBatches) {
  std::mutex mu;
  std::vector<std::vector<uint64_t>> batches;
  std::vector<std::string> by_name;
  Gate gate;
  std::promise<void> entered;
  InvalNotifier n(
      [&](uint64_t) {
        entered.set_value();
        gate.Wait();
        return 0;
      },
      [&](uint64_t, const std::string& name) {
        std::lock_guard<std::mutex> lock(mu);
        by_name.push_back(name);
        return 0;
      },
      [&](const std::vector<uint64_t>& ids) {
        std::lock_guard<std::mutex> lock(mu);
        batches.push_back(ids);
        return 0;
      });
  EXPECT_TRUE(n.can_prune());
  n.Invalidate(1);  // holds the thread while the nodes are queued
  entered.get_future().wait();
  const size_t count = InvalNotifier::kPruneBatch + 3;
  for (uint64_t id = 100; id < 100 + count; ++id) n.Prune(id, 5, "f" + std::to_string(id));
  EXPECT_EQ(n.entries_pending(), count);
  gate.Open();
  while (n.entries_pending() > 0 || n.sent() < 3) std::this_thread::yield();
  n.Stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].size(), InvalNotifier::kPruneBatch);
  EXPECT_EQ(batches[0].front(), 100u);
  EXPECT_EQ(batches[1], (std::vector<uint64_t>{100 + count - 3, 100 + count - 2, 100 + count - 1}));
  EXPECT_TRUE(by_name.empty());
  EXPECT_TRUE(n.can_prune());
}

TEST(InvalNotifierTest, DropsByNameWhereTheKernelCannotPrune) {
  std::mutex mu;
  std::vector<std::string> by_name;
  std::atomic<int> prunes{0};
  InvalNotifier n([](uint64_t) { return 0; },
                  [&](uint64_t parent, const std::string& name) {
                    std::lock_guard<std::mutex> lock(mu);
                    by_name.push_back(std::to_string(parent) + "/" + name);
                    return 0;
                  },
                  [&](const std::vector<uint64_t>&) {
                    prunes++;
                    return -EINVAL;
                  });
  n.Prune(100, 5, "a");
  n.Prune(101, 6, "b");
  while (n.sent() < 2 || n.entries_pending() > 0) std::this_thread::yield();
  EXPECT_FALSE(n.can_prune());
  n.Prune(102, 5, "c");
  while (n.entries_pending() > 0 || n.sent() < 3) std::this_thread::yield();
  n.Stop();
  EXPECT_EQ(prunes, 1) << "asked once";
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(by_name, (std::vector<std::string>{"5/a", "6/b", "5/c"}));
}

}  // namespace
}  // namespace stoker
