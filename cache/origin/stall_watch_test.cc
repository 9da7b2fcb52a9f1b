#include "cache/origin/stall_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

namespace stoker {
namespace {

constexpr int64_t kSec = 1'000'000'000;

class StallWatchTest : public ::testing::Test {
 protected:
  StallWatchTest()
      : backoff_(5 * kSec, [this] { return now_.load(); }),
        watch_(Options(), &backoff_, [this] { return now_.load(); }) {}

  static StallWatch::Options Options() {
    StallWatch::Options o;
    o.stall_ns = 10 * kSec;
    o.probe_interval_ns = 5 * kSec;
    o.tick_ns = -1;  // the test calls Check
    return o;
  }

  std::atomic<int64_t> now_{100 * kSec};
  OriginBackoff backoff_;
  StallWatch watch_;
  const std::string a_ = "a", b_ = "b", c_ = "c";
};

TEST_F(StallWatchTest, CallsThatReturnInTimeChangeNothing) {
  StallWatch::Token t;
  ASSERT_TRUE(watch_.Begin("stat", a_, &t));
  now_ += 9 * kSec;
  watch_.Check();
  watch_.End(t, 0);
  watch_.Check();
  EXPECT_FALSE(backoff_.unreachable());
  EXPECT_EQ(watch_.stalled_now(), 0u);
  // An error that means "unreachable" from a call that did not stall is the
  // caller's to handle: the watch records only stalls and probes.
  ASSERT_TRUE(watch_.Begin("stat", a_, &t));
  watch_.End(t, EIO);
  EXPECT_FALSE(backoff_.unreachable());
}

TEST_F(StallWatchTest, AStalledCallMakesTheOriginUnreachableUntilItAnswers) {
  StallWatch::Token stuck;
  ASSERT_TRUE(watch_.Begin("stat", a_, &stuck));
  now_ += 10 * kSec;
  watch_.Check();
  EXPECT_TRUE(backoff_.unreachable());
  EXPECT_EQ(watch_.stalled_now(), 1u);
  EXPECT_EQ(backoff_.episodes(), 1u);
  // Found once: a second look starts no second episode.
  watch_.Check();
  EXPECT_EQ(backoff_.episodes(), 1u);

  // Others fail at once instead of joining it, and say why.
  StallWatch::Token t;
  EXPECT_FALSE(watch_.Begin("open", b_, &t));
  Status refused = watch_.RefusedStatus("open", b_);
  EXPECT_EQ(refused.code(), ETIMEDOUT);
  EXPECT_NE(refused.message().find("stat of 'a'"), std::string::npos) << refused.message();
  EXPECT_EQ(watch_.refused(), 1u);
  // Holders of an answer give it.
  EXPECT_TRUE(backoff_.AnswerFromHeld());

  // The stalled call returns: the origin answered, the episode ends.
  watch_.End(stuck, 0);
  EXPECT_FALSE(backoff_.unreachable());
  EXPECT_EQ(watch_.stalled_now(), 0u);
  ASSERT_TRUE(watch_.Begin("open", b_, &t));
  watch_.End(t, 0);
}

TEST_F(StallWatchTest, AStalledCallThatFailsUnreachableKeepsTheEpisode) {
  StallWatch::Token stuck;
  ASSERT_TRUE(watch_.Begin("read", a_, &stuck));
  now_ += 11 * kSec;
  watch_.Check();
  watch_.End(stuck, EIO);  // a soft NFS mount's timeout
  EXPECT_TRUE(backoff_.unreachable());
  // A probe answered with ENOENT: an answer.
  now_ += 5 * kSec;
  ASSERT_TRUE(watch_.ProbeDue());
  StallWatch::Token probe;
  watch_.BeginProbe("statfs", b_, &probe);
  watch_.End(probe, ENOENT);
  EXPECT_FALSE(backoff_.unreachable());
}

TEST_F(StallWatchTest, CallersNeverProbeAndOneProbeGoesPerPeriod) {
  StallWatch::Token stuck, probe, t;
  ASSERT_TRUE(watch_.Begin("stat", a_, &stuck));
  EXPECT_FALSE(watch_.ProbeDue()) << "reachable: nothing to probe";
  now_ += 10 * kSec;
  watch_.Check();
  EXPECT_FALSE(watch_.ProbeDue()) << "a period after the stall was found";
  // Callers are refused however long it has been: none of them may stall.
  for (int i = 0; i < 3; ++i) {
    now_ += 5 * kSec;
    EXPECT_FALSE(watch_.Begin("stat", b_, &t));
  }
  ASSERT_TRUE(watch_.ProbeDue());
  EXPECT_FALSE(watch_.ProbeDue()) << "one probe at a time";
  watch_.BeginProbe("statfs", c_, &probe);
  now_ += 10 * kSec;
  watch_.Check();  // the probe stalls too
  EXPECT_EQ(watch_.stalled_now(), 2u);
  EXPECT_FALSE(watch_.ProbeDue()) << "the stalled probe is still in flight";
  // The stalled probe is answered: the episode ends while the first call
  // still waits.
  watch_.End(probe, 0);
  EXPECT_FALSE(backoff_.unreachable());
  ASSERT_TRUE(watch_.Begin("stat", c_, &t));
  watch_.End(t, 0);
  EXPECT_EQ(watch_.stalled_now(), 1u);
  watch_.End(stuck, 0);
  EXPECT_EQ(watch_.stalled_now(), 0u);
}

TEST_F(StallWatchTest, AProbeThatFailsUnreachableAllowsTheNextAfterAPeriod) {
  StallWatch::Token stuck, probe;
  ASSERT_TRUE(watch_.Begin("stat", a_, &stuck));
  now_ += 10 * kSec;
  watch_.Check();
  now_ += 5 * kSec;
  ASSERT_TRUE(watch_.ProbeDue());
  watch_.BeginProbe("statfs", b_, &probe);
  watch_.End(probe, ENOTCONN);
  EXPECT_TRUE(backoff_.unreachable());
  EXPECT_FALSE(watch_.ProbeDue());
  now_ += 5 * kSec;
  EXPECT_TRUE(watch_.ProbeDue());
  watch_.CancelProbe();  // the owner could not start it: the next period tries again
  EXPECT_FALSE(watch_.ProbeDue());
  now_ += 5 * kSec;
  EXPECT_TRUE(watch_.ProbeDue());
  watch_.CancelProbe();
  watch_.End(stuck, 0);
  EXPECT_FALSE(backoff_.unreachable());
}

TEST(StallWatchThreadTest, TheWatchdogFindsAStallOnItsOwn) {
  OriginBackoff backoff(kSec);
  StallWatch::Options o;
  o.stall_ns = 50'000'000;  // 50 ms
  o.probe_interval_ns = kSec;
  o.tick_ns = 5'000'000;
  StallWatch watch(o, &backoff);
  const std::string path = "x";
  StallWatch::Token t;
  ASSERT_TRUE(watch.Begin("stat", path, &t));
  for (int i = 0; i < 2000 && !backoff.unreachable(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(backoff.unreachable());
  watch.End(t, 0);
  EXPECT_FALSE(backoff.unreachable());
}

TEST(StallWatchThreadTest, OffAdmitsEverythingAndRecordsNothing) {
  OriginBackoff backoff(kSec);
  StallWatch::Options o;
  o.stall_ns = 0;
  StallWatch watch(o, &backoff);
  const std::string path = "x";
  StallWatch::Token t;
  ASSERT_TRUE(watch.Begin("stat", path, &t));
  watch.Check();
  watch.End(t, ETIMEDOUT);
  EXPECT_FALSE(backoff.unreachable());
}

}  // namespace
}  // namespace stoker
