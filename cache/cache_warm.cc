// The cache's side of warming: a file the Warmer found, fetched whole if it
// fits below the high watermark; a sampler's order, checked and handed to
// the OrderPrefetcher.
#include "cache/object_cache_impl.h"
#include "util/size.h"

namespace stoker {

Status ObjectCacheImpl::Warm(const std::string& path) { return StartWarm({path}).status(); }

Result<uint64_t> ObjectCacheImpl::StartWarm(const std::vector<std::string>& paths) {
  return warmer_.StartJob(paths);
}

nlohmann::json ObjectCacheImpl::WarmStatus(uint64_t id) { return warmer_.JobStatus(id); }

bool ObjectCacheImpl::ClaimWarmRoom(uint64_t n) {
  const auto high = static_cast<uint64_t>(static_cast<long double>(quota_.limit()) *
                                          static_cast<long double>(options_.high_watermark));
  uint64_t claimed = warm_claimed_.load();
  do {
    if (quota_.used() + claimed + n > high) return false;
  } while (!warm_claimed_.compare_exchange_weak(claimed, claimed + n));
  return true;
}

Result<uint64_t> ObjectCacheImpl::WarmFile(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(Opened opened, opener_.Open(path, false, Opener::kWarm));
  const ObjectVersion& v = *opened.file->version;
  const uint64_t size = v.identity.size;
  auto missing_chunks = [&] {
    std::vector<uint64_t> missing;
    for (uint64_t i = 0; i < v.chunks; ++i) {
      if (!reader_.IsCached(ChunkKey{v.key.object_id, v.key.version, i})) missing.push_back(i);
    }
    return missing;
  };
  uint64_t need = 0;
  for (uint64_t i : missing_chunks()) need += AllocatedBytes(ChunkLength(size, chunk_size_, i));
  // Above the high watermark the evictor takes the newest fresh chunks
  // first (eviction.h): the ones this warm just wrote. So a warm keeps
  // files only while they fit below it, evicts nothing, and says which it
  // could not keep; the claim stops warm files filled together from
  // overrunning the watermark between them. Their claims count what they
  // wrote as well until they end, so near the bound a file may be refused
  // that would have fitted; it is listed, never evicted later.
  if (need > 0 && !ClaimWarmRoom(need)) {
    const uint64_t claimed = warm_claimed_.load();
    return Status::NoSpace("not kept: its " + FormatSize(need) + " do not fit; the cache holds " +
                           FormatSize(quota_.used()) + " of its " + FormatSize(quota_.limit()) +
                           " bound" +
                           (claimed > 0 ? " (" + FormatSize(claimed) + " more being warmed)" : "") +
                           ", and a warm evicts nothing to make room");
  }
  Fill fill;
  fill.urgency = Urgency::kWarm;
  FetchTally tally;
  Status s = prefetcher_.FillFile(*opened.file, fill, &tally);
  warm_claimed_ -= need;
  counters_.warm_bytes += tally.bytes;
  STOKER_RETURN_IF_ERROR(s);
  // A chunk the cache refused (its disk low, its index unable to record
  // the file) was served and dropped.
  if (const size_t left = missing_chunks().size(); left > 0) {
    return Status::NoSpace("not kept: " + std::to_string(left) + " of its " +
                           std::to_string(v.chunks) + " chunks could not be cached");
  }
  return size;
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
