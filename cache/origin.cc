// The helpers every origin backend shares (cache/origin.h).
#include "cache/origin.h"

#include <cerrno>
#include <string_view>

namespace stoker {

bool IsOriginUnavailable(int code) {
  switch (code) {
    case EIO:
    case ETIMEDOUT:
    case ENOTCONN:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ECONNREFUSED:
    case ECONNRESET:
    case ESTALE:
    case ENODEV:
    case ENXIO:
    case EAGAIN:
      return true;
    default:
      return false;
  }
}

OriginIdentity IdentityFromStat(const struct stat& st) {
  OriginIdentity id;
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.dev = static_cast<uint64_t>(st.st_dev);
  return id;
}

bool IsPlainRelativePath(const std::string& path) {
  if (path.empty()) return true;
  if (path.find('\0') != std::string::npos || path.front() == '/') return false;
  size_t start = 0;
  for (;;) {
    size_t end = path.find('/', start);
    std::string_view c(path.data() + start, (end == std::string::npos ? path.size() : end) - start);
    if (c.empty() || c == "." || c == "..") return false;
    if (end == std::string::npos) return true;
    start = end + 1;
  }
}

Status NotPlainRelativePath(const std::string& path) {
  std::string shown;
  for (char c : path) shown += c == '\0' ? std::string("\\0") : std::string(1, c);
  return Status::Invalid("origin path '" + shown + "' is not a plain relative path");
}

}  // namespace stoker
