#include "group/rendezvous.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace stoker {
namespace {

ExtentKey Key(int i) {
  return ExtentKey{"train/shard-" + std::to_string(i / 4) + ".tfrecord", 1ull << 30, "\"etag\"",
                   static_cast<uint64_t>(i % 4)};
}

std::vector<std::string> Members(int n) {
  std::vector<std::string> m;
  for (int i = 0; i < n; ++i) m.push_back("10.0.0." + std::to_string(i + 1) + ":7070");
  return m;
}

TEST(RendezvousTest, EveryMemberPicksTheSameOwnerWhateverTheOrder) {
  std::vector<std::string> a = Members(5);
  std::vector<std::string> b(a.rbegin(), a.rend());
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(a[OwnerOf(Key(i), a)], b[OwnerOf(Key(i), b)]);
  }
}

TEST(RendezvousTest, ExtentsSpreadEvenly) {
  const std::vector<std::string> m = Members(4);
  std::map<size_t, int> owned;
  const int n = 20000;
  for (int i = 0; i < n; ++i) owned[OwnerOf(Key(i), m)]++;
  ASSERT_EQ(owned.size(), 4u);
  for (const auto& [member, count] : owned) {
    EXPECT_GT(count, n / 4 * 0.9) << m[member];
    EXPECT_LT(count, n / 4 * 1.1) << m[member];
  }
}

TEST(RendezvousTest, AJoiningMemberTakesOnlyItsShare) {
  const std::vector<std::string> four = Members(4);
  const std::vector<std::string> five = Members(5);
  int moved = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const std::string& before = four[OwnerOf(Key(i), four)];
    const std::string& after = five[OwnerOf(Key(i), five)];
    if (before != after) {
      EXPECT_EQ(after, five.back()) << "an extent moved between members that stayed";
      moved++;
    }
  }
  EXPECT_GT(moved, n / 5 * 0.9);
  EXPECT_LT(moved, n / 5 * 1.1);
}

TEST(RendezvousTest, ALeavingMemberGivesUpOnlyWhatItOwned) {
  const std::vector<std::string> four = Members(4);
  std::vector<std::string> three = four;
  three.erase(three.begin() + 1);
  for (int i = 0; i < 5000; ++i) {
    const std::string& before = four[OwnerOf(Key(i), four)];
    const std::string& after = three[OwnerOf(Key(i), three)];
    if (before != four[1]) {
      EXPECT_EQ(before, after);
    }
  }
}

TEST(RendezvousTest, EveryFieldOfTheKeyCounts) {
  const ExtentKey k{"a/b", 100, "123", 0};
  const uint64_t d = ExtentDigest(k);
  EXPECT_NE(d, ExtentDigest(ExtentKey{"a/c", 100, "123", 0}));
  EXPECT_NE(d, ExtentDigest(ExtentKey{"a/b", 101, "123", 0}));
  EXPECT_NE(d, ExtentDigest(ExtentKey{"a/b", 100, "124", 0}));
  EXPECT_NE(d, ExtentDigest(ExtentKey{"a/b", 100, "123", 1}));
  // Framed fields: moving a byte from path to version is another key.
  EXPECT_NE(ExtentDigest(ExtentKey{"ab", 1, "c", 0}), ExtentDigest(ExtentKey{"a", 1, "bc", 0}));
  EXPECT_EQ(d, ExtentDigest(k));
}

TEST(RendezvousTest, ExtentIndexOfOffsets) {
  EXPECT_EQ(ExtentIndexOf(0), 0u);
  EXPECT_EQ(ExtentIndexOf(kExtentBytes - 1), 0u);
  EXPECT_EQ(ExtentIndexOf(kExtentBytes), 1u);
}

TEST(RendezvousTest, OneMemberOwnsEverything) { EXPECT_EQ(OwnerOf(Key(3), {"only:1"}), 0u); }

}  // namespace
}  // namespace stoker
