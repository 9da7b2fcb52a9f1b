// Warmer: `stoker warm PATH...` in the daemon. A job's paths are checked
// and queued at once (all or none); one walker thread lists directories
// through the origin (a derived one through the DerivedSource, for a warm:
// what listing it makes, a view's layouts, queues behind readers' and
// prefetch's work) and hands each file it finds to the worker pool at low
// priority (queued behind readers and prefetch), where warm_file fetches it.
// A job's progress is a WarmJob, kept for the last max_jobs jobs. A file
// that warm_file could not put in the cache whole (no room: a warm evicts
// nothing) is a failure of its job, listed by name.
//
// Thread-safety: StartJob and JobStatus are thread-safe; Start, RequestStop
// and Join are the owner's.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_stats.h"
#include "cache/derived_source.h"
#include "cache/origin/origin.h"
#include "cache/warm_job.h"
#include "cache/worker_pool.h"
#include "util/mutex.h"

namespace stoker {

class Warmer {
 public:
  // Fetches one file found by a walk whole (on a pool thread) and returns
  // its size as fetched (a view's file is sized only then), or why it is
  // not in the cache whole; the warmer counts it in warm_files_done and
  // tells its job how it went.
  using WarmFile = std::function<Result<uint64_t>(const std::string& path)>;
  // origin, derived, counters outlive the warmer.
  Warmer(Origin* origin, DerivedSource* derived, CacheCounters* counters, size_t max_jobs,
         WarmFile warm_file);
  // RequestStop and Join.
  ~Warmer();
  Warmer(const Warmer&) = delete;
  Warmer& operator=(const Warmer&) = delete;

  // Starts the walker; files go to pool (which outlives the walker).
  void Start(WorkerPool* pool);
  // The walker stops at its next directory. A walker blocked on a full pool
  // queue goes on once the pool stops: stop the pool between the two.
  void RequestStop();
  void Join();

  // Queues a job over paths (files or directories); EINVAL/ENOENT/... if
  // one of them is neither or cannot be stat'ed (nothing queued). Returns
  // the job's id (from 1).
  Result<uint64_t> StartJob(const std::vector<std::string>& paths);
  // Job id's progress (WarmJob::Json), null if not kept; id 0: every job
  // kept, oldest first.
  nlohmann::json JobStatus(uint64_t id);

 private:
  // A path to walk: whether StartJob already counted it in
  // warm_files_queued, and the job it is part of.
  struct Entry {
    std::string path;
    bool counted = false;
    std::shared_ptr<WarmJob> job;
  };
  void Loop();
  // Walks one root, handing its files to the pool.
  void Walk(Entry entry);
  // A file the walk queued, on a pool thread: warm_file_, then the count
  // and the job's account (listed, sized: as the walk found it).
  void WarmOne(const std::string& path, uint64_t listed, bool sized,
               const std::shared_ptr<WarmJob>& job);
  bool Stopping();
  // Stat and ReadDir for a warm.
  Result<struct stat> StatForWarm(const std::string& path);
  Status ReadDirForWarm(const std::string& dir,
                        const std::function<bool(const OriginDirEntry&)>& fn);

  Origin* const origin_;
  DerivedSource* const derived_;
  CacheCounters* const counters_;
  const size_t max_jobs_;
  const WarmFile warm_file_;
  WorkerPool* pool_ = nullptr;  // set by Start
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::deque<Entry> queue_ GUARDED_BY(mu_);
  std::deque<std::shared_ptr<WarmJob>> jobs_ GUARDED_BY(mu_);  // oldest first
  uint64_t next_job_ GUARDED_BY(mu_) = 1;
  std::thread thread_;
};

}  // namespace stoker
