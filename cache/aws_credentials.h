// AwsCredentials: where an S3 origin's keys come from, the way the AWS CLI
// looks for them: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
// AWS_SESSION_TOKEN), else the profile AWS_PROFILE (default "default") of
// the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, default
// ~/.aws/credentials). None found: anonymous requests (public buckets).
//
// The values are secrets: nothing prints them, and source says only where
// they came from ("environment", "~/.aws/credentials [default]").
//
// Thread-safety: pure functions over what they are given.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "util/status.h"

namespace stoker {

struct AwsCredentials {
  std::string key_id;
  std::string secret;
  std::string session_token;  // "" if none
  std::string source;
};

// The profile's keys from an INI text ("[name]" sections, "key = value",
// '#'/';' comments); nullopt if the profile has no complete pair.
std::optional<AwsCredentials> ParseCredentialsFile(const std::string& text,
                                                   const std::string& profile);

// Looks in the places above; getenv is a seam for tests. nullopt: none found.
// EINVAL where a source is half given (a key id without a secret).
Result<std::optional<AwsCredentials>> FindAwsCredentials(
    const std::function<const char*(const char*)>& getenv);

}  // namespace stoker
