// DecodePool: the threads that turn raw records into decoded view bytes.
// Work comes in batches (the records one read of a view file covers); each
// batch has a priority, and a queued job of a higher priority always runs
// before one of a lower: a reader waiting on a range first, then readahead
// just past where a view file is being read, then background warm work.
//
// Jobs are pure CPU work on bytes their caller already read (they must not
// call into the cache or wait on anything), so a pool thread never blocks
// and a batch always finishes. The JPEG decoder a job uses is the pool's
// (decoder()): the seam where a GPU backend (nvJPEG) replaces the CPU one.
// Its output goes into buffers() (output_buffers.h), reused across jobs.
//
// A batch keeps the priority it was queued at unless it is raised: a
// reader that finds the bytes it wants being made by another's batch (a
// prefetch's, a warm's) raises that batch to its own priority (Raise), so
// that it does not wait behind all the other readahead or warm work.
//
// Stop (or the destructor) fails what is still queued with ECANCELED and
// joins the threads; running jobs finish first.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "decode/jpeg/jpeg_decoder.h"
#include "decode/jpeg/output_buffers.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

enum class DecodePriority { kReader = 0, kReadahead = 1, kWarm = 2 };
inline constexpr int kDecodePriorities = 3;

struct DecodePoolOptions {
  // Worker threads. Default: 0 = the number of cores. Not persistent.
  int threads = 0;
  // Bytes of output buffers kept free for the next productions
  // (output_buffers.h). Default: 128 MiB. Not persistent.
  size_t max_free_output_bytes = OutputBuffers::kDefaultMaxFreeBytes;
};

class DecodePool {
 public:
  using Job = std::function<Status()>;
  // A batch of jobs, made before it is queued, so that another thread can
  // raise it (Raise) while it waits or is about to be run. Opaque.
  struct Batch;
  // REQUIRES: decoder != nullptr.
  DecodePool(std::shared_ptr<JpegDecoder> decoder, const DecodePoolOptions& options = {});
  ~DecodePool();
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;

  JpegDecoder& decoder() { return *decoder_; }
  // What jobs produce into: reused, not freshly faulted in.
  OutputBuffers& buffers() { return buffers_; }
  int threads() const { return static_cast<int>(threads_.size()); }

  // Runs every job at priority and waits for all of them; returns their
  // statuses in order (ECANCELED for those dropped by Stop).
  std::vector<Status> RunAll(DecodePriority priority, std::vector<Job> jobs);
  // A batch for RunAll below; it may be run more than once, one RunAll at a
  // time, and a raise carries over to its later runs. It belongs to the
  // first pool that runs or raises it: REQUIRES: no other pool does.
  static std::shared_ptr<Batch> NewBatch();
  // As above, as batch: at priority, or at what batch was raised to if
  // that is higher.
  // REQUIRES: batch != nullptr and no other RunAll of it is running.
  std::vector<Status> RunAll(const std::shared_ptr<Batch>& batch, DecodePriority priority,
                             std::vector<Job> jobs);
  // Moves batch's jobs that are still queued up to priority to, behind the
  // jobs queued there already; never down. A batch not queued yet is queued
  // at to when it is run. Jobs running or done are as they were.
  void Raise(Batch& batch, DecodePriority to);

  void Stop();
  // Gauges for stats: jobs waiting, and jobs running now.
  size_t queued() const;
  size_t running() const { return running_.load(); }
  // Jobs queued above the priority their batch was run at, by Raise
  // (counter, for stats).
  uint64_t jobs_raised() const { return jobs_raised_.load(); }
  // Jobs finished per second over the last kRateWindowSeconds.
  static constexpr int kRateWindowSeconds = 10;
  double RecentJobsPerSecond() const;

 private:
  struct Task {
    std::shared_ptr<Batch> batch;
    size_t index = 0;
  };
  void Run();

  const std::shared_ptr<JpegDecoder> decoder_;
  OutputBuffers buffers_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Task> queues_[kDecodePriorities] GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  // Finish times (steady clock, ns) of the jobs of the last window.
  mutable std::deque<int64_t> finished_ GUARDED_BY(mu_);
  std::atomic<size_t> running_{0};
  std::atomic<uint64_t> jobs_raised_{0};
  std::vector<std::thread> threads_;
};

}  // namespace stoker
