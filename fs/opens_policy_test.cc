#include "fs/opens_policy.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(OpensPolicyTest, ATreeOfSmallFilesMovesToKernelOpensOnce) {
  OpensPolicy p(1 << 20);
  for (size_t i = 0; i + 1 < OpensPolicy::kWindow; ++i) {
    EXPECT_FALSE(p.Note(true)) << "not before a whole window of opens, at " << i;
  }
  EXPECT_TRUE(p.Note(true));
  ASSERT_TRUE(p.decision().has_value());
  EXPECT_EQ(p.decision()->after_opens, OpensPolicy::kWindow);
  EXPECT_EQ(
      p.decision()->why,
      "1000 of the last 1000 opens were small files (at most 1.00 MiB, never passed through)");
  EXPECT_FALSE(p.Note(true)) << "decided once";
}

TEST(OpensPolicyTest, ATreeOfShardsKeepsDaemonOpens) {
  OpensPolicy p(1 << 20);
  for (size_t i = 0; i < 10 * OpensPolicy::kWindow; ++i) EXPECT_FALSE(p.Note(false));
  EXPECT_FALSE(p.decision().has_value());
}

TEST(OpensPolicyTest, AMixedTreeMovesOnlyPastTheShareOfSmallFiles) {
  OpensPolicy mixed(1 << 20);
  // 1 large open in 9: 889 of each 1000 small, under the share.
  for (size_t i = 0; i < 10 * OpensPolicy::kWindow; ++i) EXPECT_FALSE(mixed.Note(i % 9 != 0));
  OpensPolicy mostly(1 << 20);
  // 1 in 11: 910 of 1000, over it.
  bool moved = false;
  for (size_t i = 0; i < 2 * OpensPolicy::kWindow && !moved; ++i) moved = mostly.Note(i % 11 != 0);
  EXPECT_TRUE(moved);
}

TEST(OpensPolicyTest, TheWindowForgetsOldOpens) {
  OpensPolicy p(1 << 20);
  for (size_t i = 0; i < OpensPolicy::kWindow; ++i) EXPECT_FALSE(p.Note(false));
  // Shards first, then a tree of small files: the window slides over it.
  size_t n = 0;
  while (!p.Note(true)) ++n;
  EXPECT_EQ(n + 1, OpensPolicy::kSmallShare);
}

TEST(OpensPolicyTest, AnInheritedDecisionStands) {
  OpensPolicy p(1 << 20);
  p.Inherit();
  ASSERT_TRUE(p.decision().has_value());
  EXPECT_FALSE(p.Note(true));
}

}  // namespace
}  // namespace stoker
