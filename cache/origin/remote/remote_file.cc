#include "cache/origin/remote/remote_file.h"

#include <algorithm>

namespace stoker {

HttpClient::Options ClientOptions(const OriginOptions& o) {
  HttpClient::Options c;
  c.connect_timeout_s = o.connect_timeout_s;
  c.stall_timeout_s = o.stall_timeout_s;
  c.retry.max_retries = o.retries;
  c.backoff_s = o.backoff_seconds;
  return c;
}

namespace {

// The total of "bytes 0-99/1234", or -1.
int64_t ContentRangeTotal(const std::string& v) {
  size_t slash = v.rfind('/');
  if (slash == std::string::npos || slash + 1 >= v.size() || v[slash + 1] == '*') return -1;
  int64_t total = 0;
  for (size_t i = slash + 1; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') return -1;
    total = total * 10 + (v[i] - '0');
  }
  return total;
}

}  // namespace

Status RemoteError(long http_status, const std::string& what, const std::string& detail) {
  int code = ErrnoForHttpStatus(http_status);
  std::string msg = what + ": HTTP " + std::to_string(http_status);
  if (!detail.empty()) msg += " (" + detail + ")";
  switch (code) {
    case ENOENT:
      msg += ": No such file or directory";
      break;
    case EACCES:
      msg += ": Permission denied";
      break;
    case ESTALE:
      msg += ": the object changed";
      break;
    default:
      break;
  }
  return Status::Error(code, msg);
}

RemoteFile::RemoteFile(Perform perform, HttpRequest get, const struct stat& st, std::string etag,
                       std::string what)
    : perform_(std::move(perform)),
      get_(std::move(get)),
      st_(st),
      etag_(std::move(etag)),
      what_(std::move(what)) {}

Result<size_t> RemoteFile::ReadAt(void* buf, size_t len, uint64_t off) {
  const uint64_t size = static_cast<uint64_t>(st_.st_size);
  if (off >= size || len == 0) return size_t{0};
  len = static_cast<size_t>(std::min<uint64_t>(len, size - off));
  HttpRequest req = get_;
  req.range = std::make_pair(off, static_cast<uint64_t>(len));
  if (!etag_.empty() && etag_.rfind("W/", 0) != 0) req.headers.push_back("If-Match: " + etag_);
  req.sink = static_cast<char*>(buf);
  req.sink_len = len;
  STOKER_ASSIGN_OR_RETURN(HttpResponse resp, perform_(req));
  if (resp.status == 416) return RemoteError(412, what_, "it is shorter now");
  if (resp.status != 206) return RemoteError(resp.status, what_, "");
  std::string etag = resp.Header("etag");
  if (!etag_.empty() && !etag.empty() && etag != etag_) {
    return RemoteError(412, what_, "a new ETag");
  }
  int64_t total = ContentRangeTotal(resp.Header("content-range"));
  if (total >= 0 && static_cast<uint64_t>(total) != size) {
    return RemoteError(412, what_, "a new size");
  }
  if (resp.sunk != len) {
    return Status::IOError(what_ + ": the server sent " + std::to_string(resp.sunk) + " of " +
                           std::to_string(len) + " bytes");
  }
  return resp.sunk;
}

}  // namespace stoker
