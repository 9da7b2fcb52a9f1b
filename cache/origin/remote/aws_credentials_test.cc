#include "cache/origin/remote/aws_credentials.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>

namespace stoker {
namespace {

const char* kFile =
    "# comment\n"
    "[default]\n"
    "aws_access_key_id = AKDEFAULT\n"
    "aws_secret_access_key=secretdefault\n"
    "\n"
    "[profile other]\n"
    "; another comment\n"
    "aws_access_key_id   =   AKOTHER  \r\n"
    "aws_secret_access_key = secret/other+x\n"
    "aws_session_token = tok\n"
    "[half]\n"
    "aws_access_key_id = AKHALF\n";

TEST(AwsCredentialsTest, ParsesProfiles) {
  auto d = ParseCredentialsFile(kFile, "default");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->key_id, "AKDEFAULT");
  EXPECT_EQ(d->secret, "secretdefault");
  EXPECT_EQ(d->session_token, "");
  auto o = ParseCredentialsFile(kFile, "other");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->key_id, "AKOTHER");
  EXPECT_EQ(o->secret, "secret/other+x");
  EXPECT_EQ(o->session_token, "tok");
  EXPECT_FALSE(ParseCredentialsFile(kFile, "half"));
  EXPECT_FALSE(ParseCredentialsFile(kFile, "missing"));
}

TEST(AwsCredentialsTest, EnvironmentFirstThenFile) {
  char dir[] = "/tmp/stoker-aws-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/credentials";
  std::ofstream(file) << kFile;
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  env["AWS_SHARED_CREDENTIALS_FILE"] = file;
  auto c = FindAwsCredentials(getenv);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(*c);
  EXPECT_EQ((*c)->key_id, "AKDEFAULT");
  EXPECT_EQ((*c)->source, file + " [default]");
  EXPECT_EQ((*c)->source.find("secret"), std::string::npos);

  env["AWS_PROFILE"] = "other";
  c = FindAwsCredentials(getenv);
  ASSERT_TRUE(c.ok() && *c);
  EXPECT_EQ((*c)->key_id, "AKOTHER");

  env["AWS_PROFILE"] = "missing";
  EXPECT_EQ(FindAwsCredentials(getenv).status().code(), EINVAL);

  env["AWS_ACCESS_KEY_ID"] = "AKENV";
  env["AWS_SECRET_ACCESS_KEY"] = "secretenv";
  env["AWS_SESSION_TOKEN"] = "tokenv";
  c = FindAwsCredentials(getenv);
  ASSERT_TRUE(c.ok() && *c);
  EXPECT_EQ((*c)->key_id, "AKENV");
  EXPECT_EQ((*c)->session_token, "tokenv");
  EXPECT_EQ((*c)->source, "environment");

  env.erase("AWS_SECRET_ACCESS_KEY");
  Result<std::optional<AwsCredentials>> half = FindAwsCredentials(getenv);
  EXPECT_EQ(half.status().code(), EINVAL);
  EXPECT_EQ(half.status().message().find("AKENV"), std::string::npos);

  env.clear();
  env["HOME"] = dir;  // no ~/.aws there: anonymous
  c = FindAwsCredentials(getenv);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(*c);
  unlink(file.c_str());
  rmdir(dir);
}

// A fake world for AwsCredentialProvider: an environment, a clock and a
// container credentials endpoint that hands out numbered keys.
struct World {
  std::map<std::string, std::string> env;
  int64_t now = 1'800'000'000;
  int fetches = 0;
  bool endpoint_down = false;
  int64_t lifetime = 600;
  std::vector<std::string> last_headers;
  std::string last_body;
  AwsCredentialProvider::Getenv getenv() {
    return [this](const char* n) -> const char* {
      auto it = env.find(n);
      return it == env.end() ? nullptr : it->second.c_str();
    };
  }
  AwsCredentialProvider::Fetch fetch() {
    return [this](const std::string& method, const std::string& url,
                  const std::vector<std::string>& headers,
                  const std::string& body) -> Result<std::string> {
      last_headers = headers;
      last_body = body;
      if (method == "POST" && !endpoint_down) {  // STS
        ++fetches;
        return "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
               "<AccessKeyId>ASIA" +
               std::to_string(fetches) +
               "</AccessKeyId><SecretAccessKey>s"
               "</SecretAccessKey><SessionToken>t</SessionToken><Expiration>" +
               FormatIso(now + lifetime) +
               "</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
               "</AssumeRoleWithWebIdentityResponse>";
      }
      if (url.find("/latest/") != std::string::npos && !endpoint_down) {  // instance metadata
        if (method == "PUT") return std::string("imds-token");
        if (url.ends_with("/security-credentials/")) return std::string("role-a\n");
      }
      if (endpoint_down) return Status::Error(ECONNREFUSED, url + ": refused");
      ++fetches;
      const std::string expires = FormatIso(now + lifetime);
      return "{\"AccessKeyId\": \"AK" + std::to_string(fetches) +
             "\", \"SecretAccessKey\": \"s\", \"Token\": \"t\", \"Expiration\": \"" + expires +
             "\"}";
    };
  }
  AwsCredentialProvider::Clock clock() {
    return [this] { return now; };
  }
  static std::string FormatIso(int64_t t) {
    time_t tt = static_cast<time_t>(t);
    struct tm tm;
    gmtime_r(&tt, &tm);
    char buf[32];
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
  }
};

