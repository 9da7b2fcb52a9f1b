// What remote origins (HTTP, S3) know of a path, turned into the struct stat
// the rest of stoker sees; and the in-memory listings they keep.
//
// Remote entries are read-only: files 0444, directories 0555, owned by the
// daemon's user. st_ino is a hash of the path (never 0, bit 62 clear: the
// decoded views set it), so a path keeps its node across changes. The
// identity (IdentityFromStat) of a file must change when the object does,
// and S3's says ETag + size + Last-Modified: st_size and st_mtim (whole
// seconds: listings and HEADs agree only on those) carry the last two, and
// st_ctim carries the ETag: Last-Modified's second plus a 30-bit hash of the
// ETag as nanoseconds. A directory (an S3 prefix, a listed folder) has the
// origin's creation time for its times.
//
// Thread-safety: the functions are pure; ListingCache is thread-safe.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/origin/origin_backoff.h"
#include "util/mutex.h"
#include "util/path.h"
#include "util/status.h"

namespace stoker {

struct RemoteEntry {
  std::string name;  // one path component
  bool is_dir = false;
  uint64_t size = 0;
  int64_t mtime = 0;  // seconds since the epoch
  std::string etag;   // as the server sent it (quotes included); may be ""
};

// path: origin-relative ("" = the root); dir_time: the directories' times.
struct stat RemoteStat(const std::string& path, const RemoteEntry& e, int64_t dir_time);

// Listings of directories, fresh for ttl_seconds (0: never; kNeverSeconds:
// always), at most
// max_dirs of them (the least recently stored goes first); and the paths
// seen to be directories. Stale listings and known directories answer while
// the server cannot be reached, so that paths to cached files still resolve.
class ListingCache {
 public:
  using Listing = std::shared_ptr<const std::vector<RemoteEntry>>;

  ListingCache(uint64_t ttl_seconds, size_t max_dirs);

  // The listing of dir if one younger than the TTL is kept (any age with
  // stale), else null.
  Listing Get(const std::string& dir, bool stale = false);
  void Put(const std::string& dir, Listing listing);
  // Forgets the listings of prefix, of every directory below it and of
  // prefix's parent ("" forgets them all), and which of those paths were
  // directories: asked of the server again.
  void DropUnder(const std::string& prefix);
  // Remembers that path is a directory (at most max_dirs * 16 paths).
  void NoteDir(const std::string& path);
  // Whether path was seen as a directory, or is one in a kept listing.
  bool KnownDir(const std::string& path);
  // The listing of dir for a ReadDir: a kept one (of any age) while backoff
  // says to answer from held data, else list()'s, or a kept one where list()
  // could not reach the server.
  Result<Listing> ListOrKept(const std::string& dir, OriginBackoff& backoff,
                             const std::function<Result<Listing>()>& list);

 private:
  using Clock = std::chrono::steady_clock;
  struct Kept {
    Listing listing;
    Clock::time_point at;
    std::list<std::string>::iterator lru;
  };
  const std::chrono::seconds ttl_;
  const size_t max_dirs_;
  Mutex mu_;
  std::unordered_map<std::string, Kept> dirs_ GUARDED_BY(mu_);
  std::list<std::string> lru_ GUARDED_BY(mu_);  // newest first
  std::unordered_map<std::string, bool> known_dirs_ GUARDED_BY(mu_);
};

}  // namespace stoker
