// LocalOrigin's root: pinned across a rename, reopened when a deleted root
// is back (rate-limited, not for a missing name), and calls in flight
// while it is replaced. Run with openat2 and with the component walk.
#include <gtest/gtest.h>

#include "cache/origin/local/local_origin.h"
#include "cache/origin/local/local_origin_test_util.h"

namespace stoker {
namespace local_origin_test {
namespace {

// The root tests, as a suite of their own over the same fixture.
class LocalOriginRootTest : public LocalOriginTest {};

INSTANTIATE_TEST_SUITE_P(Resolvers, LocalOriginRootTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "openat2" : "walk";
                         });

TEST_P(LocalOriginRootTest, RootIsPinnedAcrossRename) {
  WriteFile(In("f"), "pinned");
  ASSERT_EQ(rename(root_.c_str(), (base_ + "/moved").c_str()), 0);
  ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);  // an impostor at the old name
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("f");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(ReadAll(**f), "pinned");
}

// A dead root (a shut-down disk, a dead NFS or FUSE mount) is reopened from
// its path; here the pinned directory is deleted, the one dead root a unit
// test can make without mounting (tests/integration/test_dead_origin.py
// kills real ones).
TEST_P(LocalOriginRootTest, DeletedRootIsReopenedWhenItIsBack) {
  WriteFile(In("f"), "before");
  ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0);
  EXPECT_EQ(origin_->Stat("f").status().code(), ENOENT);
  EXPECT_EQ(origin_->Open("f").status().code(), ENOENT);
  EXPECT_EQ(origin_->root_reopens(), 0u);
  ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  WriteFile(In("d/f"), "after!");
  Result<struct stat> st = origin_->Stat("d/f");
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->st_size, 6);
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("d/f");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(ReadAll(**f), "after!");
  std::vector<std::string> names;
  ASSERT_TRUE(origin_
                  ->ReadDir("",
                            [&](const OriginDirEntry& e) {
                              names.push_back(e.name);
                              return true;
                            })
                  .ok());
  EXPECT_EQ(names, std::vector<std::string>{"d"});
  EXPECT_EQ(origin_->root_reopens(), 1u);
}

TEST_P(LocalOriginRootTest, AMissingNameInALiveRootDoesNotReopen) {
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(origin_->Stat("none").status().code(), ENOENT);
    EXPECT_EQ(origin_->Stat("d/none").status().code(), ENOENT);
    EXPECT_EQ(origin_->Open("d/none").status().code(), ENOENT);
    EXPECT_EQ(origin_->ReadDir("none", [](auto&) { return true; }).code(), ENOENT);
  }
  EXPECT_EQ(origin_->root_reopens(), 0u);
}

TEST_P(LocalOriginRootTest, ReopeningIsRateLimited) {
  Recreate(3600 * 1000);
  WriteFile(In("f"), "x");
  ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0);
  EXPECT_EQ(origin_->Stat("f").status().code(), ENOENT);  // tries; nothing there yet
  ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
  WriteFile(In("f"), "x");
  EXPECT_EQ(origin_->Stat("f").status().code(), ENOENT) << "a second try within the interval";
  EXPECT_EQ(origin_->root_reopens(), 0u);
}

// Calls in flight keep the root they started with; none sees a closed or
// reused descriptor, and every answer is the old tree's, the new tree's or
// ENOENT (between the two).
TEST_P(LocalOriginRootTest, CallsInFlightWhileTheRootIsReplaced) {
  auto make_tree = [&](const std::string& dir, int gen) {
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((dir + "/d").c_str(), 0755), 0);
    WriteFile(dir + "/d/f", "generation " + std::to_string(gen % 10));
  };
  ASSERT_EQ(rmdir(root_.c_str()), 0);
  make_tree(root_, 0);
  Recreate();
  std::atomic<bool> stop{false};
  std::atomic<int> good{0};
  std::vector<std::string> problems[4];
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto bad = [&](const std::string& what, const Status& s) {
        if (s.code() != ENOENT) problems[t].push_back(what + ": " + s.message());
      };
      while (!stop.load()) {
        Result<struct stat> st = origin_->Stat("d/f");
        if (!st.ok()) bad("stat", st.status());
        Result<std::unique_ptr<OriginFile>> f = origin_->Open("d/f");
        if (f.ok()) {
          std::string got = ReadAll(**f);
          if (got.rfind("generation ", 0) != 0 || got.size() != 12) {
            problems[t].push_back("read '" + got + "'");
          }
          good++;
        } else {
          bad("open", f.status());
        }
        Status s = origin_->ReadDir("d", [](auto&) { return true; });
        if (!s.ok()) bad("readdir", s);
      }
    });
  }
  for (int gen = 1; gen <= 40; ++gen) {
    std::string next = base_ + "/next";
    make_tree(next, gen);
    ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0);
    ASSERT_EQ(rename(next.c_str(), root_.c_str()), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  for (auto& th : threads) th.join();
  for (auto& p : problems) EXPECT_TRUE(p.empty()) << p.front();
  EXPECT_GT(good.load(), 0);
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("d/f");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(ReadAll(**f), "generation 0");  // 40 % 10
  EXPECT_GE(origin_->root_reopens(), 1u);
}

}  // namespace
}  // namespace local_origin_test
}  // namespace stoker
