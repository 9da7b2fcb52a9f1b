#include "cache/origin/remote/s3_origin.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <map>

#include "cache/origin/remote/http_date.h"
#include "cache/origin/remote/remote_file.h"
#include "cache/origin/remote/url.h"
#include "util/log.h"

namespace stoker {
namespace {

constexpr size_t kMaxListings = 4096;
// Retries of the check at mount time (a dead endpoint fails in seconds).
constexpr int kProbeRetries = 2;

bool ValidBucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (unsigned char c : b) {
    if (!std::isalnum(c) && c != '-' && c != '.' && c != '_') return false;
  }
  return true;
}

// "127.0.0.1:9000" -> true: no virtual host can be put in front of it.
bool IsAddressOrLocalhost(std::string host) {
  if (!host.empty() && host[0] == '[') return true;  // IPv6 literal
  size_t colon = host.rfind(':');
  if (colon != std::string::npos) host = host.substr(0, colon);
  in_addr a;
  return host == "localhost" || inet_pton(AF_INET, host.c_str(), &a) == 1;
}

// The bucket and the prefix ("" or ending in '/') of "s3://BUCKET[/PREFIX]".
Status ParseLocation(const std::string& url, std::string* bucket, std::string* prefix) {
  STOKER_ASSIGN_OR_RETURN(Url u, ParseUrl(url));
  if (u.scheme != "s3") return Status::Invalid("origin URL '" + url + "': not s3://");
  *bucket = u.host;
  if (!ValidBucket(*bucket)) {
    return Status::Invalid("origin URL '" + url + "': '" + *bucket + "' is not a bucket name");
  }
  std::string path = u.path;
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (!IsPlainRelativePath(path)) {
    return Status::Invalid("origin URL '" + url + "': the prefix '" + path +
                           "' is not a plain path");
  }
  *prefix = path.empty() ? "" : path + "/";
  return Status::OK();
}

// AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1.
std::string RegionFromEnvironment() {
  const char* region = std::getenv("AWS_REGION");
  if (region == nullptr || *region == '\0') region = std::getenv("AWS_DEFAULT_REGION");
  return region != nullptr && *region != '\0' ? region : "us-east-1";
}

// --s3-endpoint, else the region's AWS endpoint; http(s)://HOST[:PORT].
Result<Url> ParseEndpoint(const OriginOptions& options, const std::string& region) {
  std::string endpoint =
      options.s3_endpoint.empty() ? "https://s3." + region + ".amazonaws.com" : options.s3_endpoint;
  Result<Url> e = ParseUrl(endpoint);
  if (!e.ok() || (e->scheme != "http" && e->scheme != "https") ||
      (!e->path.empty() && e->path != "/")) {
    return Status::Invalid("--s3-endpoint '" + endpoint +
                           "': expected http(s)://HOST[:PORT] without a path");
  }
  return e;
}

// How the credential provider asks its endpoints (the metadata service,
// the container's): through a client of their own (no backoff shared with
// the bucket's), which gives up soon: on a host that is no EC2 instance,
// nothing answers at the metadata service's address.
AwsCredentialProvider::Fetch CredentialFetcher(const OriginOptions& options) {
  HttpClient::Options fetch_options = ClientOptions(options);
  fetch_options.connect_timeout_s = 2;
  fetch_options.backoff_s = 0;
  auto fetcher = std::make_shared<HttpClient>(fetch_options);
  return [fetcher](const std::string& method, const std::string& url,
                   const std::vector<std::string>& headers,
                   const std::string& body) -> Result<std::string> {
    HttpRequest req;
    req.method = method == "PUT"    ? HttpRequest::Method::kPut
                 : method == "POST" ? HttpRequest::Method::kPost
                                    : HttpRequest::Method::kGet;
    req.body = body;
    req.url = url;
    req.headers = headers;
    req.max_retries = 1;
    STOKER_ASSIGN_OR_RETURN(HttpResponse r, fetcher->Perform(req));
    if (r.status != 200) {
      return Status::Error(EACCES, url + " answered HTTP " + std::to_string(r.status));
    }
    return r.body;
  };
}

}  // namespace

