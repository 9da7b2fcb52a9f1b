// CacheDirLock: one process per cache dir, and no unsafe cache dirs.
#include "cache/cache_dir_lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

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
  EXPECT_EQ(second.status().message(),
            "cache dir " + dir + " is in use by stoker pid " + std::to_string(getpid()));
  first.value().reset();
  EXPECT_TRUE(CacheDirLock::Acquire(dir, true).ok()) << "released with its holder";
}

TEST(CacheDirLockTest, ASecondHolderIsToldWhoHoldsIt) {
  testing::ScratchDir d("lock");
  auto first = CacheDirLock::Acquire(d.path(), true, {.pid = 4242, .mountpoint = "/mnt/x"});
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = CacheDirLock::Acquire(d.path(), true, {.pid = 1, .mountpoint = "/mnt/y"});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(),
            "cache dir " + d.path() + " is in use by stoker pid 4242 (the mount at /mnt/x)");
  first.value().reset();
  // A shorter record replaces a longer one whole.
  auto third = CacheDirLock::Acquire(d.path(), true, {.pid = 7, .mountpoint = ""});
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(CacheDirLock::Acquire(d.path(), true).status().message(),
            "cache dir " + d.path() + " is in use by stoker pid 7");
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
