// OriginBackoff: whether a remote origin answers, told by the outcome of
// every request to it, for callers that hold an answer of their own (the
// last validated version of a cached file, a directory listed before) and
// may give it instead of asking.
//
// Without it, a stopped or unreachable server made every lookup and open of
// a cached file wait out the connect/stall timeouts and retries before the
// cache served its copy: with --revalidate 0, --origin-stall-timeout 2 and
// --origin-retries 1, about 12 s per open (README, reliability suite).
//
// Contract:
// - A request that could not reach the origin (IsOriginUnavailable, after
//   its retries) starts an episode, or extends it. For `backoff` after the
//   last such failure AnswerFromHeld() is true: the caller gives what it
//   holds, without a request.
// - Callers that hold nothing (an uncached read, a name never listed) still
//   ask, and fail in the configured time; any answer from the origin (data,
//   ENOENT, 403) ends the episode at once.
// - Once the back-off has passed, the origin is asked again (a probe) and
//   the back-off restarts, so callers keep being answered from what they
//   hold while the probe waits. With a background probe (SetProbe), no
//   caller waits on it: AnswerFromHeld() starts the probe and is true all
//   the same, and at most one is in flight. Without one, that
//   AnswerFromHeld() is false: the caller asks, and waits. A probe that
//   fails extends the episode; a caller's probe that is never reported
//   costs at most one more probe per back-off.
// - Logged once per episode: its start (warning, naming the failed request)
//   and its end (how long, how many answers were given from held data).
// - backoff 0: AnswerFromHeld() is always false (every caller asks).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <functional>

#include "util/clock.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

class OriginBackoff {
 public:
  // Monotonic nanoseconds (util/clock.h's; tests pass their own).
  using Clock = std::function<int64_t()>;

  explicit OriginBackoff(int64_t backoff_ns, Clock clock = MonotonicNs);

  // The outcome of one request to the origin, after its retries: OK or an
  // error the origin gave (ENOENT, EACCES) for an answer, or a status whose
  // code IsOriginUnavailable() accepts for no answer.
  void Record(const Status& outcome);
  // True: give the held answer now, without asking (counted).
  bool AnswerFromHeld();

  // A probe of the origin's own, run in the background: start() must not
  // block; the request it starts reports its outcome with Record() like any
  // other, then calls ProbeDone(). Set before the first AnswerFromHeld().
  void SetProbe(std::function<void()> start);
  void ProbeDone();

  bool unreachable() const;
  // Episodes so far, and answers given from held data in all of them.
  uint64_t episodes() const;
  uint64_t held_answers() const;

 private:
  const int64_t backoff_ns_;
  const Clock clock_;
  mutable Mutex mu_;
  bool unreachable_ GUARDED_BY(mu_) = false;
  int64_t since_ns_ GUARDED_BY(mu_) = 0;      // the episode's start
  int64_t ask_after_ns_ GUARDED_BY(mu_) = 0;  // when the next probe goes
  uint64_t episodes_ GUARDED_BY(mu_) = 0;
  uint64_t held_answers_ GUARDED_BY(mu_) = 0;
  uint64_t episode_answers_ GUARDED_BY(mu_) = 0;
  std::function<void()> probe_;  // set before use
  bool probing_ GUARDED_BY(mu_) = false;
};

}  // namespace stoker
