#include "cache/aws_credentials.h"

#include <fstream>
#include <sstream>

namespace stoker {
namespace {

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
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
  auto env = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v ? v : "";
  };
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

}  // namespace stoker
