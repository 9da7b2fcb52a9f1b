// A local origin's extended attributes, passed through.
#include <sys/xattr.h>

#include <cerrno>
#include <string>
#include <vector>

#include "cache/origin/local/local_origin.h"
#include "cache/origin/local/local_stalls.h"

namespace stoker {

// Xattrs cannot be read through an O_PATH fd (fgetxattr gives EBADF), and a
// path from the root would follow symlinks. So the parent directory is
// resolved safely and the leaf is named through its /proc/self/fd link with
// the l-variants, which do not follow a symlink leaf.
Result<std::string> LocalOrigin::GetXattr(const std::string& path, const std::string& name) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  if (name.empty() || name.find('\0') != std::string::npos) {
    return Status::Invalid("bad xattr name");
  }
  std::string value;
  int rc = Watched(
      stalls_.get(), "getxattr", path, [this] { return DupRootFd(); },
      [&] {
        return WithParentOfPath(path, [&](int dir, const char* leaf) {
          std::string proc = "/proc/self/fd/" + std::to_string(dir) + "/" + leaf;
          for (;;) {
            ssize_t n = ::lgetxattr(proc.c_str(), name.c_str(), nullptr, 0);
            if (n < 0) return -errno;
            value.resize(static_cast<size_t>(n));
            if (n == 0) return 0;
            ssize_t m = ::lgetxattr(proc.c_str(), name.c_str(), value.data(), value.size());
            if (m >= 0) {
              value.resize(static_cast<size_t>(m));
              return 0;
            }
            if (errno != ERANGE) return -errno;  // ERANGE: it grew; ask again
          }
        });
      });
  if (rc < 0) return Error(-rc, "getxattr", path);
  return value;
}

Result<std::vector<std::string>> LocalOrigin::ListXattr(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  std::string list;
  int rc = Watched(
      stalls_.get(), "listxattr", path, [this] { return DupRootFd(); },
      [&] {
        return WithParentOfPath(path, [&](int dir, const char* leaf) {
          std::string proc = "/proc/self/fd/" + std::to_string(dir) + "/" + leaf;
          for (;;) {
            ssize_t n = ::llistxattr(proc.c_str(), nullptr, 0);
            if (n < 0) return -errno;
            list.resize(static_cast<size_t>(n));
            if (n == 0) return 0;
            ssize_t m = ::llistxattr(proc.c_str(), list.data(), list.size());
            if (m >= 0) {
              list.resize(static_cast<size_t>(m));
              return 0;
            }
            if (errno != ERANGE) return -errno;
          }
        });
      });
  if (rc < 0) return Error(-rc, "listxattr", path);
  std::vector<std::string> names;
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find('\0', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) names.emplace_back(list, start, end - start);
    start = end + 1;
  }
  return names;
}

}  // namespace stoker
