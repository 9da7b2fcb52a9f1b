#include "fs/mountpoint.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "fs/kernel_mounts.h"
#include "util/files.h"
#include "util/log.h"

namespace stoker {

namespace {

Status Fail(const std::string& mp, int code, const std::string& why) {
  return Status::Error(code, "mountpoint '" + mp + "' " + why);
}

Status ClearStaleMount(const std::string& mp) {
  LOG_WARN("mountpoint '{}' holds a stale FUSE mount (its daemon is gone); detaching it", mp);
  if (DetachMount(mp)) return Status::OK();
  return Fail(mp, ENOTCONN, "holds a stale FUSE mount that could not be detached");
}

// Lexically normalized absolute form of p, resolving what exists of it.
std::filesystem::path Absolute(const std::string& p) {
  std::error_code ec;
  std::filesystem::path out = std::filesystem::weakly_canonical(std::filesystem::absolute(p), ec);
  return ec ? std::filesystem::absolute(p).lexically_normal() : out;
}

bool IsWithin(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  auto o = outer.begin();
  auto i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace

namespace {

// Checks mountpoint as it is now. ENOTCONN (with that code) from any step
// means a stale FUSE mount: stat alone may still succeed from the kernel's
// attribute cache of the dead mount, opendir never does.
Result<std::string> CheckMountpoint(const std::string& mountpoint) {
  const std::string what = "mountpoint '" + mountpoint + "'";
  struct stat st;
  if (stat(mountpoint.c_str(), &st) != 0) return Status::FromErrno(what);
  if (!S_ISDIR(st.st_mode)) return Fail(mountpoint, ENOTDIR, "is not a directory");
  char resolved[PATH_MAX];
  if (realpath(mountpoint.c_str(), resolved) == nullptr) return Status::FromErrno(what);
  DIR* d = opendir(resolved);
  if (d == nullptr) return Status::FromErrno(what);
  bool empty = true;
  errno = 0;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  const int read_errno = errno;
  closedir(d);
  if (empty && read_errno != 0) return Status::FromErrno(read_errno, what);
  if (!empty) return Fail(mountpoint, ENOTEMPTY, "is not empty");
  return std::string(resolved);
}

}  // namespace

Result<std::string> PrepareMountpoint(const std::string& mountpoint) {
  if (mountpoint.empty()) return Status::Invalid("no mountpoint given");
  Result<std::string> checked = CheckMountpoint(mountpoint);
  if (checked.ok() || checked.status().code() != ENOTCONN) return checked;
  STOKER_RETURN_IF_ERROR(ClearStaleMount(mountpoint));
  return CheckMountpoint(mountpoint);
}

Status CheckNesting(const std::string& origin, const std::string& mountpoint,
                    const std::string& cache_dir) {
  if (origin.find("://") != std::string::npos) return Status::OK();  // not a local path
  const std::filesystem::path mp = Absolute(mountpoint);
  if (IsWithin(mp, Absolute(origin))) {
    return Status::Invalid("mountpoint '" + mountpoint + "' is inside the origin '" + origin + "'");
  }
  if (IsWithin(Absolute(origin), mp)) {
    return Status::Invalid("origin '" + origin + "' is inside the mountpoint '" + mountpoint + "'");
  }
  if (!cache_dir.empty() && IsWithin(Absolute(cache_dir), mp)) {
    return Status::Invalid("cache dir '" + cache_dir + "' is inside the mountpoint '" + mountpoint +
                           "'");
  }
  if (!cache_dir.empty() && IsWithin(mp, Absolute(cache_dir))) {
    return Status::Invalid("mountpoint '" + mountpoint + "' is inside the cache dir '" + cache_dir +
                           "'");
  }
  return Status::OK();
}

Result<dev_t> DevOfMount(const std::string& mountpoint) {
  STOKER_ASSIGN_OR_RETURN(std::vector<MountInfoEntry> mounts, ReadMountInfo());
  std::optional<MountInfoEntry> m = FindMountAt(mounts, mountpoint);
  if (!m) return Status::NotFound("nothing is mounted at '" + mountpoint + "'");
  return m->dev;
}

bool DetachMount(const std::string& mountpoint) {
  return UnmountFuse(mountpoint, /*lazy=*/true).ok();
}

bool RaiseReadahead(dev_t dev, unsigned kb) {
  const std::string path = "/sys/class/bdi/" + std::to_string(major(dev)) + ":" +
                           std::to_string(minor(dev)) + "/read_ahead_kb";
  return WriteSmallFile(path, std::to_string(kb)).ok();
}

bool AbortFuseConnection(dev_t dev) {
  return WriteSmallFile("/sys/fs/fuse/connections/" + std::to_string(minor(dev)) + "/abort", "1")
      .ok();
}

}  // namespace stoker
