#include "util/duration.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(ParseDuration, PlainNumbersAreSeconds) {
  EXPECT_EQ(*ParseDuration("0"), 0u);
  EXPECT_EQ(*ParseDuration("60"), 60u);
  EXPECT_EQ(*ParseDuration("18446744073709551615"), UINT64_MAX);
}

TEST(ParseDuration, Units) {
  EXPECT_EQ(*ParseDuration("90s"), 90u);
  EXPECT_EQ(*ParseDuration("1m"), 60u);
  EXPECT_EQ(*ParseDuration("2h"), 7200u);
  EXPECT_EQ(*ParseDuration("1d"), 86400u);
  EXPECT_EQ(*ParseDuration("0h"), 0u);
}

TEST(ParseDuration, RejectsGarbageWithMessageNamingTheText) {
  for (const char* bad : {"", "-5", "1.5h", "m", "5mm", "1m30s", "1 m", "5ms", "1H", "abc", "s"}) {
    auto r = ParseDuration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), EINVAL);
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(ParseDuration, RejectsOverflow) {
  EXPECT_FALSE(ParseDuration("18446744073709551616").ok());
  EXPECT_FALSE(ParseDuration("213503982334602d").ok());
  EXPECT_EQ(*ParseDuration("213503982334601d"), 213503982334601ull * 86400);
}

}  // namespace
}  // namespace stoker
