// HttpOrigin: an Origin over a plain HTTP(S) server (nginx, a CDN, any
// static file server that answers ranged GETs).
//
// A file's size and identity come from a HEAD (Content-Length, ETag,
// Last-Modified); its bytes from ranged GETs (see remote_file.h). A server
// that ignores Range is refused when the origin is made. Directories come
// from a manifest given with --manifest (see http_listing.h), or else from
// the server's own listings (nginx autoindex, HTML or JSON), each kept in
// memory for listing_ttl_seconds (and used past that while the server
// cannot be reached, so that paths to cached files still resolve). Without either, the mount fails:
// there would be nothing to list.
//
// Paths map to URLs below the base URL, percent-encoded (RFC 3986), so
// names with blanks, '#', '?', '%' or non-ASCII work. There are no symlinks
// and no xattrs (ENODATA).
//
// Errors: HTTP 404 ENOENT, 401/403 EACCES, a changed file ESTALE, a server
// that cannot be reached (after the retries) ECONNREFUSED/EHOSTUNREACH/EIO,
// which the cache takes as "unavailable" and keeps serving what it holds.
//
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/origin/origin.h"
#include "cache/origin/remote/http_client.h"
#include "cache/origin/remote/http_listing.h"
#include "cache/origin/remote/remote_entry.h"

namespace stoker {

class HttpOrigin final : public Origin {
 public:
  // url: "http(s)://HOST[:PORT]/PATH/". Checks now that the server answers,
  // lists (or the manifest parses) and serves ranges.
  [[nodiscard]] static Result<std::shared_ptr<HttpOrigin>> Create(const std::string& url,
                                                                  const OriginOptions& options);

  std::string Describe() const override { return base_; }
  Result<struct stat> Stat(const std::string& path) override;
  Status ReadDir(const std::string& path,
                 const std::function<bool(const OriginDirEntry&)>& fn) override;
  Result<std::string> ReadLink(const std::string& path) override;
  Result<std::unique_ptr<OriginFile>> Open(const std::string& path) override;
  Result<std::string> GetXattr(const std::string& path, const std::string& name) override;
  Result<std::vector<std::string>> ListXattr(const std::string& path) override;
  OriginBackoff* backoff() override { return &client_->backoff(); }
  // Reachable, listable (or a manifest), serving ranges; with --revalidate
  // never, sending ETag or Last-Modified (else kOriginRefusesOptions).
  Status CheckAtMount() override;
  // A read found path changed: its directory's listing is listed again.
  void Stale(const std::string& path) override { listings_.DropUnder(path); }
  void Refresh(const std::string& prefix) override { listings_.DropUnder(prefix); }

 private:
  HttpOrigin(std::string base, const OriginOptions& options, std::optional<Manifest> manifest);

  std::string UrlOf(const std::string& path, bool dir) const;
  // What a HEAD says of path: a file, or a directory (a redirect to path/).
  // max_retries: as HttpRequest's.
  Result<RemoteEntry> Head(const std::string& path, int max_retries = -1);
  // The server's listing of dir (cached).
  Result<ListingCache::Listing> List(const std::string& dir, int max_retries = -1);
  struct stat StatOf(const std::string& path, const RemoteEntry& e) const {
    return RemoteStat(path, e, created_);
  }

  const std::string base_;  // ends with '/'
  const OriginOptions options_;
  std::string check_what_;  // "http origin 'URL'", for CheckAtMount's messages
  const std::shared_ptr<HttpClient> client_;
  const std::optional<Manifest> manifest_;
  ListingCache listings_;
  const int64_t created_;  // directories' times
};

}  // namespace stoker