Result<std::shared_ptr<S3Origin>> S3Origin::Create(const std::string& url,
                                                   const OriginOptions& options) {
  STOKER_ASSIGN_OR_RETURN(Config cfg, ConfigOf(url, options));
  std::shared_ptr<S3Origin> origin(new S3Origin(cfg, options));
  origin->check_what_ = "s3 origin '" + url + "'";
  origin->check_retries_ = options.retries;
  if (options.check_at_mount) STOKER_RETURN_IF_ERROR(origin->CheckAtMount());
  // While the endpoint is unreachable, the same listing asks it again in
  // the background: no reader waits on a probe.
  std::weak_ptr<S3Origin> weak = origin;
  origin->client_->ProbeWith([weak]() -> std::optional<HttpRequest> {
    std::shared_ptr<S3Origin> o = weak.lock();
    if (o == nullptr) return std::nullopt;
    return o->ListOneKey();  // signed now, not at mount
  });
  return origin;
}

Result<S3Origin::Config> S3Origin::ConfigOf(const std::string& url, const OriginOptions& options) {
  Config cfg;
  STOKER_RETURN_IF_ERROR(ParseLocation(url, &cfg.bucket, &cfg.prefix));
  cfg.region = RegionFromEnvironment();
  STOKER_ASSIGN_OR_RETURN(Url e, ParseEndpoint(options, cfg.region));
  cfg.endpoint = e.scheme + "://" + e.host;
  cfg.path_style = options.s3_path_style || IsAddressOrLocalhost(e.host);
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<AwsCredentialProvider> provider,
                          AwsCredentialProvider::Make(std::getenv, CredentialFetcher(options), [] {
                            return static_cast<int64_t>(std::time(nullptr));
                          }));
  cfg.credentials = std::move(provider);
  if (cfg.credentials) {
    LOG_INFO("s3://{}: credentials from {}", cfg.bucket, cfg.credentials->source());
  } else {
    LOG_INFO("s3://{}: no AWS credentials found; requests are anonymous", cfg.bucket);
  }
  return cfg;
}

Status S3Origin::CheckAtMount() {
  const std::string& what = check_what_;
  const int retries = check_retries_;
  HttpRequest probe = ListOneKey();
  probe.max_retries = std::min(retries, kProbeRetries);
  Result<HttpResponse> r = Perform(probe);
  if (!r.ok()) {
    return Status::Error(r.status().code(),
                         what + ": cannot reach " + cfg_.endpoint + ": " + r.status().message());
  }
  if (r->status != 200) return RefusedAtMount(*r, what);
  Result<S3ListPage> page = ParseListObjectsV2(r->body);
  if (!page.ok()) {
    return Status::Error(
        EIO, what + ": " + cfg_.endpoint + " does not answer like S3: " + page.status().message());
  }
  if (!cfg_.prefix.empty() && page->objects.empty() && page->prefixes.empty()) {
    return Status::NotFound(what + ": no objects under the prefix '" + cfg_.prefix + "'");
  }
  return Status::OK();
}

Status S3Origin::RefusedAtMount(const HttpResponse& r, const std::string& what) const {
  std::string code = S3ErrorCode(r.body);
  if (r.status == 404 || code == "NoSuchBucket") {
    return Status::NotFound(what + ": bucket '" + cfg_.bucket + "' does not exist at " +
                            cfg_.endpoint);
  }
  if (r.status == 403 || r.status == 401) {
    return Status::Error(EACCES,
                         what + ": access denied (" +
                             (code.empty() ? "HTTP " + std::to_string(r.status) : code) +
                             "); check the credentials (" +
                             (cfg_.credentials ? cfg_.credentials->source() : "none found") + ")");
  }
  if (r.status == 301 || code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed") {
    return Status::Invalid(what + ": the bucket is not in region " + cfg_.region +
                           " (set AWS_REGION)");
  }
  return ErrorOf(r, what + ": listing the bucket");
}

