#include "fs/fs_path.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(FsPathTest, ValidComponents) {
  EXPECT_TRUE(IsValidComponent("a"));
  EXPECT_TRUE(IsValidComponent(".hidden"));
  EXPECT_TRUE(IsValidComponent("..."));
  EXPECT_FALSE(IsValidComponent(""));
  EXPECT_FALSE(IsValidComponent("."));
  EXPECT_FALSE(IsValidComponent(".."));
  EXPECT_FALSE(IsValidComponent("a/b"));
  EXPECT_FALSE(IsValidComponent(std::string_view("a\0b", 3)));
}

TEST(FsPathTest, NormalizeRelative) {
  EXPECT_EQ(*NormalizeClientPath("train/x", "/mnt"), "train/x");
  EXPECT_EQ(*NormalizeClientPath("train//./x/", "/mnt"), "train/x");
  EXPECT_EQ(*NormalizeClientPath("", "/mnt"), "");
  EXPECT_EQ(*NormalizeClientPath(".", "/mnt"), "");
}

TEST(FsPathTest, NormalizeAbsoluteUnderMountpoint) {
  EXPECT_EQ(*NormalizeClientPath("/mnt/data/train/x", "/mnt/data"), "train/x");
  EXPECT_EQ(*NormalizeClientPath("/mnt/data", "/mnt/data"), "");
  EXPECT_EQ(*NormalizeClientPath("/mnt/data/", "/mnt/data/"), "");
}

TEST(FsPathTest, NormalizeRefusesEscapes) {
  EXPECT_EQ(NormalizeClientPath("a/../b", "/mnt").status().code(), EINVAL);
  EXPECT_EQ(NormalizeClientPath("..", "/mnt").status().code(), EINVAL);
  EXPECT_EQ(NormalizeClientPath("/mnt/database/x", "/mnt/data").status().code(), EINVAL)
      << "a sibling with a common prefix is not under the mountpoint";
  EXPECT_EQ(NormalizeClientPath("/etc/passwd", "/mnt").status().code(), EINVAL);
  EXPECT_EQ(NormalizeClientPath("/x", "/").status().code(), EINVAL);
}

}  // namespace
}  // namespace stoker
