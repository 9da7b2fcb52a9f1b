// CacheDirLock: one process per cache dir, and no unsafe cache dirs.
#include "cache/cache_dir_lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "cache/cache_test_util.h"

namespace stoker {
namespace {

TEST(CacheDirLockTest, CreatesPrivateDirAndRefusesASecondHolder) {
  testing::ScratchDir d("lock");
  std::string dir = d.Sub("a/b/cache");
  auto first = CacheDirLock::Acquire(dir, true);
  ASSERT_TRUE(first.ok()) << first.status().message();
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto second = CacheDirLock::Acquire(dir, true);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), EBUSY);
  EXPECT_EQ(second.status().message(), "cache dir " + dir + " is in use by another stoker process");
  first.value().reset();
  EXPECT_TRUE(CacheDirLock::Acquire(dir, true).ok()) << "released with its holder";
}

TEST(CacheDirLockTest, RefusesGroupOrWorldWritableDirs) {
  testing::ScratchDir d("lock");
  ASSERT_EQ(chmod(d.path().c_str(), 0770), 0);
  auto r = CacheDirLock::Acquire(d.path(), true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EPERM);
  EXPECT_NE(r.status().message().find("writable by group or others"), std::string::npos);
  ASSERT_EQ(chmod(d.path().c_str(), 0755), 0);
  EXPECT_TRUE(CacheDirLock::Acquire(d.path(), true).ok());
}

TEST(CacheDirLockTest, MissingDirWithoutCreateAndFilesAreErrors) {
  testing::ScratchDir d("lock");
  EXPECT_EQ(CacheDirLock::Acquire(d.Sub("nope"), false).status().code(), ENOENT);
  testing::WriteFile(d.Sub("file"), "x");
  EXPECT_EQ(CacheDirLock::Acquire(d.Sub("file"), true).status().code(), ENOTDIR);
  EXPECT_EQ(CacheDirLock::Acquire(d.Sub("file/sub"), true).status().code(), ENOTDIR);
}

}  // namespace
}  // namespace stoker
