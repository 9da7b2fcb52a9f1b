#include "cache/cache_dir_fs.h"

#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <filesystem>

#include "util/size.h"

namespace stoker {

Result<CacheDirFs> ProbeCacheDirFs(const std::string& dir) {
  std::filesystem::path where = std::filesystem::absolute(dir).lexically_normal();
  struct statfs sfs;
  while (::statfs(where.c_str(), &sfs) != 0) {
    if (errno != ENOENT || where == where.root_path()) {
      return Status::FromErrno("cache dir '" + dir + "'");
    }
    where = where.parent_path();
  }
  struct statvfs vfs;
  if (::statvfs(where.c_str(), &vfs) != 0) return Status::FromErrno("cache dir '" + dir + "'");
  CacheDirFs fs;
  fs.dir = dir;
  fs.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (sfs.f_type == TMPFS_MAGIC) fs.memory_fs = "tmpfs";
  if (sfs.f_type == RAMFS_MAGIC) fs.memory_fs = "ramfs";
  return fs;
}

std::vector<std::string> CacheDirWarnings(const CacheDirFs& fs, uint64_t capacity, uint64_t held) {
  std::vector<std::string> out;
  if (capacity > fs.free_bytes + held) {
    out.push_back("--cache-size " + FormatSize(capacity) + " is more than cache dir '" + fs.dir +
                  "' can take (" + FormatSize(fs.free_bytes) + " free, " + FormatSize(held) +
                  " cached): the free space bounds the cache, not --cache-size");
  }
  if (!fs.memory_fs.empty()) {
    out.push_back("cache dir '" + fs.dir + "' is on " + fs.memory_fs +
                  " (memory): the cache does not survive a reboot, and it takes memory");
  }
  return out;
}

}  // namespace stoker
