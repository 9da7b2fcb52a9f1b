#include "cache/origin/remote/http_origin.h"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

#include "cache/origin/remote/http_date.h"
#include "cache/origin/remote/remote_file.h"
#include "cache/origin/remote/url.h"
#include "util/duration.h"

namespace stoker {
namespace {

constexpr size_t kMaxListings = 4096;
// Retries of the checks at mount time (a dead server fails in seconds).
constexpr int kProbeRetries = 2;

}  // namespace

Result<std::shared_ptr<HttpOrigin>> HttpOrigin::Create(const std::string& url,
                                                       const OriginOptions& options) {
  STOKER_ASSIGN_OR_RETURN(Url u, ParseUrl(url));
  if (u.scheme != "http" && u.scheme != "https") {
    return Status::Invalid("origin URL '" + url + "': not http:// or https://");
  }
  std::string base = u.scheme + "://" + u.host + "/" + u.path;
  if (base.back() != '/') base += '/';
  const std::string what = "http origin '" + base + "'";

  std::optional<Manifest> manifest;
  if (!options.manifest.empty()) {
    std::ifstream in(options.manifest, std::ios::binary);
    if (!in) return Status::FromErrno("manifest '" + options.manifest + "'");
    std::stringstream text;
    text << in.rdbuf();
    Result<Manifest> m = Manifest::Parse(text.str());
    if (!m.ok()) {
      return Status::Invalid("manifest '" + options.manifest + "': " + m.status().message());
    }
    manifest = std::move(m).value();
  }
  std::shared_ptr<HttpOrigin> origin(new HttpOrigin(base, options, std::move(manifest)));

  origin->check_what_ = what;
  if (options.check_at_mount) STOKER_RETURN_IF_ERROR(origin->CheckAtMount());
  // While the server is unreachable, a HEAD of the base URL asks it again
  // in the background: no reader waits on a probe. Any HTTP answer will do.
  origin->client_->ProbeWith([base = origin->base_] {
    HttpRequest req;
    req.method = HttpRequest::Method::kHead;
    req.url = base;
    return std::optional<HttpRequest>(std::move(req));
  });
  return origin;
}

Status HttpOrigin::CheckAtMount() {
  const std::string& what = check_what_;
  const OriginOptions& options = options_;
  // Reachable, listable, and serving ranges: find a file to ask for one.
  std::string probe;
  if (manifest_) {
    probe = manifest_->first_file();
  } else {
    Result<ListingCache::Listing> root = List("", std::min(options.retries, kProbeRetries));
    if (!root.ok()) {
      Status s = root.status();
      if (s.code() == EACCES || s.code() == ENOENT) {
        return Status::Error(s.code(), what + ": the server gives no directory listing (" +
                                           s.message() +
                                           "); turn on autoindex or give --manifest FILE");
      }
      return Status::Error(s.code(), what + ": " + s.message());
    }
    for (const RemoteEntry& e : **root) {
      if (!e.is_dir && e.size > 0) {
        probe = e.name;
        break;
      }
    }
  }
  if (!probe.empty()) {
    Result<RemoteEntry> head = Head(probe, std::min(options.retries, kProbeRetries));
    if (!head.ok())
      return Status::Error(head.status().code(), what + ": " + head.status().message());
    if (options.listing_ttl_seconds == kNeverSeconds && head->etag.empty() && head->mtime == 0) {
      return Status::Error(kOriginRefusesOptions,
                           what + " sends neither ETag nor Last-Modified ('" + probe +
                               "'), so a changed file could not be told from the one cached; "
                               "--revalidate never needs one of them");
    }
    if (!head->is_dir && head->size > 0) {
      char byte;
      HttpRequest get;
      get.url = UrlOf(probe, false);
      get.range = std::make_pair(uint64_t{0}, uint64_t{1});
      get.sink = &byte;
      get.sink_len = 1;
      get.max_retries = std::min(options.retries, kProbeRetries);
      Result<HttpResponse> r = client_->Perform(get);
      if (!r.ok()) {
        return Status::Error(r.status().code(), what + ": " + r.status().message());
      }
      if (r->status != 206) {
        return Status::Error(EIO, what + ": a ranged GET of '" + probe + "' answered HTTP " +
                                      std::to_string(r->status) + "; stoker needs range requests");
      }
    }
  }
  return Status::OK();
}

HttpOrigin::HttpOrigin(std::string base, const OriginOptions& options,
                       std::optional<Manifest> manifest)
    : base_(std::move(base)),
      options_(options),
      client_(std::make_shared<HttpClient>(ClientOptions(options))),
      manifest_(std::move(manifest)),
      listings_(options.listing_ttl_seconds, kMaxListings),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

std::string HttpOrigin::UrlOf(const std::string& path, bool dir) const {
  return base_ + PercentEncode(path, true) + (dir && !path.empty() ? "/" : "");
}

Result<RemoteEntry> HttpOrigin::Head(const std::string& path, int max_retries) {
  HttpRequest req;
  req.max_retries = max_retries;
  req.method = HttpRequest::Method::kHead;
  req.url = UrlOf(path, false);
  STOKER_ASSIGN_OR_RETURN(HttpResponse resp, client_->Perform(req));
  RemoteEntry e;
  e.name = BaseName(path);
  if (resp.status >= 300 && resp.status < 400) {
    std::string loc = resp.Header("location");
    if (!loc.empty() && loc.back() == '/') {
      e.is_dir = true;
      return e;
    }
    return Status::IOError(base_ + path + ": HTTP " + std::to_string(resp.status) +
                           " redirects elsewhere; stoker does not follow file redirects");
  }
  if (resp.status != 200) return RemoteError(resp.status, base_ + path, "");
  std::string len = resp.Header("content-length");
  if (len.empty() || len.size() > 19 || len.find_first_not_of("0123456789") != std::string::npos) {
    return Status::IOError(base_ + path + ": HEAD gives no Content-Length");
  }
  e.size = std::stoull(len);
  e.mtime = ParseHttpDate(resp.Header("last-modified")).value_or(0);
  e.etag = resp.Header("etag");
  return e;
}

Result<ListingCache::Listing> HttpOrigin::List(const std::string& dir, int max_retries) {
  if (ListingCache::Listing kept = listings_.Get(dir)) return kept;
  HttpRequest req;
  req.max_retries = max_retries;
  req.url = UrlOf(dir, true);
  req.follow_redirects = true;
  STOKER_ASSIGN_OR_RETURN(HttpResponse resp, client_->Perform(req));
  if (resp.status != 200) return RemoteError(resp.status, req.url, "");
  Result<std::vector<RemoteEntry>> entries = ParseAutoindex(resp.Header("content-type"), resp.body);
  if (!entries.ok()) {
    return Status::IOError(req.url + ": not a listing stoker reads: " + entries.status().message());
  }
  auto listing = std::make_shared<const std::vector<RemoteEntry>>(std::move(entries).value());
  listings_.Put(dir, listing);
  return ListingCache::Listing(listing);
}

Result<struct stat> HttpOrigin::Stat(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  RemoteEntry dir;
  dir.is_dir = true;
  if (path.empty()) return StatOf(path, dir);
  if (manifest_) {
    const RemoteEntry* e = manifest_->Find(path);
    if (e == nullptr) return Status::NotFound(base_ + path + ": not in the manifest");
    if (e->is_dir) return StatOf(path, *e);
  } else if (ListingCache::Listing parent = listings_.Get(ParentOf(path))) {
    const std::string name = BaseName(path);
    const RemoteEntry* found = nullptr;
    for (const RemoteEntry& e : *parent) {
      if (e.name == name) found = &e;
    }
    if (found == nullptr) return Status::NotFound(base_ + path + ": No such file or directory");
    if (found->is_dir) return StatOf(path, *found);
  }
  // Backing off: a directory seen before is not asked about again.
  if (listings_.KnownDir(path) && client_->backoff().AnswerFromHeld()) return StatOf(path, dir);
  Result<RemoteEntry> e = Head(path);
  if (!e.ok()) {
    // Down: a directory seen before still resolves (the cache serves the
    // files below it); a file's attributes come from the cache (fs/).
    if (IsOriginUnavailable(e.status().code()) && listings_.KnownDir(path)) {
      return StatOf(path, dir);
    }
    return e.status();
  }
  if (e->is_dir) listings_.NoteDir(path);
  return StatOf(path, *e);
}

Status HttpOrigin::ReadDir(const std::string& path,
                           const std::function<bool(const OriginDirEntry&)>& fn) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  const std::vector<RemoteEntry>* entries = nullptr;
  ListingCache::Listing listing;
  if (manifest_) {
    entries = manifest_->Dir(path);
    if (entries == nullptr) {
      const RemoteEntry* e = manifest_->Find(path);
      return Status::Error(e ? ENOTDIR : ENOENT,
                           base_ + path + ": not a directory of the manifest");
    }
  } else {
    STOKER_ASSIGN_OR_RETURN(
        listing, listings_.ListOrKept(path, client_->backoff(), [&] { return List(path); }));
    entries = listing.get();
  }
  OriginDirEntry out;
  for (const RemoteEntry& e : *entries) {
    out.name = e.name;
    out.st = StatOf(path.empty() ? e.name : path + "/" + e.name, e);
    if (!fn(out)) break;
  }
  return Status::OK();
}

