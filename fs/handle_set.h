// HandleSet: the open file and directory handles a FUSE session gave the
// kernel (fi->fh is a handle's address), and their lifetime.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <type_traits>
#include <unordered_set>

#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

// What every handle carries for HandleSet: one reference for the kernel (the
// handle is open) and one for each request being served on it.
struct CountedHandle {
  std::atomic<int> refs{1};
};

// Handles given to the kernel and not yet released.
//
// The kernel sends a handle's RELEASE only once every request on it has been
// answered, so a request never outlives its handle. But that order is kept
// by the kernel, through /dev/fuse, where neither a reviewer nor TSan can see
// it: a request that touched the handle (its file state, its readahead) before
// replying and the RELEASE that frees it run on two threads with nothing
// between them in user space. So each request pins the handle (Use) and the
// handle is deleted by whichever comes last, Release or the last unpin: an
// atomic count makes the order explicit, and costs two atomic operations.
template <typename T>
class HandleSet {
 public:
  static_assert(std::is_base_of_v<CountedHandle, T>);

  T* Add(std::unique_ptr<T> h) {
    MutexLock lock(mu_);
    return *live_.insert(h.release()).first;
  }

  // A request's pin on a handle: h stays valid while the Use lives.
  class Use {
   public:
    // REQUIRES: h not released yet (the kernel sends no request on a handle
    // after its RELEASE).
    explicit Use(T* h) : h_(h) {
      const int before = h_->refs.fetch_add(1, std::memory_order_relaxed);
      STOKER_CHECK(before >= 1, "a request on a released handle");
    }
    ~Use() { Unref(h_); }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    T* operator->() const { return h_; }

   private:
    T* h_;
  };

  // The kernel is done with h: it goes when its last request does.
  void Release(T* h) {
    {
      MutexLock lock(mu_);
      STOKER_CHECK(live_.erase(h) == 1, "release of an unknown handle");
    }
    Unref(h);
  }
  size_t size() const {
    MutexLock lock(mu_);
    return live_.size();
  }
  // Frees every handle. REQUIRES: no request is being served.
  void Clear() {
    MutexLock lock(mu_);
    for (T* h : live_) delete h;
    live_.clear();
  }
  ~HandleSet() { Clear(); }

 private:
  static void Unref(T* h) {
    const int before = h->refs.fetch_sub(1, std::memory_order_acq_rel);
    STOKER_CHECK(before >= 1, "handle reference count below zero");
    if (before == 1) delete h;
  }

  mutable Mutex mu_;
  std::unordered_set<T*> live_ GUARDED_BY(mu_);
};

}  // namespace stoker
