#include "cache/origin/remote/url.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(UrlTest, Splits) {
  Result<Url> u = ParseUrl("HTTPS://data.example.org:8443/imagenet/train/");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "data.example.org:8443");
  EXPECT_EQ(u->path, "imagenet/train/");
  u = ParseUrl("s3://bucket");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "bucket");
  EXPECT_EQ(u->path, "");
}

TEST(UrlTest, Refuses) {
  for (const char* bad : {"s3://", "http:///x", "nothing", "http://h:0/", "http://h:99999/",
                          "http://h:x/", "http://h/x?y=1", "http://h/#f", "http://a b/"}) {
    EXPECT_EQ(ParseUrl(bad).status().code(), EINVAL) << bad;
  }
}

TEST(UrlTest, UserInfoIsRefusedWithoutShowingIt) {
  Result<Url> u = ParseUrl("https://me:s3cret@host/x");
  EXPECT_EQ(u.status().code(), EINVAL);
  EXPECT_EQ(u.status().message().find("s3cret"), std::string::npos);
  EXPECT_EQ(u.status().message().find("me:"), std::string::npos);
}

TEST(UrlTest, PercentEncodesAllButUnreserved) {
  EXPECT_EQ(PercentEncode("a b/c+d%e#f?g", true), "a%20b/c%2Bd%25e%23f%3Fg");
  EXPECT_EQ(PercentEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(PercentEncode("Az09-_.~", false), "Az09-_.~");
  EXPECT_EQ(PercentEncode("caf\xc3\xa9", true), "caf%C3%A9");
}

TEST(UrlTest, PercentDecodes) {
  std::string out;
  ASSERT_TRUE(PercentDecode("a%20b%2fc%C3%A9+", &out));
  EXPECT_EQ(out, "a b/c\xc3\xa9+");
  EXPECT_FALSE(PercentDecode("a%2", &out));
  EXPECT_FALSE(PercentDecode("a%zz", &out));
  EXPECT_FALSE(PercentDecode("%", &out));
}

}  // namespace
}  // namespace stoker
