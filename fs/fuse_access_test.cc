#include "fs/fuse_access.h"

#include <gtest/gtest.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace stoker {
namespace {

// A root process in a privileged container: everything a mount needs.
FuseAccess Privileged() {
  FuseAccess a;
  a.root = true;
  a.device_is_char = true;
  a.device_rdev = makedev(10, 229);
  a.cap_sys_admin = true;
  a.bounding_sys_admin = true;
  a.fusermount3 = "/usr/bin/fusermount3";
  return a;
}

// A non-root user on a host with fuse3 installed (/dev/fuse 0600 root).
FuseAccess User() {
  FuseAccess a = Privileged();
  a.root = false;
  a.cap_sys_admin = false;
  return a;
}

bool Mentions(const Status& st, const std::string& text) {
  return st.message().find(text) != std::string::npos;
}

TEST(FuseAccessTest, PrivilegedAndUserWithFusermountMayMount) {
  EXPECT_TRUE(CheckFuseAccess(Privileged()).ok());
  EXPECT_TRUE(CheckFuseAccess(User()).ok()) << CheckFuseAccess(User()).message();
}

TEST(FuseAccessTest, MissingDeviceSaysHowToPassIt) {
  FuseAccess a = Privileged();
  a.device_errno = ENOENT;
  const Status st = CheckFuseAccess(a);
  EXPECT_EQ(st.code(), ENOENT);
  EXPECT_TRUE(Mentions(st, "/dev/fuse is missing")) << st.message();
  EXPECT_TRUE(Mentions(st, "--device /dev/fuse")) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
}

TEST(FuseAccessTest, SomethingElseAtDevFuseIsRefused) {
  FuseAccess a = Privileged();
  a.device_rdev = makedev(1, 3);  // /dev/null bound over it
  EXPECT_TRUE(Mentions(CheckFuseAccess(a), "not the FUSE device"));
  EXPECT_TRUE(Mentions(CheckFuseAccess(a), "1:3"));
  a.device_is_char = false;
  EXPECT_TRUE(Mentions(CheckFuseAccess(a), "not a character device"));
}

TEST(FuseAccessTest, DeviceCgroupDenialIsNamed) {
  FuseAccess a = Privileged();
  a.open_errno = EPERM;
  const Status st = CheckFuseAccess(a);
  EXPECT_EQ(st.code(), EPERM);
  EXPECT_TRUE(Mentions(st, "/dev/fuse cannot be opened")) << st.message();
}

TEST(FuseAccessTest, RootWithoutSysAdminAnywhereIsRefused) {
  FuseAccess a = Privileged();
  a.cap_sys_admin = false;
  a.bounding_sys_admin = false;
  const Status st = CheckFuseAccess(a);
  EXPECT_EQ(st.code(), EPERM);
  EXPECT_TRUE(Mentions(st, "CAP_SYS_ADMIN")) << st.message();
  EXPECT_TRUE(Mentions(st, "--cap-add SYS_ADMIN")) << st.message();
  a.fusermount3.clear();
  EXPECT_TRUE(Mentions(CheckFuseAccess(a), "no fusermount3"));
}

TEST(FuseAccessTest, RootWithoutEffectiveSysAdminMayUseFusermount) {
  FuseAccess a = Privileged();
  a.cap_sys_admin = false;
  EXPECT_TRUE(CheckFuseAccess(a).ok());
}

TEST(FuseAccessTest, UserNeedsToOpenTheDevice) {
  // libfuse opens /dev/fuse before it falls back to fusermount3.
  FuseAccess a = User();
  a.open_errno = EACCES;
  const Status st = CheckFuseAccess(a);
  EXPECT_EQ(st.code(), EACCES);
  EXPECT_TRUE(Mentions(st, "0666")) << st.message();
}

TEST(FuseAccessTest, UserNeedsFusermountBoundingSetAndSetuid) {
  FuseAccess a = User();
  a.fusermount3.clear();
  EXPECT_TRUE(Mentions(CheckFuseAccess(a), "fusermount3 not found on PATH"));
  a = User();
  a.bounding_sys_admin = false;
  EXPECT_TRUE(Mentions(CheckFuseAccess(a), "bounding set"));
  a = User();
  a.no_new_privs = true;
  EXPECT_TRUE(Mentions(CheckFuseAccess(a), "no_new_privs"));
  EXPECT_TRUE(Mentions(CheckFuseAccess(a), "allowPrivilegeEscalation"));
}

TEST(FuseAccessTest, ProbeSeesThisProcess) {
  const FuseAccess a = ProbeFuseAccess();
  EXPECT_EQ(a.root, geteuid() == 0);
  EXPECT_EQ(a.fusermount3, FindFusermount3());
}

}  // namespace
}  // namespace stoker
