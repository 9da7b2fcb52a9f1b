#include "cache/origin/remote/remote_entry.h"

#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "cache/origin/origin.h"
#include "util/checksum.h"
#include "util/path.h"

namespace stoker {

struct stat RemoteStat(const std::string& path, const RemoteEntry& e, int64_t dir_time) {
  struct stat st = {};
  uint64_t ino = ChunkChecksum(path.data(), path.size()) & ((uint64_t{1} << 62) - 1);
  st.st_ino = static_cast<ino_t>(ino == 0 ? 1 : ino);
  st.st_uid = ::getuid();
  st.st_gid = ::getgid();
  st.st_blksize = 4096;
  if (e.is_dir) {
    st.st_mode = S_IFDIR | 0555;
    st.st_nlink = 2;
    st.st_mtim.tv_sec = st.st_ctim.tv_sec = st.st_atim.tv_sec = dir_time;
    return st;
  }
  st.st_mode = S_IFREG | 0444;
  st.st_nlink = 1;
  st.st_size = static_cast<off_t>(e.size);
  st.st_blocks = static_cast<blkcnt_t>((e.size + 511) / 512);
  st.st_mtim.tv_sec = st.st_atim.tv_sec = st.st_ctim.tv_sec = e.mtime;
  if (!e.etag.empty()) {
    st.st_ctim.tv_nsec =
        static_cast<long>(ChunkChecksum(e.etag.data(), e.etag.size()) % 1000000000ull);
  }
  return st;
}

// A century stands for longer ones (kNeverSeconds included): the steady
// clock's nanoseconds hold it.
constexpr uint64_t kLongestTtl = 100ull * 365 * 24 * 3600;

ListingCache::ListingCache(uint64_t ttl_seconds, size_t max_dirs)
    : ttl_(static_cast<int64_t>(std::min(ttl_seconds, kLongestTtl))), max_dirs_(max_dirs) {}

ListingCache::Listing ListingCache::Get(const std::string& dir, bool stale) {
  MutexLock l(mu_);
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return nullptr;
  if (!stale && Clock::now() - it->second.at >= ttl_) return nullptr;
  return it->second.listing;
}

void ListingCache::DropUnder(const std::string& prefix) {
  MutexLock l(mu_);
  auto dropped = [&](const std::string& dir) {
    return IsAtOrUnder(dir, prefix) || (!prefix.empty() && dir == ParentOf(prefix));
  };
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    if (dropped(it->first)) {
      lru_.erase(it->second.lru);
      it = dirs_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(known_dirs_, [&](const auto& kv) { return IsAtOrUnder(kv.first, prefix); });
}

void ListingCache::NoteDir(const std::string& path) {
  MutexLock l(mu_);
  if (known_dirs_.size() >= max_dirs_ * 16) known_dirs_.clear();
  known_dirs_[path] = true;
}

Result<ListingCache::Listing> ListingCache::ListOrKept(
    const std::string& dir, OriginBackoff& backoff, const std::function<Result<Listing>()>& list) {
  Listing kept = Get(dir, /*stale=*/true);
  if (kept && backoff.AnswerFromHeld()) return kept;
  Result<Listing> listed = list();
  if (listed.ok() || !kept || !IsOriginUnavailable(listed.status().code())) return listed;
  return kept;
}

bool ListingCache::KnownDir(const std::string& path) {
  if (path.empty()) return true;
  {
    MutexLock l(mu_);
    if (known_dirs_.count(path)) return true;
  }
  Listing parent = Get(ParentOf(path), true);
  if (!parent) return false;
  const std::string name = BaseName(path);
  for (const RemoteEntry& e : *parent) {
    if (e.name == name) return e.is_dir;
  }
  return false;
}

void ListingCache::Put(const std::string& dir, Listing listing) {
  if (max_dirs_ == 0) return;
  MutexLock l(mu_);
  auto it = dirs_.find(dir);
  if (it != dirs_.end()) {
    lru_.erase(it->second.lru);
    dirs_.erase(it);
  }
  lru_.push_front(dir);
  dirs_.emplace(dir, Kept{std::move(listing), Clock::now(), lru_.begin()});
  while (dirs_.size() > max_dirs_) {
    dirs_.erase(lru_.back());
    lru_.pop_back();
  }
}

}  // namespace stoker