Result<std::string> HttpOrigin::ReadLink(const std::string& path) {
  return Status::Invalid(base_ + path + ": an HTTP origin has no symlinks");
}

Result<std::unique_ptr<OriginFile>> HttpOrigin::Open(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  if (path.empty()) return Status::Error(EISDIR, base_ + ": is a directory");
  if (manifest_) {
    const RemoteEntry* m = manifest_->Find(path);
    if (m == nullptr) return Status::NotFound(base_ + path + ": not in the manifest");
    if (m->is_dir) return Status::Error(EISDIR, base_ + path + ": is a directory");
  }
  STOKER_ASSIGN_OR_RETURN(RemoteEntry e, Head(path));
  if (e.is_dir) return Status::Error(EISDIR, base_ + path + ": is a directory");
  HttpRequest get;
  get.url = UrlOf(path, false);
  return std::unique_ptr<OriginFile>(std::make_unique<RemoteFile>(
      [client = client_](const HttpRequest& r) { return client->Perform(r); }, std::move(get),
      StatOf(path, e), e.etag, base_ + path));
}

Result<std::string> HttpOrigin::GetXattr(const std::string& path, const std::string& name) {
  return Status::Error(ENODATA, "no xattrs on an HTTP origin");
}

Result<std::vector<std::string>> HttpOrigin::ListXattr(const std::string& path) {
  return std::vector<std::string>();
}

}  // namespace stoker
