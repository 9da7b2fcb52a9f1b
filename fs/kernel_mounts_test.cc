// The kernel's mount table as fs/kernel_mounts.h reads it.
#include "fs/kernel_mounts.h"

#include <gtest/gtest.h>
#include <sys/sysmacros.h>

namespace stoker {
namespace {

const char kMountInfo[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "35 22 0:30 / /mnt/with\\040space rw,nosuid,nodev,relatime shared:20 - fuse.stoker "
    "stoker rw,user_id=0,group_id=0\n"
    "36 22 0:31 / /mnt/plain rw,relatime - fuse /dev/fuse rw\n"
    "37 22 0:32 / /mnt/plain rw,relatime - tmpfs tmpfs rw\n"
    "garbage line\n"
    "38 22 0:33 / /mnt/back\\134slash rw master:3 propagate_from:2 - fuseblk /dev/sdb rw\n";

TEST(ParseMountInfo, DecodesFieldsAndEscapes) {
  auto m = ParseMountInfo(kMountInfo);
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].mount_point, "/");
  EXPECT_EQ(m[0].fstype, "ext4");
  EXPECT_EQ(m[0].source, "/dev/sda1");
  EXPECT_EQ(m[0].dev, makedev(8, 1));
  EXPECT_EQ(m[1].mount_point, "/mnt/with space");
  EXPECT_EQ(m[1].fstype, "fuse.stoker");
  EXPECT_EQ(m[1].source, "stoker");
  EXPECT_EQ(m[4].mount_point, "/mnt/back\\slash");
  EXPECT_EQ(m[4].fstype, "fuseblk");
}

TEST(FindMountAt, TakesTheTopmostMount) {
  auto m = ParseMountInfo(kMountInfo);
  auto top = FindMountAt(m, "/mnt/plain");
  ASSERT_TRUE(top.has_value());
  EXPECT_EQ(top->fstype, "tmpfs");
  EXPECT_FALSE(FindMountAt(m, "/mnt").has_value());
  EXPECT_FALSE(FindMountAt(m, "/mnt/with").has_value());
}

TEST(IsFuseFsType, KnowsFuseTypes) {
  EXPECT_TRUE(IsFuseFsType("fuse"));
  EXPECT_TRUE(IsFuseFsType("fuse.stoker"));
  EXPECT_TRUE(IsFuseFsType("fuseblk"));
  EXPECT_FALSE(IsFuseFsType("fusectl"));
  EXPECT_FALSE(IsFuseFsType("ext4"));
}

TEST(ReadMountInfo, SeesTheRootMount) {
  auto m = ReadMountInfo();
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(FindMountAt(*m, "/").has_value());
}

TEST(IsDeadFuseMount, LiveDirectoriesAreNot) {
  EXPECT_FALSE(IsDeadFuseMount("/"));
  EXPECT_FALSE(IsDeadFuseMount("/no/such/dir"));
}

}  // namespace
}  // namespace stoker
