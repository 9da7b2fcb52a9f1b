#include "cache/aws_credentials.h"

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

}  // namespace
}  // namespace stoker
