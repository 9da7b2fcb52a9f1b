#include "util/path.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(PathTest, JoinPathDoublesNoSeparator) {
  EXPECT_EQ(JoinPath("", "x"), "x");
  EXPECT_EQ(JoinPath("a/b", "x"), "a/b/x");
  EXPECT_EQ(JoinPath("/", "x"), "/x");
  EXPECT_EQ(JoinPath("/mnt/data", "x"), "/mnt/data/x");
  EXPECT_EQ(JoinPath("a/", "x"), "a/x");
}

TEST(PathTest, ParentAndBaseName) {
  EXPECT_EQ(ParentOf("a/b/c"), "a/b");
  EXPECT_EQ(ParentOf("c"), "");
  EXPECT_EQ(ParentOf("/x"), "/");
  EXPECT_EQ(ParentOf("/mnt/x"), "/mnt");
  EXPECT_EQ(BaseName("a/b/c"), "c");
  EXPECT_EQ(BaseName("c"), "c");
  EXPECT_EQ(BaseName("/x"), "x");
  EXPECT_EQ(SplitPath("a/b/c"), std::make_pair(std::string("a/b"), std::string("c")));
  EXPECT_EQ(SplitPath("c"), std::make_pair(std::string(), std::string("c")));
}

TEST(PathTest, AtOrUnderMatchesWholeComponents) {
  EXPECT_TRUE(IsAtOrUnder("a/b", "a"));
  EXPECT_TRUE(IsAtOrUnder("a", "a"));
  EXPECT_TRUE(IsAtOrUnder("a/b/c", "a/b"));
  EXPECT_TRUE(IsAtOrUnder("x", ""));
  EXPECT_TRUE(IsAtOrUnder("", ""));
  EXPECT_FALSE(IsAtOrUnder("ab", "a"));
  EXPECT_FALSE(IsAtOrUnder("a", "a/b"));
  EXPECT_FALSE(IsAtOrUnder("", "a"));
}

TEST(PathTest, JoinUndoesSplit) {
  for (const char* p : {"a", "a/b", "a/b/c", "/x", "/x/y"}) {
    auto [dir, name] = SplitPath(p);
    EXPECT_EQ(JoinPath(dir, name), p);
  }
}

TEST(PathTest, EndsWith) {
  EXPECT_TRUE(EndsWith("x.tfrecord.gz", ".gz"));
  EXPECT_TRUE(EndsWith("x", ""));
  EXPECT_TRUE(EndsWith(".gz", ".gz"));
  EXPECT_FALSE(EndsWith("gz", ".gz"));
  EXPECT_FALSE(EndsWith("x.gzip", ".gz"));
}

}  // namespace
}  // namespace stoker
