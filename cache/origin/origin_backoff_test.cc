#include "cache/origin/origin_backoff.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace stoker {
namespace {

constexpr int64_t kSec = 1000000000;

class OriginBackoffTest : public ::testing::Test {
 protected:
  int64_t now_ = 1000 * kSec;
  OriginBackoff backoff_{5 * kSec, [this] { return now_; }};
};

TEST_F(OriginBackoffTest, ReachableOriginIsAlwaysAsked) {
  EXPECT_FALSE(backoff_.AnswerFromHeld());
  backoff_.Record(Status::OK());
  EXPECT_FALSE(backoff_.AnswerFromHeld());
  EXPECT_FALSE(backoff_.unreachable());
  EXPECT_EQ(backoff_.episodes(), 0u);
}

TEST_F(OriginBackoffTest, AnswersAreNotUnreachability) {
  // The origin answered: a deleted file or a refusal is not a dead server.
  for (int code : {ENOENT, EACCES, EPERM, EINVAL, EROFS}) {
    backoff_.Record(Status::Error(code, "answer"));
    EXPECT_FALSE(backoff_.unreachable()) << code;
    EXPECT_FALSE(backoff_.AnswerFromHeld()) << code;
  }
}

TEST_F(OriginBackoffTest, FailureAnswersFromHeldUntilTheBackoffPasses) {
  backoff_.Record(Status::Error(ETIMEDOUT, "GET http://h/x: timeout"));
  EXPECT_TRUE(backoff_.unreachable());
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(backoff_.AnswerFromHeld());
    now_ += kSec / 25;  // 4 s in all: still within the back-off
  }
  EXPECT_EQ(backoff_.held_answers(), 100u);
  EXPECT_EQ(backoff_.episodes(), 1u);
}

TEST_F(OriginBackoffTest, OneProbePerBackoffOthersKeepBeingAnswered) {
  backoff_.Record(Status::Error(EIO, "down"));
  now_ += 5 * kSec;
  EXPECT_FALSE(backoff_.AnswerFromHeld());  // the probe
  EXPECT_TRUE(backoff_.AnswerFromHeld());   // the others while it waits
  EXPECT_TRUE(backoff_.AnswerFromHeld());
  now_ += 2 * kSec;
  backoff_.Record(Status::Error(EIO, "still down"));  // the probe failed
  now_ += 4 * kSec;
  EXPECT_TRUE(backoff_.AnswerFromHeld());  // back-off counted from the probe's failure
  now_ += 1 * kSec;
  EXPECT_FALSE(backoff_.AnswerFromHeld());  // the next probe
  EXPECT_EQ(backoff_.episodes(), 1u);
}

TEST_F(OriginBackoffTest, UnreportedProbeCostsOneMorePerBackoff) {
  backoff_.Record(Status::Error(ECONNREFUSED, "down"));
  now_ += 5 * kSec;
  EXPECT_FALSE(backoff_.AnswerFromHeld());
  now_ += 5 * kSec - 1;
  EXPECT_TRUE(backoff_.AnswerFromHeld());
  now_ += 1;
  EXPECT_FALSE(backoff_.AnswerFromHeld());
  EXPECT_TRUE(backoff_.AnswerFromHeld());
}

TEST_F(OriginBackoffTest, WithABackgroundProbeNoCallerWaits) {
  int started = 0;
  backoff_.SetProbe([&] { started++; });
  backoff_.Record(Status::Error(ETIMEDOUT, "down"));
  EXPECT_TRUE(backoff_.AnswerFromHeld());
  EXPECT_EQ(started, 0) << "within the back-off";
  now_ += 5 * kSec;
  EXPECT_TRUE(backoff_.AnswerFromHeld())
      << "the back-off passed: the probe starts, the caller is answered";
  EXPECT_EQ(started, 1);
  EXPECT_TRUE(backoff_.AnswerFromHeld());
  now_ += 5 * kSec;
  EXPECT_TRUE(backoff_.AnswerFromHeld());
  EXPECT_EQ(started, 1) << "one probe in flight at most";
  backoff_.Record(Status::Error(ETIMEDOUT, "the probe failed"));
  backoff_.ProbeDone();
  now_ += 5 * kSec;
  EXPECT_TRUE(backoff_.AnswerFromHeld());
  EXPECT_EQ(started, 2);
  backoff_.Record(Status::OK());  // the second probe got an answer
  backoff_.ProbeDone();
  EXPECT_FALSE(backoff_.unreachable());
  EXPECT_FALSE(backoff_.AnswerFromHeld());
  EXPECT_EQ(backoff_.episodes(), 1u);
}

TEST_F(OriginBackoffTest, AProbeMayReportBeforeItsStartReturns) {
  // The start function runs without the lock held: a probe that finishes
  // at once (a refused connection) reports from inside it.
  backoff_.SetProbe([&] {
    backoff_.Record(Status::OK());
    backoff_.ProbeDone();
  });
  backoff_.Record(Status::Error(ECONNREFUSED, "down"));
  now_ += 5 * kSec;
  EXPECT_TRUE(backoff_.AnswerFromHeld());
  EXPECT_FALSE(backoff_.unreachable());
}

TEST_F(OriginBackoffTest, FirstAnswerEndsTheEpisode) {
  backoff_.Record(Status::Error(EHOSTUNREACH, "down"));
  EXPECT_TRUE(backoff_.AnswerFromHeld());
  backoff_.Record(Status::Error(ENOENT, "an uncached read reached the server"));
  EXPECT_FALSE(backoff_.unreachable());
  EXPECT_FALSE(backoff_.AnswerFromHeld());
  backoff_.Record(Status::Error(ENOTCONN, "down again"));
  EXPECT_TRUE(backoff_.AnswerFromHeld());
  EXPECT_EQ(backoff_.episodes(), 2u);
  EXPECT_EQ(backoff_.held_answers(), 2u);
}

TEST(OriginBackoffOffTest, ZeroBackoffAlwaysAsks) {
  OriginBackoff off(0, [] { return int64_t{0}; });
  off.Record(Status::Error(ETIMEDOUT, "down"));
  EXPECT_TRUE(off.unreachable());
  EXPECT_FALSE(off.AnswerFromHeld());
  EXPECT_EQ(off.held_answers(), 0u);
}

}  // namespace
}  // namespace stoker
