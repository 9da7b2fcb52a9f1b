// What the file system under a cache directory does to the cache's promises:
// a bound (CacheOptions::capacity_bytes) that the disk can hold, and a cache
// that survives a reboot. A mount warns where one does not hold; it still
// mounts.
//
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace stoker {

struct CacheDirFs {
  std::string dir;          // as given
  uint64_t free_bytes = 0;  // what its file system gives this user now (statvfs f_bavail)
  std::string memory_fs;    // "tmpfs" or "ramfs" where it lives in memory, else ""
};

// Probes the file system of dir, or of the deepest directory above it that
// exists (dir may not be made yet). Reads only.
Result<CacheDirFs> ProbeCacheDirFs(const std::string& dir);

// One line for each promise that fs cannot keep for a cache of capacity
// bytes that holds held bytes now (they count as room: the cache may reuse
// them); empty where both hold.
std::vector<std::string> CacheDirWarnings(const CacheDirFs& fs, uint64_t capacity, uint64_t held);

}  // namespace stoker
