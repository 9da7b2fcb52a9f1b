#include "fs/mountpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>

#include "util/log.h"

extern char** environ;

namespace stoker {

namespace {

Status Fail(const std::string& mp, int code, const std::string& why) {
  return Status::Error(code, "mountpoint '" + mp + "' " + why);
}

// `fusermount3 -u -z mp`, for when umount2 is not ours to call.
bool FusermountLazyUnmount(const std::string& mp) {
  const char* argv[] = {"fusermount3", "-u", "-z", "--", mp.c_str(), nullptr};
  pid_t pid;
  if (posix_spawnp(&pid, "fusermount3", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
    return false;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

Status ClearStaleMount(const std::string& mp) {
  LOG_WARN("mountpoint '{}' holds a stale FUSE mount (its daemon is gone); detaching it", mp);
  if (DetachMount(mp)) return Status::OK();
  return Fail(mp, ENOTCONN, "holds a stale FUSE mount that could not be detached");
}

bool WriteSmallFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
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
  // Fields: id parent MAJ:MIN root mountpoint ...; the mountpoint has ' ',
  // tab, newline and '\\' escaped as octal.
  std::string escaped;
  for (char c : mountpoint) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\%03o", static_cast<unsigned char>(c));
      escaped += buf;
    } else {
      escaped.push_back(c);
    }
  }
  FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (f == nullptr) return Status::FromErrno("/proc/self/mountinfo");
  std::optional<dev_t> found;
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    std::istringstream in(line);
    std::string id, parent, majmin, root, mp;
    if (!(in >> id >> parent >> majmin >> root >> mp) || mp != escaped) continue;
    unsigned maj = 0, min = 0;
    if (std::sscanf(majmin.c_str(), "%u:%u", &maj, &min) == 2) found = makedev(maj, min);
  }
  free(line);
  std::fclose(f);
  if (!found) return Status::NotFound("nothing is mounted at '" + mountpoint + "'");
  return *found;
}

bool DetachMount(const std::string& mountpoint) {
  return umount2(mountpoint.c_str(), MNT_DETACH) == 0 || FusermountLazyUnmount(mountpoint);
}

bool RaiseReadahead(dev_t dev, unsigned kb) {
  const std::string path = "/sys/class/bdi/" + std::to_string(major(dev)) + ":" +
                           std::to_string(minor(dev)) + "/read_ahead_kb";
  return WriteSmallFile(path, std::to_string(kb));
}

bool AbortFuseConnection(dev_t dev) {
  return WriteSmallFile("/sys/fs/fuse/connections/" + std::to_string(minor(dev)) + "/abort", "1");
}

}  // namespace stoker
