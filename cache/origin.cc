// MakeOrigin: from the user's ORIGIN argument to a backend; and the helpers
// every backend shares.
#include "cache/origin.h"

#include <cctype>
#include <cerrno>
#include <string>
#include <string_view>

#include "cache/http_origin.h"
#include "cache/io_backend.h"
#include "cache/local_origin.h"
#include "cache/s3_origin.h"

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
  return SameSizeAndTimes(was, now) && (was.ino == now.ino || was.dev != now.dev);
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

namespace {

// The scheme of "s3://bucket/x" ("s3"), or "" for a path. Only an RFC 3986
// scheme counts, so a directory named "a://b" under a path is still a path.
std::string SchemeOf(const std::string& spec) {
  size_t colon = spec.find("://");
  if (colon == std::string::npos || colon == 0) return "";
  if (!std::isalpha(static_cast<unsigned char>(spec[0]))) return "";
  for (size_t i = 1; i < colon; ++i) {
    unsigned char c = static_cast<unsigned char>(spec[i]);
    if (!std::isalnum(c) && c != '+' && c != '-' && c != '.') return "";
  }
  return spec.substr(0, colon);
}

}  // namespace

Result<std::shared_ptr<Origin>> MakeOrigin(const std::string& spec, std::shared_ptr<IoBackend> io,
                                           const OriginOptions& options) {
  STOKER_CHECK(io != nullptr, "MakeOrigin needs an I/O backend");
  if (spec.empty()) return Status::Invalid("origin is empty: give a directory or a URL");
  std::string scheme = SchemeOf(spec);
  if (!scheme.empty()) {
    std::string lower;
    for (char c : scheme) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "s3") {
      STOKER_ASSIGN_OR_RETURN(std::shared_ptr<S3Origin> s3, S3Origin::Create(spec, options));
      return std::shared_ptr<Origin>(std::move(s3));
    }
    if (lower == "http" || lower == "https") {
      STOKER_ASSIGN_OR_RETURN(std::shared_ptr<HttpOrigin> http, HttpOrigin::Create(spec, options));
      return std::shared_ptr<Origin>(std::move(http));
    }
    return Status::Invalid("origin '" + spec + "': unknown scheme '" + scheme +
                           "' (use a directory, s3://, http:// or https://)");
  }
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<LocalOrigin> local,
                          LocalOrigin::Create(spec, std::move(io)));
  return std::shared_ptr<Origin>(std::move(local));
}

Result<std::shared_ptr<Origin>> MakeOrigin(const std::string& spec, const OriginOptions& options) {
  if (!SchemeOf(spec).empty()) {
    // Remote origins read through HTTP, not an I/O backend.
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<IoBackend> io, MakeIoBackend(IoBackendKind::kSyscall));
    return MakeOrigin(spec, std::shared_ptr<IoBackend>(std::move(io)), options);
  }
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<IoBackend> io, MakeIoBackend(IoBackendKind::kAuto));
  return MakeOrigin(spec, std::shared_ptr<IoBackend>(std::move(io)), options);
}

}  // namespace stoker
