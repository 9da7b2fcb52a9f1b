#include "decode/jpeg/decode_pool.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <new>

#include "util/clock.h"

namespace stoker {
namespace {

constexpr int64_t kWindowNs = int64_t{DecodePool::kRateWindowSeconds} * 1000000000;

}  // namespace

struct DecodePool::Batch {
  std::vector<Job> jobs;
  std::vector<Status> results;
  Mutex mu;
  CondVar cv;
  size_t left GUARDED_BY(mu) = 0;
  // The highest priority it was raised to, and where its jobs are queued
  // now (-1: none queued). GUARDED_BY(the pool's mu_).
  int raised_to = kDecodePriorities;
  int queued_at = -1;

  void Finish(size_t i, Status s) {
    MutexLock l(mu);
    results[i] = std::move(s);
    if (--left == 0) cv.notify_all();
  }
};

DecodePool::DecodePool(std::shared_ptr<JpegDecoder> decoder, const DecodePoolOptions& options)
    : decoder_(std::move(decoder)), buffers_(options.max_free_output_bytes) {
  STOKER_CHECK(decoder_ != nullptr, "a decode pool needs a decoder");
  int n = options.threads;
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Run(); });
}

DecodePool::~DecodePool() { Stop(); }

std::shared_ptr<DecodePool::Batch> DecodePool::NewBatch() { return std::make_shared<Batch>(); }

std::vector<Status> DecodePool::RunAll(DecodePriority priority, std::vector<Job> jobs) {
  return RunAll(NewBatch(), priority, std::move(jobs));
}

std::vector<Status> DecodePool::RunAll(const std::shared_ptr<Batch>& batch, DecodePriority priority,
                                       std::vector<Job> jobs) {
  STOKER_CHECK(batch != nullptr, "RunAll of a null decode batch");
  if (jobs.empty()) return {};
  {
    MutexLock l(batch->mu);
    batch->results.assign(jobs.size(), Status::OK());
    batch->left = jobs.size();
    batch->jobs = std::move(jobs);
  }
  {
    MutexLock l(mu_);
    if (stop_) {
      return std::vector<Status>(batch->jobs.size(),
                                 Status::Error(ECANCELED, "decode pool stopped"));
    }
    const int at = std::min(static_cast<int>(priority), batch->raised_to);
    if (at < static_cast<int>(priority)) jobs_raised_ += batch->jobs.size();
    batch->queued_at = at;
    auto& q = queues_[at];
    for (size_t i = 0; i < batch->jobs.size(); ++i) q.push_back(Task{batch, i});
  }
  cv_.notify_all();
  std::vector<Status> results;
  {
    MutexLock l(batch->mu);
    batch->cv.Wait(batch->mu, [&]() REQUIRES(batch->mu) { return batch->left == 0; });
    results = std::move(batch->results);
  }
  MutexLock l(mu_);
  batch->queued_at = -1;  // every job was taken off its queue
  return results;
}

void DecodePool::Raise(Batch& batch, DecodePriority to) {
  const int target = static_cast<int>(to);
  {
    MutexLock l(mu_);
    if (batch.raised_to <= target) return;
    batch.raised_to = target;
    if (batch.queued_at <= target) return;  // none queued, or queued as high already
    auto& from = queues_[batch.queued_at];
    auto& into = queues_[target];
    size_t moved = 0;
    for (auto it = from.begin(); it != from.end();) {
      if (it->batch.get() != &batch) {
        ++it;
        continue;
      }
      into.push_back(std::move(*it));
      it = from.erase(it);
      ++moved;
    }
    batch.queued_at = target;
    jobs_raised_ += moved;
  }
}

void DecodePool::Stop() {
  std::vector<Task> dropped;
  {
    MutexLock l(mu_);
    if (stop_ && threads_.empty()) return;
    stop_ = true;
    for (auto& q : queues_) {
      for (Task& t : q) dropped.push_back(std::move(t));
      q.clear();
    }
  }
  cv_.notify_all();
  for (Task& t : dropped) t.batch->Finish(t.index, Status::Error(ECANCELED, "decode pool stopped"));
  for (auto& t : threads_) t.join();
  threads_.clear();
}

size_t DecodePool::queued() const {
  MutexLock l(mu_);
  size_t n = 0;
  for (const auto& q : queues_) n += q.size();
  return n;
}

double DecodePool::RecentJobsPerSecond() const {
  MutexLock l(mu_);
  const int64_t now = MonotonicNs();
  while (!finished_.empty() && finished_.front() < now - kWindowNs) finished_.pop_front();
  return static_cast<double>(finished_.size()) / kRateWindowSeconds;
}

void DecodePool::Run() {
  pthread_setname_np(pthread_self(), "stoker-decode");  // for top -H, perf and /proc
  for (;;) {
    Task task;
    {
      MutexLock l(mu_);
      cv_.Wait(mu_, [&]() REQUIRES(mu_) {
        if (stop_) return true;
        for (const auto& q : queues_) {
          if (!q.empty()) return true;
        }
        return false;
      });
      if (stop_) return;
      for (auto& q : queues_) {
        if (q.empty()) continue;
        task = std::move(q.front());
        q.pop_front();
        break;
      }
      running_++;
    }
    Status s;
    try {
      s = task.batch->jobs[task.index]();
    } catch (const std::bad_alloc&) {
      s = Status::Error(ENOMEM, "out of memory decoding a view record");
    }
    running_--;
    {
      MutexLock l(mu_);
      const int64_t now = MonotonicNs();
      finished_.push_back(now);
      while (!finished_.empty() && finished_.front() < now - kWindowNs) finished_.pop_front();
    }
    task.batch->Finish(task.index, std::move(s));
  }
}

}  // namespace stoker
