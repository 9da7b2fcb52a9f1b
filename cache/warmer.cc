#include "cache/warmer.h"

#include <sys/stat.h>

#include <utility>

#include "util/log.h"
#include "util/path.h"

namespace stoker {

Warmer::Warmer(Origin* origin, DerivedSource* derived, CacheCounters* counters, size_t max_jobs,
               WarmFile warm_file)
    : origin_(origin),
      derived_(derived),
      counters_(counters),
      max_jobs_(max_jobs),
      warm_file_(std::move(warm_file)) {}

Result<struct stat> Warmer::StatForWarm(const std::string& path) {
  if (derived_->IsDerived(path)) return derived_->StatFor(path, Urgency::kWarm);
  return origin_->Stat(path);
}

Status Warmer::ReadDirForWarm(const std::string& dir,
                              const std::function<bool(const OriginDirEntry&)>& fn) {
  if (derived_->IsDerived(dir)) return derived_->ReadDirFor(dir, Urgency::kWarm, fn);
  return origin_->ReadDir(dir, fn);
}

Warmer::~Warmer() {
  RequestStop();
  Join();
}

void Warmer::Start(WorkerPool* pool) {
  pool_ = pool;
  thread_ = std::thread([this] { Loop(); });
}

void Warmer::RequestStop() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void Warmer::Join() {
  if (thread_.joinable()) thread_.join();
}

bool Warmer::Stopping() {
  MutexLock l(mu_);
  return stop_;
}

Result<uint64_t> Warmer::StartJob(const std::vector<std::string>& paths) {
  if (paths.empty()) return Status::Invalid("nothing to warm");
  // Each path checked before any is queued: a job is all of them or none.
  std::vector<bool> files;
  for (const std::string& path : paths) {
    auto st = origin_->Stat(path);
    if (!st.ok()) return st.status();
    if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
      return Status::Invalid("cannot warm '" + path + "': not a file or directory");
    }
    files.push_back(S_ISREG(st->st_mode));
  }
  uint64_t id = 0;
  {
    MutexLock l(mu_);
    id = next_job_++;
    auto job = std::make_shared<WarmJob>(id, paths);
    jobs_.push_back(job);
    if (jobs_.size() > max_jobs_) jobs_.pop_front();
    for (size_t i = 0; i < paths.size(); ++i) {
      // A file counts as queued now, so stat shows it at once; a
      // directory's files count as the walk finds them.
      if (files[i]) counters_->warm_files_queued++;
      queue_.push_back({paths[i], files[i], job});
    }
  }
  cv_.notify_one();
  return id;
}

nlohmann::json Warmer::JobStatus(uint64_t id) {
  MutexLock l(mu_);
  if (id == 0) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& job : jobs_) all.push_back(job->Json());
    return all;
  }
  for (const auto& job : jobs_) {
    if (job->id() == id) return job->Json();
  }
  return nullptr;
}

void Warmer::Loop() {
  for (;;) {
    Entry entry;
    {
      MutexLock l(mu_);
      cv_.Wait(mu_, [&]() REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (stop_) return;
      entry = std::move(queue_.front());
      queue_.pop_front();
    }
    Walk(std::move(entry));
  }
}

void Warmer::WarmOne(const std::string& path, uint64_t listed, bool sized,
                     const std::shared_ptr<WarmJob>& job) {
  Result<uint64_t> size = warm_file_(path);
  counters_->warm_files_done++;
  if (size.ok()) {
    job->Done(listed, sized, *size);
    return;
  }
  LOG_WARN("warm '{}': {}", path, size.status().message());
  job->Failed(path, size.status().message(), sized);
}

void Warmer::Walk(Entry entry) {
  const std::shared_ptr<WarmJob>& job = entry.job;
  bool counted = entry.counted;
  auto queue_file = [&](const std::string& p, uint64_t size, bool sized) {
    if (!counted) counters_->warm_files_queued++;
    counted = false;
    job->Found(size, sized);
    if (!pool_->Submit(WorkerPool::Priority::kLow,
                       [this, p, size, sized, job] { WarmOne(p, size, sized, job); })) {
      counters_->warm_files_queued--;
      job->Failed(p, "the daemon is stopping", sized);
    }
  };
  const std::string& root = entry.path;
  auto st = StatForWarm(root);
  if (!st.ok()) {
    LOG_WARN("warm '{}': {}", root, st.status().message());
    if (counted) counters_->warm_files_done++;
    job->Found(0);
    job->Failed(root, st.status().message());
    job->RootWalked();
    return;
  }
  if (S_ISREG(st->st_mode)) {
    queue_file(root, static_cast<uint64_t>(st->st_size), true);
    job->RootWalked();
    return;
  }
  if (counted) {
    counters_->warm_files_done++;  // it was a file when queued; it is not one now
    counted = false;
  }
  std::vector<std::string> dirs{root};
  while (!dirs.empty()) {
    if (Stopping()) return;
    std::string dir = std::move(dirs.back());
    dirs.pop_back();
    struct Listed {
      std::string path;
      uint64_t size;
      bool sized;  // a view lists a file it has not laid out yet without its size
    };
    std::vector<Listed> files;
    Status s = ReadDirForWarm(dir, [&](const OriginDirEntry& e) {
      if (S_ISDIR(e.st.st_mode)) dirs.push_back(JoinPath(dir, e.name));
      if (S_ISREG(e.st.st_mode)) {
        files.push_back(
            {JoinPath(dir, e.name), static_cast<uint64_t>(e.st.st_size), e.attrs_complete});
      }
      return true;
    });
    if (!s.ok()) {
      LOG_WARN("warm: {}", s.message());
      job->Found(0);
      job->Failed(dir, s.message());
    }
    for (const Listed& f : files) queue_file(f.path, f.size, f.sized);
  }
  job->RootWalked();
}

}  // namespace stoker
