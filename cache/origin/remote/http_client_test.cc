// The pure parts of HttpClient: retry policy and error mapping. Requests
// against real servers are in tests/integration (nginx, moto).
#include "cache/origin/remote/http_client.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(RetryPolicyTest, RetriesServerTroubleOnly) {
  for (long s : {500L, 502L, 503L, 504L, 429L, 408L}) EXPECT_TRUE(RetryPolicy::RetryableStatus(s));
  for (long s : {200L, 206L, 301L, 400L, 401L, 403L, 404L, 412L, 416L}) {
    EXPECT_FALSE(RetryPolicy::RetryableStatus(s)) << s;
  }
}

TEST(RetryPolicyTest, ExponentialBackoffWithFullJitter) {
  RetryPolicy p;
  p.base_delay_ms = 100;
  p.max_delay_ms = 1000;
  EXPECT_EQ(p.DelayMs(0, 0.0), 0u);
  EXPECT_EQ(p.DelayMs(0, 0.5), 50u);
  EXPECT_EQ(p.DelayMs(1, 0.5), 100u);
  EXPECT_EQ(p.DelayMs(2, 0.5), 200u);
  EXPECT_EQ(p.DelayMs(3, 0.999), 799u);
  EXPECT_EQ(p.DelayMs(4, 0.5), 500u);   // capped at max
  EXPECT_EQ(p.DelayMs(60, 0.5), 500u);  // no overflow
}

TEST(HttpErrnoTest, StatusToErrno) {
  EXPECT_EQ(ErrnoForHttpStatus(404), ENOENT);
  EXPECT_EQ(ErrnoForHttpStatus(410), ENOENT);
  EXPECT_EQ(ErrnoForHttpStatus(403), EACCES);
  EXPECT_EQ(ErrnoForHttpStatus(401), EACCES);
  EXPECT_EQ(ErrnoForHttpStatus(412), ESTALE);
  EXPECT_EQ(ErrnoForHttpStatus(500), EIO);
  EXPECT_EQ(ErrnoForHttpStatus(503), EIO);
}

TEST(HttpClientTest, UnreachableIsUnavailableAndBounded) {
  HttpClient::Options o;
  o.retry.max_retries = 2;
  o.retry.base_delay_ms = 1;
  HttpClient client(o);
  HttpRequest req;
  req.url = "http://127.0.0.1:1/x";  // nothing listens on port 1
  Result<HttpResponse> r = client.Perform(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ECONNREFUSED);
  EXPECT_NE(r.status().message().find("after 3 attempts"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace stoker
