// The cache's side of warming: a file the Warmer found, fetched whole.
#include <algorithm>

#include "cache/object_cache_impl.h"
#include "util/log.h"

namespace stoker {

Status ObjectCacheImpl::Warm(const std::string& path) { return StartWarm({path}).status(); }

Result<uint64_t> ObjectCacheImpl::StartWarm(const std::vector<std::string>& paths) {
  return warmer_.StartJob(paths);
}

nlohmann::json ObjectCacheImpl::WarmStatus(uint64_t id) { return warmer_.JobStatus(id); }

void ObjectCacheImpl::WarmFile(const std::string& path, uint64_t size,
                               const std::shared_ptr<WarmJob>& job) {
  auto opened = opener_.Open(path, false, Opener::kWarm);
  if (!opened.ok()) {
    LOG_WARN("warm '{}': {}", path, opened.status().message());
    counters_.warm_files_done++;
    job->Failed(path, opened.status().message());
    return;
  }
  const auto& file = opened->file;
  const uint64_t step = std::max<uint64_t>(1, (8ull << 20) / chunk_size_);
  Status failed;
  for (uint64_t first = 0; first < file->version->chunks; first += step) {
    FetchTally tally;
    Fill fill;
    fill.urgency = Urgency::kWarm;
    Status s = prefetcher_.FillRange(file->version, *file->origin, first, first + step, &tally,
                                     nullptr, fill);
    counters_.warm_bytes += tally.bytes;
    if (!s.ok()) {
      LOG_WARN("warm '{}': {}", path, s.message());
      failed = s;
      break;
    }
  }
  counters_.warm_files_done++;
  if (failed.ok()) {
    job->Done(size);
  } else {
    job->Failed(path, failed.message());
  }
}

}  // namespace stoker
