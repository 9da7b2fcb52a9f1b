// WorkerPool: the threads that fetch from the origin for prefetch and warm.
// Two queues: high (prefetch for a reader that is waiting to go on) is always
// served before low (warm). Low is bounded: Submit blocks while it is full,
// which keeps a warm walk of a huge tree from queueing it all in memory.
//
// Stop (or the destructor) drops what is still queued and joins the threads;
// tasks running finish first.
//
// Thread-safety: all methods are thread-safe; tasks run on pool threads.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace stoker {

class WorkerPool {
 public:
  enum class Priority { kHigh, kLow };
  WorkerPool(int threads, size_t max_low_queued);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False (and fn not run) once stopping.
  bool Submit(Priority priority, std::function<void()> fn);
  void Stop();
  size_t queued() const;

 private:
  void Run();

  const size_t max_low_;
  mutable Mutex mu_;
  CondVar work_cv_;
  CondVar space_cv_;
  std::deque<std::function<void()>> high_ GUARDED_BY(mu_);
  std::deque<std::function<void()>> low_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace stoker