S3Origin::S3Origin(Config config, const OriginOptions& options)
    : cfg_(std::move(config)),
      describe_("s3://" + cfg_.bucket + "/" + cfg_.prefix + " at " + cfg_.endpoint),
      page_size_(std::max(1, std::min(1000, options.s3_page_size))),
      client_(std::make_shared<HttpClient>(ClientOptions(options))),
      listings_(options.listing_ttl_seconds, kMaxListings),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

HttpRequest S3Origin::ListOneKey() const {
  // encoding-type=url as every listing: the one key may be one XML cannot carry.
  return Request(HttpRequest::Method::kGet, "",
                 "delimiter=%2F&encoding-type=url&list-type=2&max-keys=1&prefix=" +
                     PercentEncode(cfg_.prefix, false));
}

HttpRequest S3Origin::Request(HttpRequest::Method method, const std::string& key,
                              const std::string& query) const {
  HttpRequest req;
  req.method = method;
  if (cfg_.path_style) {
    req.url =
        cfg_.endpoint + "/" + cfg_.bucket + (key.empty() ? "" : "/" + PercentEncode(key, true));
  } else {
    size_t sep = cfg_.endpoint.find("://");
    req.url = cfg_.endpoint.substr(0, sep + 3) + cfg_.bucket + "." + cfg_.endpoint.substr(sep + 3) +
              "/" + PercentEncode(key, true);
  }
  // Query parameters in name order, values fully encoded: libcurl signs the
  // query as given, and that is SigV4's canonical form.
  if (!query.empty()) req.url += "?" + query;
  return req;
}

Status S3Origin::ErrorOf(const HttpResponse& resp, const std::string& what) const {
  return RemoteError(resp.status, what, S3ErrorCode(resp.body));
}

