// MakeOrigin: from the user's ORIGIN argument to a backend.
#include <cctype>
#include <string>

#include "cache/io/io_backend.h"
#include "cache/origin/local/local_origin.h"
#include "cache/origin/origin.h"
#include "cache/origin/remote/http_origin.h"
#include "cache/origin/remote/s3_origin.h"

namespace stoker {

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
  LocalOrigin::Options local_options;
  local_options.stall_timeout_ms = static_cast<int64_t>(options.stall_timeout_s) * 1000;
  local_options.backoff_ms = static_cast<int64_t>(options.backoff_seconds) * 1000;
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<LocalOrigin> local,
                          LocalOrigin::Create(spec, std::move(io), local_options));
  return std::shared_ptr<Origin>(std::move(local));
}

Result<std::shared_ptr<Origin>> MakeOrigin(const std::string& spec, const OriginOptions& options) {
  if (!SchemeOf(spec).empty()) {
    // Remote origins read through HTTP, not an I/O backend.
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<IoBackend> io, MakeIoBackend(IoBackendKind::kSyscall));
    return MakeOrigin(spec, std::shared_ptr<IoBackend>(std::move(io)), options);
  }
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<IoBackend> io, MakeIoBackend(options.io_backend));
  return MakeOrigin(spec, std::shared_ptr<IoBackend>(std::move(io)), options);
}

}  // namespace stoker
