#include "mount-tools/mount_helper.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

using Args = std::vector<std::string>;

TEST(MountHelperTest, FstabOptionsBecomeStokerOptions) {
  Result<Args> a =
      MountHelperArgs({"/nas/data", "/mnt/data", "-o",
                       "cache=/ssd/c,cache_size=200G,view=decoded:channels=3;dct=fast,"
                       "allow_other,noauto,nofail,_netdev,x-systemd.requires=nas.mount,"
                       "rw,no_supervise,metrics=:9464",
                       "-n"});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (Args{"mount", "/nas/data", "/mnt/data", "--cache", "/ssd/c", "--cache-size",
                      "200G", "--view", "decoded:channels=3,dct=fast", "--no-supervise",
                      "--metrics", ":9464", "-o", "allow_other"}));
}

TEST(MountHelperTest, FuseOptionsPassThroughTogether) {
  Result<Args> a = MountHelperArgs(
      {"s3://b/p", "/mnt/d", "-ocache=/c,nosuid,nodev,default_permissions,max_read=131072"});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (Args{"mount", "s3://b/p", "/mnt/d", "--cache", "/c", "-o",
                      "nosuid,nodev,default_permissions,max_read=131072"}));
}

TEST(MountHelperTest, BadOptionsAreOneLine) {
  for (const Args& bad : {Args{"/o", "/m", "-o", "cache=/c,bogus"}, Args{"/o", "/m", "-o", "cache"},
                          Args{"/o", "/m", "-o", "no_supervise=1"}, Args{"/o", "-o", "cache=/c"},
                          Args{"/o", "/m", "/x"}, Args{"/o", "/m", "-o"}, Args{"/o", "/m", "-Z"}}) {
    Result<Args> a = MountHelperArgs(bad);
    EXPECT_FALSE(a.ok()) << bad.size();
    if (!a.ok()) EXPECT_EQ(a.status().message().find('\n'), std::string::npos);
  }
}

TEST(MountHelperTest, UmountArguments) {
  EXPECT_EQ(UnmountHelperArgs({"/mnt/d"}).value(), (Args{"unmount", "/mnt/d"}));
  EXPECT_EQ(UnmountHelperArgs({"/mnt/d", "-n", "-l", "-t", "fuse.stoker"}).value(),
            (Args{"unmount", "--lazy", "/mnt/d"}));
  EXPECT_FALSE(UnmountHelperArgs({}).ok());
  EXPECT_FALSE(UnmountHelperArgs({"/a", "/b"}).ok());
  EXPECT_FALSE(UnmountHelperArgs({"-Q", "/a"}).ok());
}

}  // namespace
}  // namespace stoker
