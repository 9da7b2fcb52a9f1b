// The helpers every origin backend shares (cache/origin/origin.h).
#include "cache/origin/origin.h"

#include <cerrno>
#include <string>
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

std::string OriginIdentity::ToString() const {
  return "size " + std::to_string(size) + " mtime " + std::to_string(mtime_ns) + " ctime " +
         std::to_string(ctime_ns) + " dev " + std::to_string(dev) + " ino " + std::to_string(ino);
}

bool SameSizeAndTimes(const OriginIdentity& a, const OriginIdentity& b) {
  // Remote origins have no device and carry their ETag in ctime.
  const bool remote = a.dev == 0 || b.dev == 0;
  return a.size == b.size && a.mtime_ns == b.mtime_ns && a.etag == b.etag &&
         (!remote || a.ctime_ns == b.ctime_ns);
}

bool SameContent(const OriginIdentity& was, const OriginIdentity& now) {
  if (!SameSizeAndTimes(was, now)) return false;
  if (((was.dev | now.dev) & kDerivedDevBit) != 0) {
    return was.dev == now.dev && was.ino == now.ino;
  }
  return was.ino == now.ino || was.dev != now.dev;
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
