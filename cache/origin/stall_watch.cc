#include "cache/origin/stall_watch.h"

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "util/log.h"

namespace stoker {

namespace {

std::string Describe(const char* op, const std::string& path) {
  return std::string(op) + " of '" + path + "'";
}

}  // namespace

StallWatch::StallWatch(Options options, OriginBackoff* backoff, OriginBackoff::Clock clock)
    : options_(options), backoff_(backoff), clock_(std::move(clock)) {
  if (options_.stall_ns > 0 && options_.tick_ns >= 0) {
    watchdog_ = std::thread([this] { Run(); });
  }
}

StallWatch::~StallWatch() {
  {
    MutexLock l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

bool StallWatch::Begin(const char* op, const std::string& path, Token* token) {
  if (options_.stall_ns > 0 && backoff_->unreachable()) {
    {
      MutexLock l(mu_);
      refused_++;
    }
    backoff_->Record(RefusedStatus(op, path));
    return false;
  }
  const int64_t now = clock_();
  MutexLock l(mu_);
  *token = calls_.insert(calls_.end(), Entry{op, &path, now});
  return true;
}

bool StallWatch::ProbeDue() {
  if (options_.stall_ns <= 0 || !backoff_->unreachable()) return false;
  const int64_t now = clock_();
  MutexLock l(mu_);
  if (probing_ || now < next_probe_ns_) return false;
  probing_ = true;
  next_probe_ns_ = now + options_.probe_interval_ns;
  return true;
}

void StallWatch::BeginProbe(const char* op, const std::string& path, Token* token) {
  const int64_t now = clock_();
  MutexLock l(mu_);
  Entry e{op, &path, now};
  e.probe = true;
  *token = calls_.insert(calls_.end(), e);
}

void StallWatch::CancelProbe() {
  MutexLock l(mu_);
  probing_ = false;
}

void StallWatch::End(Token token, int code) {
  bool report;
  {
    MutexLock l(mu_);
    report = token->probe || token->stalled;
    if (token->probe) probing_ = false;
    if (token->stalled) {
      stalled_now_--;
      LOG_INFO("origin answered the {} after {} ms", Describe(token->op, *token->path),
               (clock_() - token->start_ns) / 1000000);
    }
    calls_.erase(token);
  }
  if (report && options_.stall_ns > 0) {
    backoff_->Record(code == 0 ? Status::OK() : Status::Error(code, "origin call failed"));
  }
}

Status StallWatch::RefusedStatus(const char* op, const std::string& path) {
  std::string stalled;
  {
    MutexLock l(mu_);
    stalled = last_stalled_;
  }
  return Status::Error(ETIMEDOUT, Describe(op, path) + ": the origin is not answering (" +
                                      (stalled.empty() ? std::string("a call stalled")
                                                       : "the " + stalled + " stalled") +
                                      "); not asked");
}

void StallWatch::Check() {
  if (options_.stall_ns <= 0) return;
  const int64_t now = clock_();
  std::string found;
  {
    MutexLock l(mu_);
    for (Entry& e : calls_) {
      if (e.stalled || now - e.start_ns < options_.stall_ns) continue;
      e.stalled = true;
      stalled_now_++;
      found = Describe(e.op, *e.path);
      last_stalled_ = found;
      if (!e.probe) next_probe_ns_ = now + options_.probe_interval_ns;  // a period on
    }
  }
  if (found.empty()) return;
  LOG_WARN("origin stalled: the {} has not returned in {} ms", found, options_.stall_ns / 1000000);
  backoff_->Record(Status::Error(ETIMEDOUT, "the " + found + " stalled"));
}

uint64_t StallWatch::stalled_now() const {
  MutexLock l(mu_);
  return stalled_now_;
}

uint64_t StallWatch::refused() const {
  MutexLock l(mu_);
  return refused_;
}

void StallWatch::Run() {
  const int64_t tick = options_.tick_ns > 0
                           ? options_.tick_ns
                           : std::clamp<int64_t>(options_.stall_ns / 4, 10'000'000, 1'000'000'000);
  MutexLock l(mu_);
  while (!stopping_) {
    cv_.WaitFor(mu_, std::chrono::nanoseconds(tick));
    if (stopping_) break;
    l.Unlock();
    Check();
    l.Lock();
  }
}

}  // namespace stoker
