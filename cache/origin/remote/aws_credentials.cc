#include "cache/origin/remote/aws_credentials.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cache/origin/remote/http_date.h"
#include "cache/origin/remote/url.h"
#include "cache/origin/remote/xml.h"
#include "util/log.h"

namespace stoker {
namespace {

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

// The variable's value, or "".
std::string Env(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

// The shared credentials file: AWS_SHARED_CREDENTIALS_FILE, else
// ~/.aws/credentials; "" without HOME.
std::string CredentialsFile(const std::function<const char*(const char*)>& getenv) {
  std::string file = Env(getenv, "AWS_SHARED_CREDENTIALS_FILE");
  if (file.empty() && !Env(getenv, "HOME").empty())
    file = Env(getenv, "HOME") + "/.aws/credentials";
  return file;
}

}  // namespace

std::optional<AwsCredentials> ParseCredentialsFile(const std::string& text,
                                                   const std::string& profile) {
  AwsCredentials c;
  bool in_profile = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[') {
      std::string name = t.back() == ']' ? Trim(t.substr(1, t.size() - 2)) : "";
      // The config file's spelling, "[profile NAME]", is accepted too.
      if (name.rfind("profile ", 0) == 0) name = Trim(name.substr(8));
      in_profile = name == profile;
      continue;
    }
    if (!in_profile) continue;
    size_t eq = t.find('=');
    if (eq == std::string::npos) continue;
    std::string key = Trim(t.substr(0, eq));
    std::string value = Trim(t.substr(eq + 1));
    if (key == "aws_access_key_id") c.key_id = value;
    if (key == "aws_secret_access_key") c.secret = value;
    if (key == "aws_session_token") c.session_token = value;
  }
  if (c.key_id.empty() || c.secret.empty()) return std::nullopt;
  return c;
}

Result<std::optional<AwsCredentials>> FindAwsCredentials(
    const std::function<const char*(const char*)>& getenv) {
  auto env = [&](const char* name) { return Env(getenv, name); };
  std::string key = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY");
  if (!key.empty() || !secret.empty()) {
    if (key.empty() || secret.empty()) {
      return Status::Invalid(std::string("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be "
                                         "set together (") +
                             (key.empty() ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
                             " is missing)");
    }
    AwsCredentials c{key, secret, env("AWS_SESSION_TOKEN"), "environment"};
    return std::optional<AwsCredentials>(c);
  }
  std::string file = env("AWS_SHARED_CREDENTIALS_FILE");
  std::string shown = file;
  if (file.empty()) {
    std::string home = env("HOME");
    if (home.empty()) return std::optional<AwsCredentials>();
    file = home + "/.aws/credentials";
    shown = "~/.aws/credentials";
  }
  std::string profile = env("AWS_PROFILE");
  if (profile.empty()) profile = "default";
  std::ifstream in(file);
  if (!in) {
    if (!env("AWS_PROFILE").empty()) {
      return Status::Invalid("AWS_PROFILE=" + profile + " but there is no " + shown);
    }
    return std::optional<AwsCredentials>();
  }
  std::stringstream text;
  text << in.rdbuf();
  std::optional<AwsCredentials> c = ParseCredentialsFile(text.str(), profile);
  if (!c) {
    if (!env("AWS_PROFILE").empty()) {
      return Status::Invalid("profile '" + profile + "' has no keys in " + shown);
    }
    return std::optional<AwsCredentials>();
  }
  c->source = shown + " [" + profile + "]";
  return c;
}

Result<AwsCredentials> ParseContainerCredentials(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  auto text = [&](const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>()
                                                                  : std::string();
  };
  AwsCredentials c;
  c.key_id = text("AccessKeyId");
  c.secret = text("SecretAccessKey");
  c.session_token = text("Token");
  if (c.key_id.empty() || c.secret.empty()) {
    return Status::Invalid("the container credentials endpoint answered without keys");
  }
  if (const std::string exp = text("Expiration"); !exp.empty()) {
    std::optional<int64_t> t = ParseIso8601(exp);
    if (!t) return Status::Invalid("the container credentials' Expiration is not a date");
    c.expires = *t;
  }
  return c;
}

namespace {

// The size and mtime of a file, to tell that it changed; "" if absent.
std::string FileStamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ino);
}

}  // namespace

