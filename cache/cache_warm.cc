// The cache's side of warming: a file the Warmer found, fetched whole; a
// sampler's order, checked and handed to the OrderPrefetcher.
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

Result<uint64_t> ObjectCacheImpl::SetOrder(const std::vector<std::string>& paths) {
  if (options_.order_ahead_files == 0) {
    return Status::Error(ENOTSUP, "prefetch in order is off (--order-ahead 0)");
  }
  // The first files tell a list made for another root or mount at once,
  // without a round trip to the origin per file of a large order.
  for (size_t i = 0; i < paths.size() && i < kOrderPathsChecked; ++i) {
    Result<struct stat> st = origin_->Stat(paths[i]);
    if (!st.ok())
      return Status::Error(st.status().code(), "'" + paths[i] + "': " + st.status().message());
    if (!S_ISREG(st->st_mode)) return Status::Invalid("'" + paths[i] + "' is not a regular file");
  }
  return order_.Set(paths);
}

Status ObjectCacheImpl::AppendOrder(uint64_t id, const std::vector<std::string>& paths) {
  return order_.Append(id, paths);
}

void ObjectCacheImpl::ClearOrder() { order_.Clear(); }

}  // namespace stoker