TEST(AwsCredentialsTest, ContainerCredentialsParse) {
  Result<AwsCredentials> c = ParseContainerCredentials(
      R"({"AccessKeyId":"AK","SecretAccessKey":"S","Token":"T","Expiration":"2027-01-01T00:00:00Z"})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->key_id, "AK");
  EXPECT_EQ(c->session_token, "T");
  EXPECT_EQ(c->expires, 1798761600);
  EXPECT_FALSE(ParseContainerCredentials(R"({"AccessKeyId":"AK"})").ok());
  EXPECT_FALSE(ParseContainerCredentials("not json").ok());
  EXPECT_FALSE(
      ParseContainerCredentials(R"({"AccessKeyId":"AK","SecretAccessKey":"S","Expiration":"soon"})")
          .ok());
}

TEST(AwsCredentialsTest, ContainerKeysAreFetchedAgainBeforeTheyExpire) {
  World w;
  w.env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://127.0.0.1:1/creds";
  w.env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "secret-token";
  auto p = AwsCredentialProvider::Make(w.getenv(), w.fetch(), w.clock());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_NE(*p, nullptr);
  EXPECT_EQ(w.last_headers, std::vector<std::string>{"Authorization: secret-token"});
  EXPECT_EQ((*p)->Get()->key_id, "AK1");
  EXPECT_EQ((*p)->source().find("secret"), std::string::npos);
  w.now += 400;  // 200 s left of 600; the margin is a quarter of the lifetime, 150 s
  EXPECT_EQ((*p)->Get()->key_id, "AK1");
  w.now += 60;  // 140 s left: within the margin
  EXPECT_EQ((*p)->Get()->key_id, "AK2");
  EXPECT_EQ(w.fetches, 2);
  // Refused by the server: fetched again at the next Get.
  (*p)->Invalidate();
  EXPECT_EQ((*p)->Get()->key_id, "AK3");
  // The endpoint down: the keys held are kept while they are good...
  w.endpoint_down = true;
  w.now += 500;
  Result<AwsCredentials> kept = (*p)->Get();
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->key_id, "AK3");
  // ... and past their expiry the failure is the answer.
  w.now += 200;
  EXPECT_FALSE((*p)->Get().ok());
  w.endpoint_down = false;
  w.now += 2;
  EXPECT_EQ((*p)->Get()->key_id, "AK4");
}

TEST(AwsCredentialsTest, ACredentialsFileIsReadAgainWhenItChanges) {
  char dir[] = "/tmp/stoker-aws-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/credentials";
  std::ofstream(file) << "[default]\naws_access_key_id = AK1\naws_secret_access_key = s1\n";
  World w;
  w.env["AWS_SHARED_CREDENTIALS_FILE"] = file;
  auto p = AwsCredentialProvider::Make(w.getenv(), w.fetch(), w.clock());
  ASSERT_TRUE(p.ok() && *p);
  EXPECT_EQ((*p)->Get()->key_id, "AK1");
  std::ofstream(file) << "[default]\naws_access_key_id = AK22\naws_secret_access_key = s2\n";
  EXPECT_EQ((*p)->Get()->key_id, "AK1");  // looked at every 5 s at most
  w.now += 5;
  EXPECT_EQ((*p)->Get()->key_id, "AK22");
  EXPECT_EQ(w.fetches, 0);
  unlink(file.c_str());
  rmdir(dir);
}