namespace {

// Signs req with c (SigV4 through libcurl).
void Sign(HttpRequest& req, const AwsCredentials& c, const std::string& region) {
  // S3 wants the payload's SHA-256 signed, and libcurl 7.88 signs the
  // header only when given. Only GET and HEAD are sent: the payload is
  // always empty, and this is the SHA-256 of nothing.
  req.headers.push_back(
      "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  req.aws_sigv4 = "aws:amz:" + region + ":s3";
  req.aws_key_id = c.key_id;
  req.aws_secret = c.secret;
  if (!c.session_token.empty()) req.headers.push_back("x-amz-security-token: " + c.session_token);
}

// The answers of S3 to keys that are no longer good. A HEAD's answer has
// no body to say why: its 400 or 403 is taken as one (a request more, with
// fresh keys, where it was not).
bool KeysRefused(const HttpRequest& req, const HttpResponse& r) {
  if (r.status != 400 && r.status != 403) return false;
  if (req.method == HttpRequest::Method::kHead && r.body.empty()) return true;
  const std::string code = S3ErrorCode(r.body);
  return code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired" ||
         code == "InvalidAccessKeyId" || code == "RequestExpired";
}

}  // namespace

// Signs req with the credentials of now and performs it; keys the server
// refuses as no longer good are replaced and the request sent once more.
static Result<HttpResponse> PerformSigned(HttpClient& client, AwsCredentialProvider* credentials,
                                          const std::string& region, const HttpRequest& req) {
  if (credentials == nullptr) return client.Perform(req);
  for (int attempt = 0;; ++attempt) {
    STOKER_ASSIGN_OR_RETURN(AwsCredentials c, credentials->Get());
    HttpRequest signed_req = req;
    Sign(signed_req, c, region);
    Result<HttpResponse> r = client.Perform(signed_req);
    if (attempt > 0 || !r.ok() || !credentials->CanRefresh() || !KeysRefused(req, *r)) return r;
    LOG_INFO("the S3 server refused the keys ({}); replacing them", S3ErrorCode(r->body));
    credentials->Invalidate();
  }
}

Result<HttpResponse> S3Origin::Perform(const HttpRequest& req) const {
  return PerformSigned(*client_, cfg_.credentials.get(), cfg_.region, req);
}

Result<S3ListPage> S3Origin::ListPage(const std::string& prefix, const std::string& token,
                                      int max_keys) {
  std::string query;
  if (!token.empty()) query = "continuation-token=" + PercentEncode(token, false) + "&";
  // encoding-type=url: a key may hold characters XML 1.0 cannot carry.
  query += "delimiter=%2F&encoding-type=url&list-type=2&max-keys=" + std::to_string(max_keys) +
           "&prefix=" + PercentEncode(prefix, false);
  STOKER_ASSIGN_OR_RETURN(HttpResponse resp,
                          Perform(Request(HttpRequest::Method::kGet, "", query)));
  const std::string what = "listing s3://" + cfg_.bucket + "/" + prefix;
  if (resp.status != 200) return ErrorOf(resp, what);
  Result<S3ListPage> page = ParseListObjectsV2(resp.body);
  if (!page.ok()) return Status::Error(EIO, what + ": " + page.status().message());
  return page;
}

Result<ListingCache::Listing> S3Origin::List(const std::string& dir) {
  if (ListingCache::Listing kept = listings_.Get(dir)) return kept;
  const std::string prefix = cfg_.prefix + dir + (dir.empty() ? "" : "/");
  std::map<std::string, RemoteEntry> entries;
  bool exists = dir.empty();
  std::string token;
  for (;;) {
    STOKER_ASSIGN_OR_RETURN(S3ListPage page, ListPage(prefix, token, page_size_));
    for (const S3Object& o : page.objects) {
      exists = true;
      std::string name = o.key.substr(std::min(prefix.size(), o.key.size()));
      if (name.empty() || !IsPlainRelativePath(name) || name.find('/') != std::string::npos) {
        continue;  // the "dir/" marker, or a key no path can name
      }
      RemoteEntry e;
      e.name = name;
      e.size = o.size;
      e.mtime = o.mtime;
      e.etag = o.etag;
      entries.emplace(name, std::move(e));  // a directory of that name wins below
    }
    for (const std::string& p : page.prefixes) {
      exists = true;
      if (p.size() <= prefix.size() + 1) continue;  // "a//": an empty component
      std::string name = p.substr(prefix.size(), p.size() - prefix.size() - 1);
      if (!IsPlainRelativePath(name) || name.find('/') != std::string::npos) continue;
      RemoteEntry e;
      e.name = name;
      e.is_dir = true;
      entries[name] = std::move(e);
    }
    if (!page.truncated) break;
    token = page.next_token;
  }
  if (!exists) return Status::NotFound(Name(dir) + ": No such file or directory");
  auto listing = std::make_shared<std::vector<RemoteEntry>>();
  listing->reserve(entries.size());
  for (auto& [name, e] : entries) listing->push_back(std::move(e));
  ListingCache::Listing out = std::move(listing);
  listings_.Put(dir, out);
  return out;
}

Result<RemoteEntry> S3Origin::Head(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(HttpResponse resp,
                          Perform(Request(HttpRequest::Method::kHead, cfg_.prefix + path, "")));
  if (resp.status != 200) return ErrorOf(resp, Name(path));
  std::string len = resp.Header("content-length");
  if (len.empty() || len.size() > 19 || len.find_first_not_of("0123456789") != std::string::npos) {
    return Status::IOError(Name(path) + ": HEAD gives no Content-Length");
  }
  RemoteEntry e;
  e.name = BaseName(path);
  e.size = std::stoull(len);
  e.mtime = ParseHttpDate(resp.Header("last-modified")).value_or(0);
  e.etag = resp.Header("etag");
  return e;
}

Result<bool> S3Origin::IsDir(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(S3ListPage page, ListPage(cfg_.prefix + path + "/", "", 1));
  return !page.objects.empty() || !page.prefixes.empty();
}

Result<struct stat> S3Origin::Stat(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  RemoteEntry dir;
  dir.is_dir = true;
  if (path.empty()) return StatOf(path, dir);
  if (ListingCache::Listing parent = listings_.Get(ParentOf(path))) {
    const std::string name = BaseName(path);
    for (const RemoteEntry& e : *parent) {
      if (e.name == name) return StatOf(path, e);
    }
    return Status::NotFound(Name(path) + ": No such file or directory");
  }
  // Backing off: a directory seen before is not asked about again.
  if (listings_.KnownDir(path) && client_->backoff().AnswerFromHeld()) return StatOf(path, dir);
  Result<RemoteEntry> head = Head(path);
  if (head.ok()) return StatOf(path, *head);
  // Down: a directory seen before still resolves (the cache serves the
  // files below it); a file's attributes come from the cache (fs/).
  if (IsOriginUnavailable(head.status().code()) && listings_.KnownDir(path)) {
    return StatOf(path, dir);
  }
  if (head.status().code() != ENOENT) return head.status();
  Result<bool> is_dir = IsDir(path);
  if (!is_dir.ok()) {
    // Answering HEADs (a directory is no object) but not listings.
    if (IsOriginUnavailable(is_dir.status().code()) && listings_.KnownDir(path)) {
      return StatOf(path, dir);
    }
    return is_dir.status();
  }
  if (!*is_dir) return head.status();
  listings_.NoteDir(path);
  return StatOf(path, dir);
}

Status S3Origin::ReadDir(const std::string& path,
                         const std::function<bool(const OriginDirEntry&)>& fn) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  STOKER_ASSIGN_OR_RETURN(
      ListingCache::Listing listing,
      listings_.ListOrKept(path, client_->backoff(), [&] { return List(path); }));
  OriginDirEntry out;
  for (const RemoteEntry& e : *listing) {
    out.name = e.name;
    out.st = StatOf(path.empty() ? e.name : path + "/" + e.name, e);
    if (!fn(out)) break;
  }
  return Status::OK();
}

