#include "cache/warm_job.h"

namespace stoker {

void WarmJob::Failed(const std::string& path, const std::string& why, bool sized) {
  if (!sized) unsized_--;
  {
    MutexLock l(mu_);
    if (failed_.size() < kMaxFailuresKept) failed_.emplace_back(path, why);
  }
  failures_++;
}

nlohmann::json WarmJob::Json() const {
  nlohmann::json failed = nlohmann::json::array();
  {
    MutexLock l(mu_);
    for (const auto& [path, why] : failed_) failed.push_back({{"path", path}, {"error", why}});
  }
  return {{"job", id_},
          {"paths", paths_},
          {"files_found", files_found_.load()},
          {"files_done", files_done_.load()},
          {"bytes_found", bytes_found_.load()},
          {"bytes_done", bytes_done_.load()},
          {"unsized", unsized_.load()},
          {"failures", failures_.load()},
          {"failed", failed},
          {"walked", roots_left_.load() == 0},
          {"finished", finished()},
          {"seconds",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()}};
}

}  // namespace stoker
