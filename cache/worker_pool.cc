#include "cache/worker_pool.h"

namespace stoker {

WorkerPool::WorkerPool(int threads, size_t max_low_queued)
    : max_low_(max_low_queued < 1 ? 1 : max_low_queued) {
  if (threads < 1) threads = 1;
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkerPool::~WorkerPool() { Stop(); }

bool WorkerPool::Submit(Priority priority, std::function<void()> fn) {
  MutexLock l(mu_);
  if (priority == Priority::kLow) {
    space_cv_.Wait(mu_, [&]() REQUIRES(mu_) { return stop_ || low_.size() < max_low_; });
  }
  if (stop_) return false;
  (priority == Priority::kHigh ? high_ : low_).push_back(std::move(fn));
  work_cv_.notify_one();
  return true;
}

void WorkerPool::Stop() {
  {
    MutexLock l(mu_);
    if (stop_ && threads_.empty()) return;
    stop_ = true;
    high_.clear();
    low_.clear();
  }
  work_cv_.notify_all();
  space_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

size_t WorkerPool::queued() const {
  MutexLock l(mu_);
  return high_.size() + low_.size();
}

void WorkerPool::Run() {
  for (;;) {
    std::function<void()> fn;
    {
      MutexLock l(mu_);
      work_cv_.Wait(mu_, [&]() REQUIRES(mu_) { return stop_ || !high_.empty() || !low_.empty(); });
      if (stop_) return;
      if (!high_.empty()) {
        fn = std::move(high_.front());
        high_.pop_front();
      } else {
        fn = std::move(low_.front());
        low_.pop_front();
        space_cv_.notify_one();
      }
    }
    fn();
  }
}

}  // namespace stoker