Result<std::unique_ptr<AwsCredentialProvider>> AwsCredentialProvider::Make(Getenv getenv,
                                                                           Fetch fetch, Clock now) {
  auto env = [&](const char* name) { return Env(getenv, name); };
  Kind kind = Kind::kFile;
  if (!env("AWS_ACCESS_KEY_ID").empty() || !env("AWS_SECRET_ACCESS_KEY").empty()) {
    kind = Kind::kEnvironment;
  } else if (!env("AWS_WEB_IDENTITY_TOKEN_FILE").empty() && !env("AWS_ROLE_ARN").empty()) {
    kind = Kind::kWebIdentity;
  } else if (!env("AWS_CONTAINER_CREDENTIALS_FULL_URI").empty() ||
             !env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").empty()) {
    kind = Kind::kContainer;
  }
  const bool imds = env("AWS_EC2_METADATA_DISABLED") != "true";
  const bool imds_named = !env("AWS_EC2_METADATA_SERVICE_ENDPOINT").empty();
  std::unique_ptr<AwsCredentialProvider> p(new AwsCredentialProvider(kind, getenv, fetch, now));
  {
    MutexLock l(p->mu_);
    Status s = p->RefreshLocked();
    if (!s.ok()) return s;
    if (!p->current_.key_id.empty()) return p;
  }
  if (!imds) return std::unique_ptr<AwsCredentialProvider>();  // anonymous
  // Last, the instance's role: on a host that is no EC2 instance nothing
  // answers, and requests are anonymous (unless the endpoint was named).
  p.reset(new AwsCredentialProvider(Kind::kInstance, std::move(getenv), std::move(fetch),
                                    std::move(now)));
  MutexLock l(p->mu_);
  Status s = p->RefreshLocked();
  if (!s.ok()) {
    if (imds_named) return s;
    return std::unique_ptr<AwsCredentialProvider>();
  }
  return p;
}

Status AwsCredentialProvider::RefreshLocked() {
  auto env = [&](const char* name) { return Env(getenv_, name); };
  fetched_at_ = now_();
  stale_ = false;
  if (kind_ == Kind::kContainer) {
    std::string url = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (url.empty()) url = "http://169.254.170.2" + env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    std::vector<std::string> headers;
    std::string token = env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    if (const std::string file = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); !file.empty()) {
      std::ifstream in(file);  // read at every fetch: a projected token rotates
      if (!in) return Status::Invalid("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: cannot read it");
      std::getline(in, token);
    }
    if (!token.empty()) headers.push_back("Authorization: " + token);
    Result<std::string> body = fetch_("GET", url, headers, "");
    if (!body.ok()) {
      return Status::Error(body.status().code(),
                           "container credentials: " + body.status().message());
    }
    STOKER_ASSIGN_OR_RETURN(AwsCredentials c, ParseContainerCredentials(*body));
    c.source = "the container credentials endpoint";
    current_ = std::move(c);
    return Status::OK();
  }
  if (kind_ == Kind::kInstance || kind_ == Kind::kWebIdentity) {
    STOKER_ASSIGN_OR_RETURN(AwsCredentials c, kind_ == Kind::kInstance ? FetchInstanceLocked()
                                                                       : FetchWebIdentityLocked());
    current_ = std::move(c);
    return Status::OK();
  }
  if (kind_ == Kind::kFile) {
    file_stamp_ = FileStamp(CredentialsFile(getenv_));
    file_checked_at_ = fetched_at_;
  }
  STOKER_ASSIGN_OR_RETURN(std::optional<AwsCredentials> found, FindAwsCredentials(getenv_));
  current_ = found ? std::move(*found) : AwsCredentials{};
  return Status::OK();
}

Result<AwsCredentials> AwsCredentialProvider::Get() {
  MutexLock l(mu_);
  const int64_t now = now_();
  bool refresh = stale_;
  if (kind_ != Kind::kEnvironment && kind_ != Kind::kFile && current_.expires != 0) {
    const int64_t margin =
        std::min<int64_t>(300, std::max<int64_t>(1, (current_.expires - fetched_at_) / 4));
    refresh = refresh || now >= current_.expires - margin;
  }
  if (kind_ == Kind::kFile && now - file_checked_at_ >= 5) {
    file_checked_at_ = now;
    refresh = refresh || FileStamp(CredentialsFile(getenv_)) != file_stamp_;
  }
  if (refresh && kind_ != Kind::kEnvironment && now >= retry_after_) {
    AwsCredentials before = current_;
    Status s = RefreshLocked();
    if (!s.ok() || current_.key_id.empty()) {
      // Keep what there was while it is still good; the next Get tries again.
      current_ = before;
      stale_ = true;
      retry_after_ = now + 1;
      if (current_.key_id.empty() || (current_.expires != 0 && now >= current_.expires)) {
        return s.ok() ? Status::Error(EACCES, "the AWS credentials are gone") : s;
      }
      LOG_WARN("refreshing the AWS credentials: {}; the current ones are kept",
               s.ok() ? "none found" : s.message());
    } else if (current_.key_id != before.key_id) {
      LOG_INFO("AWS credentials refreshed from {}", current_.source);
    }
  }
  return current_;
}

