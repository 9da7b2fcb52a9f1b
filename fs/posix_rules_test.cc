#include "fs/posix_rules.h"

#include <gtest/gtest.h>

namespace stoker::fuse_ops {
namespace {

TEST(PosixRulesTest, OnlyOpensThatWriteAreWrites) {
  EXPECT_FALSE(WantsWrite(O_RDONLY));
  EXPECT_FALSE(WantsWrite(O_RDONLY | O_APPEND));  // Linux opens it on a read-only file
  EXPECT_FALSE(WantsWrite(O_RDONLY | O_NOATIME | O_DIRECT));
  EXPECT_TRUE(WantsWrite(O_WRONLY));
  EXPECT_TRUE(WantsWrite(O_RDWR));
  EXPECT_TRUE(WantsWrite(O_RDONLY | O_TRUNC));
  EXPECT_TRUE(WantsWrite(O_RDONLY | O_CREAT));
  EXPECT_TRUE(WantsWrite(O_WRONLY | O_APPEND));
}

TEST(PosixRulesTest, AccessWithoutModeChecks) {
  EXPECT_EQ(AccessErrno(S_IFREG | 0644, R_OK), 0);
  EXPECT_EQ(AccessErrno(S_IFREG | 0000, R_OK), 0);  // modes are not checked
  EXPECT_EQ(AccessErrno(S_IFREG | 0644, W_OK), EROFS);
  EXPECT_EQ(AccessErrno(S_IFDIR | 0755, W_OK), EROFS);
  EXPECT_EQ(AccessErrno(S_IFLNK | 0777, W_OK), EROFS);
  EXPECT_EQ(AccessErrno(S_IFIFO | 0644, W_OK), 0);  // a FIFO is written elsewhere
  EXPECT_EQ(AccessErrno(S_IFCHR | 0666, W_OK), 0);
  EXPECT_EQ(AccessErrno(S_IFREG | 0644, X_OK), EACCES);  // root too
  EXPECT_EQ(AccessErrno(S_IFREG | 0744, X_OK), 0);
  EXPECT_EQ(AccessErrno(S_IFREG | 0601, X_OK), 0);
  EXPECT_EQ(AccessErrno(S_IFDIR | 0644, X_OK), 0);
  EXPECT_EQ(AccessErrno(S_IFIFO | 0644, X_OK), EACCES);
  EXPECT_EQ(AccessErrno(S_IFREG | 0644, R_OK | X_OK), EACCES);
  EXPECT_EQ(AccessErrno(S_IFREG | 0644, F_OK), 0);
}

}  // namespace
}  // namespace stoker::fuse_ops
