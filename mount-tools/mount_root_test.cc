// Mount helpers of the CLI: path handling, finding a mount root by its stats
// file, and telling live processes from exited ones.
#include "mount-tools/mount_root.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace stoker {
namespace {

TEST(RelativeToRoot, StripsTheRoot) {
  EXPECT_EQ(RelativeToRoot("/mnt/x", "/mnt/x"), "");
  EXPECT_EQ(RelativeToRoot("/mnt/x", "/mnt/x/a/b"), "a/b");
  EXPECT_EQ(RelativeToRoot("/", "/a"), "a");
}

class MountpointDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker-mountpoint-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    char resolved[PATH_MAX];
    ASSERT_NE(realpath(tmpl, resolved), nullptr);
    dir_ = resolved;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(MountpointDir, AbsolutePathNoFollowNormalises) {
  auto p = AbsolutePathNoFollow(dir_ + "/a/../b/");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, dir_ + "/b");
  EXPECT_EQ(*AbsolutePathNoFollow("/"), "/");
}

TEST_F(MountpointDir, AbsolutePathNoFollowResolvesTheParentOnly) {
  std::filesystem::create_directory(dir_ + "/real");
  std::filesystem::create_directory_symlink(dir_ + "/real", dir_ + "/link");
  std::filesystem::create_directory_symlink(dir_ + "/real", dir_ + "/real/last");
  auto p = AbsolutePathNoFollow(dir_ + "/link/last");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, dir_ + "/real/last");  // the last component is not followed
}

TEST_F(MountpointDir, AbsolutePathNoFollowNeedsTheParent) {
  auto p = AbsolutePathNoFollow(dir_ + "/missing/x");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ENOENT);
}

TEST_F(MountpointDir, FindMountRootByStatsFile) {
  std::filesystem::create_directories(dir_ + "/root/.stoker");
  std::filesystem::create_directories(dir_ + "/root/a/b");
  std::ofstream(dir_ + "/root/.stoker/stats.json") << "{\"pid\": 1}";
  std::ofstream(dir_ + "/root/a/b/file") << "x";

  for (const std::string& p : {dir_ + "/root", dir_ + "/root/a/b", dir_ + "/root/a/b/file"}) {
    auto r = FindMountRoot(p, /*require_fuse=*/false);
    ASSERT_TRUE(r.ok()) << p << ": " << r.status().message();
    EXPECT_EQ(*r, dir_ + "/root");
  }
  // A directory with a stats file is not a mount unless it is a FUSE mount.
  auto fuse_only = FindMountRoot(dir_ + "/root/a", /*require_fuse=*/true);
  ASSERT_FALSE(fuse_only.ok());
  EXPECT_EQ(fuse_only.status().code(), ENOENT);
  EXPECT_NE(fuse_only.status().message().find("not under a stoker mount"), std::string::npos);

  auto stats = ReadStatsFile(dir_ + "/root");
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->json["pid"], 1);
}

TEST_F(MountpointDir, FindMountRootFailsOutsideAMount) {
  auto r = FindMountRoot(dir_, /*require_fuse=*/false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir_), std::string::npos);
  auto missing = FindMountRoot(dir_ + "/nope", false);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ENOENT);
}

TEST_F(MountpointDir, ReadStatsFileRefusesNonJson) {
  std::filesystem::create_directories(dir_ + "/.stoker");
  std::ofstream(dir_ + "/.stoker/stats.json") << "not json";
  auto r = ReadStatsFile(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EBADMSG);
}

TEST(ProcessAlive, ZombiesCountAsExited) {
  EXPECT_TRUE(ProcessAlive(getpid()));
  EXPECT_FALSE(ProcessAlive(0));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  // Not reaped yet: a zombie until waitpid, and already exited for us.
  EXPECT_TRUE(WaitForProcessExit(child, 60000));
  EXPECT_FALSE(ProcessAlive(child));
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
}

// A process whose main thread has exited while another thread runs (as a
// killed daemon's may, for a moment, while its other threads exit and still
// hold its files) is alive. Regression: its zombie main thread made it look
// gone, and fsck found the cache dir still locked.
TEST(ProcessAlive, AZombieMainThreadWithThreadsLeftIsAlive) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pthread_t t;
    pthread_create(
        &t, nullptr,
        [](void*) -> void* {
          for (;;) pause();
        },
        nullptr);
    (void)!write(ready[1], "x", 1);
    syscall(SYS_exit, 0);  // the main thread only (not exit_group): the process lives on
  }
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  // Once the main thread is a zombie, the process must still count as alive.
  const std::string leader = "/proc/" + std::to_string(child) + "/stat";
  for (int i = 0; i < 5000; ++i) {
    std::ifstream f(leader);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    if (paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z') break;
    usleep(1000);
  }
  EXPECT_TRUE(ProcessAlive(child));
  EXPECT_FALSE(WaitForProcessExit(child, 0));
  kill(child, SIGKILL);
  EXPECT_TRUE(WaitForProcessExit(child, 60000));
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
}

TEST(ProcessAlive, WaitTimesOutOnALiveProcess) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  EXPECT_FALSE(WaitForProcessExit(child, 0));
  kill(child, SIGKILL);
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
}

}  // namespace
}  // namespace stoker