Result<AwsCredentials> AwsCredentialProvider::FetchInstanceLocked() {
  const char* named = getenv_("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  std::string base = named != nullptr && *named ? named : "http://169.254.169.254";
  while (!base.empty() && base.back() == '/') base.pop_back();
  auto fail = [](const Status& s) {
    return Status::Error(s.code(), "instance metadata: " + s.message());
  };
  Result<std::string> token = fetch_("PUT", base + "/latest/api/token",
                                     {"X-aws-ec2-metadata-token-ttl-seconds: 21600"}, "");
  if (!token.ok()) return fail(token.status());
  const std::vector<std::string> auth = {"X-aws-ec2-metadata-token: " + *token};
  const std::string creds = base + "/latest/meta-data/iam/security-credentials/";
  Result<std::string> roles = fetch_("GET", creds, auth, "");
  if (!roles.ok()) return fail(roles.status());
  std::string role = roles->substr(0, roles->find('\n'));
  while (!role.empty() && (role.back() == '\r' || role.back() == ' ')) role.pop_back();
  if (role.empty()) return Status::Error(EACCES, "instance metadata: the instance has no role");
  Result<std::string> body = fetch_("GET", creds + role, auth, "");
  if (!body.ok()) return fail(body.status());
  STOKER_ASSIGN_OR_RETURN(AwsCredentials c, ParseContainerCredentials(*body));
  c.source = "the instance metadata service (role " + role + ")";
  return c;
}

Result<AwsCredentials> ParseAssumeRoleResponse(const std::string& xml) {
  Result<XmlNode> root = ParseXml(xml);
  if (!root.ok()) return Status::Invalid("STS answered no XML: " + root.status().message());
  if (root->name == "ErrorResponse" && root->Child("Error") != nullptr) {
    return Status::Error(EACCES, "STS refused: " + root->Child("Error")->ChildText("Code") + ": " +
                                     root->Child("Error")->ChildText("Message"));
  }
  const XmlNode* result = root->Child("AssumeRoleWithWebIdentityResult");
  const XmlNode* creds = result != nullptr ? result->Child("Credentials") : nullptr;
  if (root->name != "AssumeRoleWithWebIdentityResponse" || creds == nullptr) {
    return Status::Invalid("STS answered without credentials: <" + root->name + ">");
  }
  AwsCredentials c;
  c.key_id = creds->ChildText("AccessKeyId");
  c.secret = creds->ChildText("SecretAccessKey");
  c.session_token = creds->ChildText("SessionToken");
  std::optional<int64_t> expires = ParseIso8601(creds->ChildText("Expiration"));
  if (c.key_id.empty() || c.secret.empty() || !expires) {
    return Status::Invalid("STS answered incomplete credentials");
  }
  c.expires = *expires;
  return c;
}

Result<AwsCredentials> AwsCredentialProvider::FetchWebIdentityLocked() {
  auto env = [&](const char* name) { return Env(getenv_, name); };
  // Read at every fetch: a projected service account token rotates.
  std::ifstream in(env("AWS_WEB_IDENTITY_TOKEN_FILE"));
  std::string token;
  if (!in || !std::getline(in, token) || token.empty()) {
    return Status::Invalid("AWS_WEB_IDENTITY_TOKEN_FILE: cannot read a token from it");
  }
  std::string endpoint = env("AWS_ENDPOINT_URL_STS");
  if (endpoint.empty()) {
    std::string region = env("AWS_REGION");
    if (region.empty()) region = env("AWS_DEFAULT_REGION");
    endpoint =
        "https://sts." + (region.empty() ? std::string("us-east-1") : region) + ".amazonaws.com";
  }
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  std::string session = env("AWS_ROLE_SESSION_NAME");
  if (session.empty()) session = "stoker";
  const std::string body = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" +
                           PercentEncode(env("AWS_ROLE_ARN"), false) +
                           "&RoleSessionName=" + PercentEncode(session, false) +
                           "&WebIdentityToken=" + PercentEncode(token, false);
  Result<std::string> answer =
      fetch_("POST", endpoint + "/", {"Content-Type: application/x-www-form-urlencoded"}, body);
  if (!answer.ok()) {
    return Status::Error(answer.status().code(), "web identity: " + answer.status().message());
  }
  STOKER_ASSIGN_OR_RETURN(AwsCredentials c, ParseAssumeRoleResponse(*answer));
  c.source = "STS for the web identity of " + env("AWS_ROLE_ARN");
  return c;
}

void AwsCredentialProvider::Invalidate() {
  MutexLock l(mu_);
  stale_ = true;
}

std::string AwsCredentialProvider::source() const {
  MutexLock l(mu_);
  return current_.source;
}

}  // namespace stoker
