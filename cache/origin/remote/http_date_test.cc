#include "cache/origin/remote/http_date.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(HttpDateTest, ImfFixdate) {
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
  EXPECT_EQ(ParseHttpDate("06 Nov 1994 08:49:37 GMT"), 784111777);
  EXPECT_EQ(ParseHttpDate("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
  EXPECT_FALSE(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 PST"));
  EXPECT_FALSE(ParseHttpDate("Sun, 06 Foo 1994 08:49:37 GMT"));
  EXPECT_FALSE(ParseHttpDate("Sun, 6 Nov 1994 08:49:37 GMT"));
  EXPECT_FALSE(ParseHttpDate(""));
}

TEST(HttpDateTest, Iso8601AgreesWithHttpDate) {
  EXPECT_EQ(ParseIso8601("1994-11-06T08:49:37.000Z"), 784111777);
  EXPECT_EQ(ParseIso8601("1994-11-06T08:49:37Z"), 784111777);
  EXPECT_EQ(ParseIso8601("1994-11-06T08:49:37.123456+00:00"), 784111777);
  EXPECT_FALSE(ParseIso8601("1994-11-06 08:49:37Z"));
  EXPECT_FALSE(ParseIso8601("1994-11-06T08:49:37"));
  EXPECT_FALSE(ParseIso8601("1994-13-06T08:49:37Z"));
}

TEST(HttpDateTest, AutoindexDate) {
  EXPECT_EQ(ParseAutoindexDate("06-Nov-1994 08:49"), 784111740);
  EXPECT_FALSE(ParseAutoindexDate("06-Nov-1994 08:49:37"));
  EXPECT_FALSE(ParseAutoindexDate("6-Nov-1994 08:49"));
}

}  // namespace
}  // namespace stoker
