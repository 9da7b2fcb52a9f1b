#include "cache/origin/origin_backoff.h"

#include <time.h>

#include <utility>

#include "cache/origin/origin.h"
#include "util/log.h"

namespace stoker {

OriginBackoff::OriginBackoff(int64_t backoff_ns, Clock clock)
    : backoff_ns_(backoff_ns), clock_(std::move(clock)) {}

void OriginBackoff::Record(const Status& outcome) {
  const bool failed = !outcome.ok() && IsOriginUnavailable(outcome.code());
  const int64_t now = clock_();
  MutexLock l(mu_);
  if (failed) {
    if (!unreachable_) {
      unreachable_ = true;
      since_ns_ = now;
      episode_answers_ = 0;
      episodes_++;
      if (backoff_ns_ > 0) {
        LOG_WARN(
            "origin unreachable ({}); answering lookups and opens of cached files from the "
            "cache, asking the origin again every {} ms until it answers",
            outcome.message(), backoff_ns_ / 1000000);
      }
    }
    ask_after_ns_ = now + backoff_ns_;
    return;
  }
  if (!unreachable_) return;
  unreachable_ = false;
  if (backoff_ns_ > 0) {
    LOG_INFO("origin reachable again after {} ms; {} answers were given from the cache meanwhile",
             (now - since_ns_) / 1000000, episode_answers_);
  }
}

bool OriginBackoff::AnswerFromHeld() {
  if (backoff_ns_ <= 0) return false;
  const int64_t now = clock_();
  bool start = false;
  {
    MutexLock l(mu_);
    if (!unreachable_) return false;
    if (now >= ask_after_ns_) {
      ask_after_ns_ = now + backoff_ns_;
      if (!probe_) return false;  // this caller probes; the others wait for it
      start = !probing_;
      probing_ = true;
    }
    held_answers_++;
    episode_answers_++;
  }
  if (start) probe_();  // unlocked: its request may report before it returns
  return true;
}

void OriginBackoff::SetProbe(std::function<void()> start) { probe_ = std::move(start); }

void OriginBackoff::ProbeDone() {
  MutexLock l(mu_);
  probing_ = false;
}

bool OriginBackoff::unreachable() const {
  MutexLock l(mu_);
  return unreachable_;
}

uint64_t OriginBackoff::episodes() const {
  MutexLock l(mu_);
  return episodes_;
}

uint64_t OriginBackoff::held_answers() const {
  MutexLock l(mu_);
  return held_answers_;
}

}  // namespace stoker
