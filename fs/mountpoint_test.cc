#include "fs/mountpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace stoker {
namespace {

TEST(DevOfMountTest, AgreesWithStatForAMountedFilesystem) {
  struct stat st;
  ASSERT_EQ(stat("/proc", &st), 0);
  Result<dev_t> dev = DevOfMount("/proc");
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  EXPECT_EQ(*dev, st.st_dev);
}

TEST(DevOfMountTest, NothingMountedIsNotFound) {
  Result<dev_t> dev = DevOfMount("/proc/self");
  EXPECT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), ENOENT);
}

}  // namespace
}  // namespace stoker
