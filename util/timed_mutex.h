// TimedMutex: a mutex whose lock can wait with a time limit, built on
// std::mutex and std::condition_variable.
//
// std::timed_mutex would do, but libstdc++ implements try_lock_for with
// pthread_mutex_clocklock, which ThreadSanitizer (GCC 12) does not
// intercept: it then sees unlocks of mutexes it never saw locked and reports
// them. This one is made of primitives every sanitizer knows.
// Thread-safety: as std::timed_mutex. Meets TimedLockable, so
// std::unique_lock<TimedMutex> works with it. A capability for clang's
// thread-safety analysis (util/thread_annotations.h).
#pragma once

#include <chrono>

#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace stoker {

class CAPABILITY("mutex") TimedMutex {
 public:
  TimedMutex() = default;
  TimedMutex(const TimedMutex&) = delete;
  TimedMutex& operator=(const TimedMutex&) = delete;

  void lock() ACQUIRE() {
    MutexLock l(mu_);
    free_.Wait(mu_, [&]() REQUIRES(mu_) { return !held_; });
    held_ = true;
  }

  bool try_lock() TRY_ACQUIRE(true) {
    MutexLock l(mu_);
    if (held_) return false;
    held_ = true;
    return true;
  }

  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& limit) TRY_ACQUIRE(true) {
    MutexLock l(mu_);
    if (!free_.WaitFor(mu_, limit, [&]() REQUIRES(mu_) { return !held_; })) return false;
    held_ = true;
    return true;
  }

  void unlock() RELEASE() {
    {
      MutexLock l(mu_);
      held_ = false;
    }
    free_.notify_one();
  }

 private:
  Mutex mu_;
  CondVar free_;
  bool held_ GUARDED_BY(mu_) = false;
};

}  // namespace stoker
