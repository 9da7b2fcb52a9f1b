#include "cache/cache_dir_fs.h"

#include <gtest/gtest.h>
#include <sys/mount.h>

#include <filesystem>

#include "util/test_files.h"

namespace stoker {
namespace {

TEST(CacheDirFsTest, ABoundTheDiskCanHoldAndADiskFsWarnOfNothing) {
  const CacheDirFs fs{.dir = "/c", .free_bytes = 10ull << 30, .memory_fs = ""};
  EXPECT_TRUE(CacheDirWarnings(fs, 10ull << 30, 0).empty());
  EXPECT_TRUE(CacheDirWarnings(fs, 12ull << 30, 2ull << 30).empty()) << "what it holds counts";
}

TEST(CacheDirFsTest, ABoundBeyondFreeSpaceAndWhatIsHeldIsNamed) {
  const CacheDirFs fs{.dir = "/c", .free_bytes = 50ull << 30, .memory_fs = ""};
  std::vector<std::string> w = CacheDirWarnings(fs, 10ull << 40, 1ull << 30);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "--cache-size 10.0 TiB is more than cache dir '/c' can take (50.0 GiB free, 1.00 GiB "
            "cached): the free space bounds the cache, not --cache-size");
}

TEST(CacheDirFsTest, AMemoryFsSaysTheCacheDoesNotSurviveAReboot) {
  const CacheDirFs fs{.dir = "/dev/shm/c", .free_bytes = 1ull << 30, .memory_fs = "tmpfs"};
  std::vector<std::string> w = CacheDirWarnings(fs, 1ull << 20, 0);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("is on tmpfs"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("does not survive a reboot"), std::string::npos) << w[0];
}

TEST(CacheDirFsTest, ProbesTheDeepestDirThatExists) {
  testing::ScratchDir d("fs");
  Result<CacheDirFs> fs = ProbeCacheDirFs(d.Sub("not/made/yet"));
  ASSERT_TRUE(fs.ok()) << fs.status().message();
  EXPECT_GT(fs->free_bytes, 0u);
  EXPECT_FALSE(std::filesystem::exists(d.Sub("not")));
}

TEST(CacheDirFsTest, FindsATmpfs) {
  testing::ScratchDir d("fs");
  const std::string at = d.Sub("tmpfs");
  std::filesystem::create_directories(at);
  if (mount("tmpfs", at.c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "mounting a tmpfs needs CAP_SYS_ADMIN";
  }
  Result<CacheDirFs> fs = ProbeCacheDirFs(at + "/cache");
  umount2(at.c_str(), MNT_DETACH);
  ASSERT_TRUE(fs.ok()) << fs.status().message();
  EXPECT_EQ(fs->memory_fs, "tmpfs");
  EXPECT_LE(fs->free_bytes, 1u << 20);
}

}  // namespace
}  // namespace stoker