Result<std::string> S3Origin::ReadLink(const std::string& path) {
  return Status::Invalid(Name(path) + ": an S3 origin has no symlinks");
}

Result<std::unique_ptr<OriginFile>> S3Origin::Open(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  if (path.empty()) return Status::Error(EISDIR, Name(path) + ": is a directory");
  Result<RemoteEntry> head = Head(path);
  if (!head.ok()) {
    if (head.status().code() == ENOENT) {
      Result<bool> is_dir = IsDir(path);
      if (is_dir.ok() && *is_dir) return Status::Error(EISDIR, Name(path) + ": is a directory");
    }
    return head.status();
  }
  // Each range GET is signed when sent: an open file outlives the keys it
  // was opened with.
  RemoteFile::Perform perform = [client = client_, credentials = cfg_.credentials,
                                 region = cfg_.region](const HttpRequest& req) {
    return PerformSigned(*client, credentials.get(), region, req);
  };
  return std::unique_ptr<OriginFile>(std::make_unique<RemoteFile>(
      std::move(perform), Request(HttpRequest::Method::kGet, cfg_.prefix + path, ""),
      StatOf(path, *head), head->etag, Name(path)));
}

Result<std::string> S3Origin::GetXattr(const std::string& path, const std::string& name) {
  return Status::Error(ENODATA, "no xattrs on an S3 origin");
}

Result<std::vector<std::string>> S3Origin::ListXattr(const std::string& path) {
  return std::vector<std::string>();
}

}  // namespace stoker
