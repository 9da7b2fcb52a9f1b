#include "fs/supervisor.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "util/sanitizers.h"

namespace stoker {
namespace {

// Supervise blocks the signals it waits for and leaves them so (its process
// ends with it); each test puts the mask back for the tests after it.
class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sigprocmask(SIG_SETMASK, nullptr, &mask_), 0);
    // ThreadSanitizer's runtime starts a thread of its own with the first
    // thread a test makes, and keeps it: the supervisor refuses there (such
    // a build mounts without one, fs/mount.cc).
    if (kThreadSanitizer) GTEST_SKIP() << "under ThreadSanitizer";
    // Run in one process with the other suites (ctest runs each test alone),
    // a thread another test left running would make every test here refuse.
    std::vector<std::string> left = AwaitOneThread(std::chrono::seconds(1));
    if (!left.empty()) GTEST_SKIP() << "threads of other tests still run: " << left[0];
  }
  void TearDown() override { sigprocmask(SIG_SETMASK, &mask_, nullptr); }

  static Status SuperviseExiting(int code, const SupervisorOptions& options = {}) {
    return Supervise(options, [code](SupervisorLink& link) {
      return link.generation() == 1 && link.restart() == nullptr ? code : 99;
    });
  }

 private:
  sigset_t mask_;
};

TEST_F(SupervisorTest, RunsTheDaemonInAChildAndReturnsHowItEnded) {
  EXPECT_TRUE(SuperviseExiting(0).ok());
  Status st = SuperviseExiting(3);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("exited with status 3"), std::string::npos) << st.message();
}

// Regression (issue 30, item 1): under load, a mount came up without its
// supervisor, because the log's flusher thread, just joined, was still
// counted. A thread joined right before Supervise must never make it refuse.
TEST_F(SupervisorTest, AThreadJustJoinedDoesNotRefuseTheSupervisor) {
  for (int i = 0; i < 200; ++i) {
    std::thread t([] {});
    t.join();
    Status st = SuperviseExiting(0);
    ASSERT_TRUE(st.ok()) << "round " << i << ": " << st.message();
  }
}

// The same window made wide: a thread still leaving when Supervise is called
// is waited for, not counted against it.
TEST_F(SupervisorTest, WaitsForAThreadThatIsLeaving) {
  std::thread([] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }).detach();
  Status st = SuperviseExiting(0);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(OtherThreads().empty());
}

TEST_F(SupervisorTest, RefusesAThreadThatStaysAndNamesIt) {
  std::atomic<bool> release{false};
  std::thread t([&release] {
    pthread_setname_np(pthread_self(), "stays-on");
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  // The name is set by the thread itself: wait until it shows.
  auto named = [] {
    for (const std::string& t : OtherThreads()) {
      if (t.rfind("stays-on", 0) == 0) return true;
    }
    return false;
  };
  while (!named()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  SupervisorOptions options;
  options.single_thread_wait = std::chrono::milliseconds(50);
  Status st = SuperviseExiting(0, options);
  release = true;
  t.join();
  EXPECT_EQ(st.code(), EDEADLK);
  EXPECT_NE(st.message().find("stays-on"), std::string::npos) << st.message();
}

TEST_F(SupervisorTest, AwaitOneThreadReturnsAtOnceWhenAlone) {
  EXPECT_TRUE(AwaitOneThread(std::chrono::milliseconds(0)).empty());
}

}  // namespace
}  // namespace stoker
