// PoolGate (tests only): holds every thread of a DecodePool on a gated job
// at reader priority until Open(), so that a test can queue work, raise it
// and then see the order in which it runs.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "decode/jpeg/decode_pool.h"

namespace stoker {

class PoolGate {
 public:
  // Returns once all `threads` of pool are held.
  explicit PoolGate(DecodePool& pool, int threads = 1) {
    for (int i = 0; i < threads; ++i) {
      held_.emplace_back([this, &pool] {
        std::vector<DecodePool::Job> jobs;
        jobs.push_back([this] {
          std::unique_lock<std::mutex> l(mu_);
          ++blocking_;
          cv_.notify_all();
          cv_.wait(l, [this] { return open_; });
          return Status::OK();
        });
        (void)pool.RunAll(DecodePriority::kReader, std::move(jobs));
      });
    }
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return blocking_ == threads; });
  }
  ~PoolGate() { Open(); }
  PoolGate(const PoolGate&) = delete;
  PoolGate& operator=(const PoolGate&) = delete;

  // Lets the pool's threads go, and waits until the gated jobs are done.
  void Open() {
    {
      std::lock_guard<std::mutex> l(mu_);
      open_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : held_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int blocking_ = 0;   // GUARDED_BY(mu_)
  bool open_ = false;  // GUARDED_BY(mu_)
  std::vector<std::thread> held_;
};

// A thread that runs one job at priority p on pool, which records in *seen
// how many jobs were still queued when it ran: 0 means everything queued
// before it ran first.
inline std::thread QueueProbe(DecodePool& pool, DecodePriority p, std::optional<size_t>* seen) {
  return std::thread([&pool, p, seen] {
    std::vector<DecodePool::Job> jobs;
    jobs.push_back([&pool, seen] {
      *seen = pool.queued();
      return Status::OK();
    });
    (void)pool.RunAll(p, std::move(jobs));
  });
}

}  // namespace stoker
