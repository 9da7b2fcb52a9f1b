// The cache's side of warming: a file the Warmer found, fetched whole.
#include "cache/object_cache_impl.h"

namespace stoker {

Status ObjectCacheImpl::Warm(const std::string& path) { return StartWarm({path}).status(); }

Result<uint64_t> ObjectCacheImpl::StartWarm(const std::vector<std::string>& paths) {
  return warmer_.StartJob(paths);
}

nlohmann::json ObjectCacheImpl::WarmStatus(uint64_t id) { return warmer_.JobStatus(id); }

Status ObjectCacheImpl::WarmFile(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(Opened opened, opener_.Open(path, false, Opener::kWarm));
  Fill fill;
  fill.urgency = Urgency::kWarm;
  FetchTally tally;
  Status s = prefetcher_.FillFile(*opened.file, fill, &tally);
  counters_.warm_bytes += tally.bytes;
  return s;
}

}  // namespace stoker
