// RemoteFile: an open file of a remote origin (HTTP or S3). It reads with
// ranged GETs of the object as it was when opened, and never returns bytes
// of another version: each GET carries If-Match with the ETag seen at open
// (a strong one), and an answer whose ETag or total size differs from it is
// refused too (a server that ignores If-Match). A changed object gives
// ESTALE, which the cache takes as "changed at the origin": the next open
// revalidates and caches the new version.
//
// Identity() is the identity the file was opened with; it never changes.
//
// Thread-safety: ReadAt may be called from many threads at once; each call
// is one request of its own (the client's pool gives it a connection).
#pragma once

#include <sys/stat.h>

#include <functional>
#include <memory>
#include <string>

#include "cache/origin/origin.h"
#include "cache/origin/remote/http_client.h"

namespace stoker {

// The HTTP client's timeouts and retries as the origin's options set them:
// the same for both remote origins.
HttpClient::Options ClientOptions(const OriginOptions& o);

class RemoteFile final : public OriginFile {
 public:
  // How a request is sent (signed, where the origin signs).
  using Perform = std::function<Result<HttpResponse>(const HttpRequest&)>;
  // get: a GET of the whole object; st and etag: what Stat said of it. what
  // names it in messages ("s3://b/key").
  RemoteFile(Perform perform, HttpRequest get, const struct stat& st, std::string etag,
             std::string what);

  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override;
  Result<OriginIdentity> Identity() override { return IdentityFromStat(st_); }

 private:
  const Perform perform_;
  const HttpRequest get_;
  const struct stat st_;
  const std::string etag_;
  const std::string what_;
};

// The Status for a remote answer that is not a success, naming what and the
// server's words (an S3 error code) when given.
Status RemoteError(long http_status, const std::string& what, const std::string& detail);

}  // namespace stoker
