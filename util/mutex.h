// stoker::Mutex, MutexLock and CondVar: std::mutex, std::lock_guard (or a
// std::unique_lock that unlocks early) and std::condition_variable, annotated
// for clang's thread-safety analysis (util/thread_annotations.h), so that
// GUARDED_BY members, REQUIRES functions and the locks taken are checked at
// compile time (DEVELOPERS.md: STOKER_THREAD_SAFETY). Under GCC they compile
// to exactly the std:: types they wrap. The shape follows LevelDB's
// port::Mutex and MutexLock.
//
// Thread-safety: as the std:: types they wrap.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "util/thread_annotations.h"

namespace stoker {

class CondVar;

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds it (where it cannot see so); no run-time check.
  void AssertHeld() ASSERT_CAPABILITY(this) {}

  // The Lockable spellings, for std::unique_lock and std::scoped_lock (which the
  // analysis does not follow: prefer MutexLock).
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction, as std::lock_guard; Unlock()
// and Lock() release and retake it early, as std::unique_lock's.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    held_ = false;
    mu_.Unlock();
  }
  void Lock() ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable over a Mutex: std::condition_variable on the mutex
// inside (no std::condition_variable_any and its second mutex). Each wait is
// called with the mutex held and returns with it held. A predicate that reads
// guarded members says so: [&]() REQUIRES(mu_) { return done_; }.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex& mu) REQUIRES(mu) {
    Lent l(mu);
    cv_.wait(l.lock);
  }
  // The analysis cannot tie the predicate's REQUIRES(mu_) to the parameter mu:
  // NO_THREAD_SAFETY_ANALYSIS here and in WaitFor below (the caller holds mu, checked).
  template <class Predicate>
  void Wait(Mutex& mu, Predicate ready) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    while (!ready()) Wait(mu);
  }
  // False when the time ran out (as std::cv_status::timeout).
  template <class Rep, class Period>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& limit) REQUIRES(mu) {
    Lent l(mu);
    return cv_.wait_for(l.lock, limit) == std::cv_status::no_timeout;
  }
  // ready() when it returns, as std::condition_variable::wait_for with a predicate.
  template <class Rep, class Period, class Predicate>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& limit, Predicate ready)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    Lent l(mu);
    return cv_.wait_for(l.lock, limit, ready);
  }

  // The std:: spellings, as the condition_variables it replaced.
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  // Lends mu's std::mutex, held, to a std::unique_lock for one wait, and takes
  // it back still held (also when a predicate throws): the caller's MutexLock
  // releases it.
  struct Lent {
    explicit Lent(Mutex& mu) : lock(mu.mu_, std::adopt_lock) {}
    ~Lent() { lock.release(); }
    Lent(const Lent&) = delete;
    Lent& operator=(const Lent&) = delete;
    std::unique_lock<std::mutex> lock;
  };

  std::condition_variable cv_;
};

}  // namespace stoker
