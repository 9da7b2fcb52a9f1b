#include "fs/errno_map.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(ErrnoMapTest, OkIsZero) { EXPECT_EQ(ErrnoFor(Status::OK()), 0); }

TEST(ErrnoMapTest, PlainCodesPassThrough) {
  for (int e : {ENOENT, EACCES, EPERM, EIO, ENOTDIR, EISDIR, ELOOP, ESTALE, ETIMEDOUT, EINVAL}) {
    EXPECT_EQ(ErrnoFor(Status::Error(e, "x")), e) << e;
  }
}

TEST(ErrnoMapTest, CodesThatMisleadTheKernelBecomeEio) {
  // ENOSYS would disable the operation for the whole mount; ENOTCONN reads as
  // a dead mount; a corrupt chunk or a full cache is never the reader's error.
  for (int e : {ENOSYS, ENOTCONN, EHOSTUNREACH, ECONNREFUSED, EBADMSG, ENOSPC}) {
    EXPECT_EQ(ErrnoFor(Status::Error(e, "x")), EIO) << e;
  }
  EXPECT_EQ(ErrnoFor(Status::Error(-3, "x")), EIO);
  EXPECT_EQ(ErrnoFor(Status::Error(100000, "x")), EIO);
}

TEST(ErrnoMapTest, XattrUnsupportedStaysPerCall) {
  EXPECT_EQ(XattrErrnoFor(Status::Error(ENOSYS, "x")), ENOTSUP);
  EXPECT_EQ(XattrErrnoFor(Status::Error(EOPNOTSUPP, "x")), ENOTSUP);
  EXPECT_EQ(XattrErrnoFor(Status::Error(ENODATA, "x")), ENODATA);
  EXPECT_EQ(XattrErrnoFor(Status::Error(ENOTCONN, "x")), EIO);
}

}  // namespace
}  // namespace stoker
