// AwsCredentials: where an S3 origin's keys come from, the way the AWS CLI
// looks for them: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
// AWS_SESSION_TOKEN), else a web identity (AWS_WEB_IDENTITY_TOKEN_FILE +
// AWS_ROLE_ARN, exchanged with STS's AssumeRoleWithWebIdentity at
// AWS_ENDPOINT_URL_STS or sts.REGION.amazonaws.com: EKS IRSA), else a
// container credentials endpoint
// (AWS_CONTAINER_CREDENTIALS_FULL_URI, or _RELATIVE_URI on 169.254.170.2:
// ECS tasks, EKS Pod Identity), else the profile AWS_PROFILE (default
// "default") of the shared credentials file (AWS_SHARED_CREDENTIALS_FILE,
// default ~/.aws/credentials), else the EC2 instance metadata service
// (IMDSv2, at AWS_EC2_METADATA_SERVICE_ENDPOINT or 169.254.169.254; not
// with AWS_EC2_METADATA_DISABLED=true). None found: anonymous requests
// (public buckets). AwsCredentialProvider keeps them fresh for a daemon that runs
// for days: keys that expire are fetched again before they do, a changed
// credentials file is read again, and keys the server refused are replaced.
//
// The values are secrets: nothing prints them, and source says only where
// they came from ("environment", "~/.aws/credentials [default]").
//
// Thread-safety: the functions are pure; AwsCredentialProvider is
// thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

struct AwsCredentials {
  std::string key_id;
  std::string secret;
  std::string session_token;  // "" if none
  std::string source;
  int64_t expires = 0;  // unix seconds; 0: they do not expire
};

// A container credentials endpoint's answer: {"AccessKeyId",
// "SecretAccessKey", "Token", "Expiration": ISO 8601}.
Result<AwsCredentials> ParseContainerCredentials(const std::string& json);

// STS's AssumeRoleWithWebIdentityResponse (XML).
Result<AwsCredentials> ParseAssumeRoleResponse(const std::string& xml);

// The profile's keys from an INI text ("[name]" sections, "key = value",
// '#'/';' comments); nullopt if the profile has no complete pair.
std::optional<AwsCredentials> ParseCredentialsFile(const std::string& text,
                                                   const std::string& profile);

// Looks in the places above; getenv is a seam for tests. nullopt: none found.
// EINVAL where a source is half given (a key id without a secret).
Result<std::optional<AwsCredentials>> FindAwsCredentials(
    const std::function<const char*(const char*)>& getenv);

class AwsCredentialProvider {
 public:
  // method ("GET", "PUT" without a body, "POST" with body) url with the
  // headers: the body of a 200, else an error.
  using Fetch = std::function<Result<std::string>(const std::string& method, const std::string& url,
                                                  const std::vector<std::string>& headers,
                                                  const std::string& body)>;
  using Clock = std::function<int64_t()>;  // unix seconds
  using Getenv = std::function<const char*(const char*)>;

  // The first source of the chain above that has keys (fetched now); null
  // when none has (anonymous). Errors: a source half given, an endpoint
  // that refuses.
  static Result<std::unique_ptr<AwsCredentialProvider>> Make(Getenv getenv, Fetch fetch, Clock now);

  // The keys to sign with now: fetched again first when they expire within
  // a quarter of their lifetime (at most 5 minutes) or were refused, read
  // again when the credentials file changed.
  Result<AwsCredentials> Get();
  // The server refused the keys (ExpiredToken and the like): the next Get
  // fetches or reads them again.
  void Invalidate();
  // Whether Invalidate can bring other keys (not for keys from the
  // environment, which stay what they are).
  bool CanRefresh() const { return kind_ != Kind::kEnvironment; }
  std::string source() const;

 private:
  enum class Kind { kEnvironment, kWebIdentity, kContainer, kFile, kInstance };
  AwsCredentialProvider(Kind kind, Getenv getenv, Fetch fetch, Clock now)
      : kind_(kind), getenv_(std::move(getenv)), fetch_(std::move(fetch)), now_(std::move(now)) {}
  // Fetches (container, instance) or reads (file) the keys.
  Status RefreshLocked() REQUIRES(mu_);
  // The instance's role keys from IMDSv2.
  Result<AwsCredentials> FetchInstanceLocked() REQUIRES(mu_);
  // The role's keys for the web identity token, from STS.
  Result<AwsCredentials> FetchWebIdentityLocked() REQUIRES(mu_);

  const Kind kind_;
  const Getenv getenv_;
  const Fetch fetch_;
  const Clock now_;
  mutable Mutex mu_;
  AwsCredentials current_ GUARDED_BY(mu_);
  int64_t fetched_at_ GUARDED_BY(mu_) = 0;
  bool stale_ GUARDED_BY(mu_) = false;      // refused by the server
  std::string file_stamp_ GUARDED_BY(mu_);  // the file's size and mtime when read
  int64_t file_checked_at_ GUARDED_BY(mu_) = 0;
  int64_t retry_after_ GUARDED_BY(mu_) = 0;  // a refresh failed; not again before
};

}  // namespace stoker