TEST(AwsCredentialsTest, EnvironmentKeysStayAndNothingIsAnonymous) {
  World w;
  w.env["AWS_ACCESS_KEY_ID"] = "AKENV";
  w.env["AWS_SECRET_ACCESS_KEY"] = "s";
  w.env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://127.0.0.1:1/creds";
  auto p = AwsCredentialProvider::Make(w.getenv(), w.fetch(), w.clock());
  ASSERT_TRUE(p.ok() && *p);
  (*p)->Invalidate();
  EXPECT_EQ((*p)->Get()->key_id, "AKENV");
  EXPECT_EQ(w.fetches, 0);
  World none;
  none.env["HOME"] = "/nonexistent";
  none.env["AWS_EC2_METADATA_DISABLED"] = "true";
  auto anonymous = AwsCredentialProvider::Make(none.getenv(), none.fetch(), none.clock());
  ASSERT_TRUE(anonymous.ok());
  EXPECT_EQ(*anonymous, nullptr);
  World down;
  down.env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://127.0.0.1:1/creds";
  down.endpoint_down = true;
  EXPECT_FALSE(AwsCredentialProvider::Make(down.getenv(), down.fetch(), down.clock()).ok());
}

TEST(AwsCredentialsTest, TheInstanceRoleIsTheLastSource) {
  World w;
  w.env["HOME"] = "/nonexistent";
  w.env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://127.0.0.1:1/";
  auto p = AwsCredentialProvider::Make(w.getenv(), w.fetch(), w.clock());
  ASSERT_TRUE(p.ok() && *p) << p.status().message();
  EXPECT_EQ((*p)->Get()->key_id, "AK1");
  EXPECT_EQ(w.last_headers, std::vector<std::string>{"X-aws-ec2-metadata-token: imds-token"});
  EXPECT_NE((*p)->source().find("role-a"), std::string::npos);
  w.now += 500;  // within the margin of a 600 s lifetime
  EXPECT_EQ((*p)->Get()->key_id, "AK2");
  // Named but not answering: an error; not named and not answering: anonymous.
  World down;
  down.env["HOME"] = "/nonexistent";
  down.endpoint_down = true;
  down.env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://127.0.0.1:1/";
  EXPECT_FALSE(AwsCredentialProvider::Make(down.getenv(), down.fetch(), down.clock()).ok());
  down.env.erase("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  auto anonymous = AwsCredentialProvider::Make(down.getenv(), down.fetch(), down.clock());
  ASSERT_TRUE(anonymous.ok());
  EXPECT_EQ(*anonymous, nullptr);
}

TEST(AwsCredentialsTest, AWebIdentityIsExchangedWithSts) {
  char dir[] = "/tmp/stoker-aws-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string token_file = std::string(dir) + "/token";
  std::ofstream(token_file) << "jwt-1\n";
  World w;
  w.env["AWS_WEB_IDENTITY_TOKEN_FILE"] = token_file;
  w.env["AWS_ROLE_ARN"] = "arn:aws:iam::123456789012:role/reader";
  w.env["AWS_ENDPOINT_URL_STS"] = "http://127.0.0.1:1";
  auto p = AwsCredentialProvider::Make(w.getenv(), w.fetch(), w.clock());
  ASSERT_TRUE(p.ok() && *p) << p.status().message();
  EXPECT_EQ((*p)->Get()->key_id, "ASIA1");
  EXPECT_NE(w.last_body.find("Action=AssumeRoleWithWebIdentity"), std::string::npos);
  EXPECT_NE(w.last_body.find("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Freader"),
            std::string::npos)
      << w.last_body;
  EXPECT_NE(w.last_body.find("WebIdentityToken=jwt-1"), std::string::npos);
  // The token file rotates; the next fetch (ahead of the expiry) sends the new one.
  std::ofstream(token_file) << "jwt-2\n";
  w.now += 500;
  EXPECT_EQ((*p)->Get()->key_id, "ASIA2");
  EXPECT_NE(w.last_body.find("WebIdentityToken=jwt-2"), std::string::npos);
  EXPECT_EQ((*p)->source().find("jwt"), std::string::npos);
  EXPECT_FALSE(ParseAssumeRoleResponse("<ErrorResponse><Error><Code>AccessDenied</Code>"
                                       "<Message>no</Message></Error></ErrorResponse>")
                   .ok());
  unlink(token_file.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace stoker
