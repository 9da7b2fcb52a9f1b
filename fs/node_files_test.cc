#include "fs/node_files.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace stoker {
namespace {

using Files = NodeFiles<int>;

Result<std::shared_ptr<int>> Make(int v) { return std::make_shared<int>(v); }

TEST(NodeFilesTest, OneHandlePerNodeUntilDropped) {
  Files f(8);
  int made = 0;
  auto make = [&] {
    ++made;
    return Make(made);
  };
  Result<std::shared_ptr<int>> a = f.Get(5, make);
  Result<std::shared_ptr<int>> b = f.Get(5, make);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(made, 1);
  f.Drop(5);
  EXPECT_EQ(f.Find(5), nullptr);
  EXPECT_EQ(**a, 1) << "a reader holding the handle keeps it";
  EXPECT_EQ(*f.Get(5, make).value(), 2);
  f.Drop(99);  // unknown: nothing
  EXPECT_EQ(f.size(), 1u);
}

TEST(NodeFilesTest, AFailedMakeHoldsNothing) {
  Files f(8);
  Result<std::shared_ptr<int>> r =
      f.Get(3, [] { return Result<std::shared_ptr<int>>(Status::Error(EIO, "gone")); });
  EXPECT_EQ(r.status().code(), EIO);
  EXPECT_EQ(f.size(), 0u);
}

TEST(NodeFilesTest, TheOldestGoPastTheLimit) {
  Files f(3);
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(f.Get(i, [i] { return Make(i); }).ok());
  EXPECT_EQ(f.size(), 3u);
  EXPECT_EQ(f.Find(1), nullptr);
  EXPECT_EQ(f.Find(2), nullptr);
  ASSERT_NE(f.Find(5), nullptr);
  f.Drop(4);
  ASSERT_TRUE(f.Get(6, [] { return Make(6); }).ok());
  EXPECT_EQ(f.size(), 3u);
  EXPECT_NE(f.Find(3), nullptr) << "a dropped node leaves the order too";
  f.Clear();
  EXPECT_EQ(f.size(), 0u);
}

TEST(NodeFilesTest, RacingFirstReadsShareOneHandle) {
  Files f(64);
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<int>> got(8);
  std::atomic<int> made{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        Result<std::shared_ptr<int>> h = f.Get(i % 100, [&] { return Make(++made); });
        ASSERT_TRUE(h.ok());
        if (i == 499) got[t] = *h;
        if (i % 7 == 0) f.Drop(i % 100);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(f.size(), 64u);
  EXPECT_GE(made.load(), 100);
}

}  // namespace
}  // namespace stoker
