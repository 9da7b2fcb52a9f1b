// S3Origin: an Origin over an S3 bucket (AWS or an S3-compatible server),
// s3://BUCKET[/PREFIX]. Keys below PREFIX/ are the tree: "a/b/c" is the file
// c in the directory a/b.
//
// Requests are signed by libcurl (SigV4, CURLOPT_AWS_SIGV4) with the keys
// of aws_credentials.h, for the region AWS_REGION (else AWS_DEFAULT_REGION,
// else us-east-1). Directories come from ListObjectsV2 with delimiter '/',
// page after page (continuation tokens), kept for listing_ttl_seconds; a
// file's identity is ETag + size + Last-Modified (remote_entry.h), from the
// parent's listing while that is kept, else from a HEAD. Reads are ranged
// GETs with If-Match (remote_file.h).
//
// Keys that cannot be paths (an empty component "a//b", ".", "..", a
// "dir/" marker object) are not shown. Where a key "a" and keys "a/..."
// both exist, listings show the directory; a lookup outside a kept listing
// (a HEAD) finds the file.
//
// Errors: NoSuchKey (404) ENOENT; AccessDenied and friends (403) EACCES; a
// server that cannot be reached, 5xx and SlowDown after the retries EIO or
// ECONNREFUSED/EHOSTUNREACH (unavailable: the cache serves what it holds).
// Credentials appear in no message.
//
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/origin/origin.h"
#include "cache/origin/remote/aws_credentials.h"
#include "cache/origin/remote/http_client.h"
#include "cache/origin/remote/remote_entry.h"
#include "cache/origin/remote/s3_list.h"

namespace stoker {

class S3Origin final : public Origin {
 public:
  // url: "s3://BUCKET[/PREFIX]". Checks now that the endpoint answers, the
  // bucket exists, the keys are accepted and the prefix holds something.
  [[nodiscard]] static Result<std::shared_ptr<S3Origin>> Create(const std::string& url,
                                                                const OriginOptions& options);

  std::string Describe() const override { return describe_; }
  // The bucket and prefix: the same objects through another endpoint (a
  // proxy, a new port) are the same origin.
  std::string Location() const override { return "s3://" + cfg_.bucket + "/" + cfg_.prefix; }
  Result<struct stat> Stat(const std::string& path) override;
  Status ReadDir(const std::string& path,
                 const std::function<bool(const OriginDirEntry&)>& fn) override;
  Result<std::string> ReadLink(const std::string& path) override;
  Result<std::unique_ptr<OriginFile>> Open(const std::string& path) override;
  Result<std::string> GetXattr(const std::string& path, const std::string& name) override;
  Result<std::vector<std::string>> ListXattr(const std::string& path) override;
  OriginBackoff* backoff() override { return &client_->backoff(); }
  // One key of the prefix asked for: the endpoint answers, the bucket
  // exists, the keys are good, the prefix holds something.
  Status CheckAtMount() override;
  // A read found path changed: its directory's listing is listed again.
  void Stale(const std::string& path) override { listings_.DropUnder(path); }
  void Refresh(const std::string& prefix) override { listings_.DropUnder(prefix); }

 private:
  struct Config {
    std::string bucket;
    std::string prefix;    // "" or ending in '/'
    std::string endpoint;  // "scheme://host[:port]", no trailing '/'
    bool path_style = false;
    std::string region;
    std::shared_ptr<AwsCredentialProvider> credentials;  // null: anonymous
  };
  S3Origin(Config config, const OriginOptions& options);
  // Create's steps: what the URL, the environment and the options say
  // (bucket, prefix, region, endpoint, credentials); then, with the origin
  // made, one key of the prefix asked for: the endpoint answers, the bucket
  // exists, the keys are good, the prefix holds something. what names the
  // origin in the errors.
  static Result<Config> ConfigOf(const std::string& url, const OriginOptions& options);
  // Why the endpoint refused the check (a missing bucket, keys refused, the
  // wrong region, ...).
  Status RefusedAtMount(const HttpResponse& r, const std::string& what) const;

  // A request to the bucket (key "" with a query) or one of its objects,
  // not signed yet.
  HttpRequest Request(HttpRequest::Method method, const std::string& key,
                      const std::string& query) const;
  // Signs req with the credentials of now and performs it; keys the server
  // refuses as expired are replaced and the request sent once more.
  Result<HttpResponse> Perform(const HttpRequest& req) const;
  // The first key under the prefix: whether the endpoint answers.
  HttpRequest ListOneKey() const;
  Result<S3ListPage> ListPage(const std::string& prefix, const std::string& token, int max_keys);
  // The whole listing of dir (cached).
  Result<ListingCache::Listing> List(const std::string& dir);
  // A HEAD of the object path; ENOENT if there is none.
  Result<RemoteEntry> Head(const std::string& path);
  // Whether any key lies below path/.
  Result<bool> IsDir(const std::string& path);
  Status ErrorOf(const HttpResponse& resp, const std::string& what) const;
  std::string Name(const std::string& path) const {
    return "s3://" + cfg_.bucket + "/" + cfg_.prefix + path;
  }
  struct stat StatOf(const std::string& path, const RemoteEntry& e) const {
    return RemoteStat(path, e, created_);
  }

  const Config cfg_;
  const std::string describe_;
  std::string check_what_;  // "s3 origin 'URL'", for CheckAtMount's messages
  int check_retries_ = 0;
  const int page_size_;
  const std::shared_ptr<HttpClient> client_;
  ListingCache listings_;
  const int64_t created_;
};

}  // namespace stoker
