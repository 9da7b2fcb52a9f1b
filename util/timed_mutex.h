// TimedMutex: a mutex whose lock can wait with a time limit, built on
// std::mutex and std::condition_variable.
//
// std::timed_mutex would do, but libstdc++ implements try_lock_for with
// pthread_mutex_clocklock, which ThreadSanitizer (GCC 12) does not
// intercept: it then sees unlocks of mutexes it never saw locked and reports
// them. This one is made of primitives every sanitizer knows.
// Thread-safety: as std::timed_mutex. Meets TimedLockable, so
// std::unique_lock<TimedMutex> works with it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace stoker {

class TimedMutex {
 public:
  TimedMutex() = default;
  TimedMutex(const TimedMutex&) = delete;
  TimedMutex& operator=(const TimedMutex&) = delete;

  void lock() {
    std::unique_lock<std::mutex> l(mu_);
    free_.wait(l, [&] { return !held_; });
    held_ = true;
  }

  bool try_lock() {
    std::lock_guard<std::mutex> l(mu_);
    if (held_) return false;
    held_ = true;
    return true;
  }

  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& limit) {
    std::unique_lock<std::mutex> l(mu_);
    if (!free_.wait_for(l, limit, [&] { return !held_; })) return false;
    held_ = true;
    return true;
  }

  void unlock() {
    {
      std::lock_guard<std::mutex> l(mu_);
      held_ = false;
    }
    free_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable free_;
  bool held_ = false;
};

}  // namespace stoker
