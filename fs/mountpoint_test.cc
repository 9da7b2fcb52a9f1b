#include "fs/mountpoint.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "util/test_files.h"

namespace stoker {
namespace {

using testing::ScratchDir;

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

// An origin, a mountpoint and a place for other names, side by side.
struct Tree {
  ScratchDir dir{"nesting"};
  std::string origin = dir.Sub("origin");
  std::string mnt = dir.Sub("mnt");
  Tree() {
    std::filesystem::create_directories(origin + "/sub");
    std::filesystem::create_directories(mnt);
  }
};

std::string Refusal(const Tree& t, const std::string& cache) {
  return CheckNesting(t.origin, t.mnt, cache).message();
}

TEST(CheckNestingTest, SeparateDirectoriesAreAccepted) {
  Tree t;
  EXPECT_TRUE(CheckNesting(t.origin, t.mnt, t.dir.Sub("cache")).ok());
  EXPECT_TRUE(CheckNesting(t.origin, t.mnt, t.dir.Sub("cache/not/made")).ok());
}

TEST(CheckNestingTest, CacheDirThatIsOrIsInsideTheOriginIsRefusedWithoutMakingIt) {
  Tree t;
  EXPECT_EQ(Refusal(t, t.origin), "cache dir '" + t.origin + "' is the origin '" + t.origin + "'");
  const std::string deep = t.origin + "/sub/cc";
  EXPECT_EQ(Refusal(t, deep), "cache dir '" + deep + "' is inside the origin '" + t.origin + "'");
  EXPECT_EQ(CheckNesting(t.origin, t.mnt, deep).code(), EINVAL);
  EXPECT_FALSE(std::filesystem::exists(deep));
}

TEST(CheckNestingTest, CacheDirInsideTheMountpointIsRefused) {
  Tree t;
  EXPECT_NE(Refusal(t, t.mnt + "/c").find("is inside the mountpoint"), std::string::npos);
  EXPECT_NE(Refusal(t, t.mnt).find("is the mountpoint"), std::string::npos);
}

TEST(CheckNestingTest, ASymlinkToTheOriginDoesNotHideIt) {
  Tree t;
  const std::string link = t.dir.Sub("link");
  ASSERT_EQ(symlink(t.origin.c_str(), link.c_str()), 0);
  EXPECT_NE(Refusal(t, link).find("is the origin"), std::string::npos);
  EXPECT_NE(Refusal(t, link + "/sub/cc").find("is inside the origin"), std::string::npos);
  // The mountpoint reached through the link too.
  std::filesystem::create_directories(t.origin + "/m");
  Status st = CheckNesting(t.origin, link + "/m", t.dir.Sub("cache"));
  EXPECT_NE(st.message().find("is inside the origin"), std::string::npos) << st.message();
}

// A bind mount of the origin, unmounted before the scratch dir is removed.
class BindMount {
 public:
  BindMount(const std::string& from, const std::string& at) : at_(at) {
    std::filesystem::create_directories(at);
    mounted_ = mount(from.c_str(), at.c_str(), nullptr, MS_BIND, nullptr) == 0;
  }
  ~BindMount() {
    if (mounted_) umount2(at_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string at_;
  bool mounted_ = false;
};

TEST(CheckNestingTest, ABindMountOfTheOriginDoesNotHideIt) {
  Tree t;
  BindMount bind(t.origin, t.dir.Sub("bind"));
  if (!bind.mounted()) GTEST_SKIP() << "mount --bind needs CAP_SYS_ADMIN";
  const std::string cache = t.dir.Sub("bind/sub/cc");
  EXPECT_NE(Refusal(t, cache).find("is inside the origin"), std::string::npos);
  EXPECT_NE(Refusal(t, t.dir.Sub("bind")).find("is the origin"), std::string::npos);
  std::filesystem::create_directories(t.origin + "/m");
  Status st = CheckNesting(t.origin, t.dir.Sub("bind/m"), t.dir.Sub("cache"));
  EXPECT_NE(st.message().find("is inside the origin"), std::string::npos) << st.message();
}

TEST(CheckNestingTest, ABindMountOfADirectoryBelowTheOriginDoesNotHideIt) {
  Tree t;
  std::filesystem::create_directories(t.origin + "/sub/deeper");
  BindMount bind(t.origin + "/sub", t.dir.Sub("elsewhere"));
  if (!bind.mounted()) GTEST_SKIP() << "mount --bind needs CAP_SYS_ADMIN";
  EXPECT_NE(Refusal(t, t.dir.Sub("elsewhere")).find("is inside the origin"), std::string::npos);
  EXPECT_NE(Refusal(t, t.dir.Sub("elsewhere/deeper/cc")).find("is inside the origin"),
            std::string::npos);
  // A directory beside the origin on the same file system is not inside it.
  EXPECT_TRUE(CheckNesting(t.origin, t.mnt, t.dir.Sub("cache/not/made")).ok());
}

TEST(CheckNestingTest, ARemoteOriginChecksOnlyTheMountpointAndCache) {
  Tree t;
  EXPECT_TRUE(CheckNesting("s3://bucket/prefix", t.mnt, t.dir.Sub("cache")).ok());
  EXPECT_FALSE(CheckNesting("s3://bucket/prefix", t.mnt, t.mnt + "/c").ok());
}

}  // namespace
}  // namespace stoker
