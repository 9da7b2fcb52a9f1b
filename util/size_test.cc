#include "util/size.h"

#include <gtest/gtest.h>

#include "util/checksum.h"

namespace stoker {
namespace {

TEST(ParseSize, PlainBytes) {
  EXPECT_EQ(*ParseSize("0"), 0u);
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("18446744073709551615"), UINT64_MAX);
}

TEST(ParseSize, BinarySuffixesAnyCase) {
  EXPECT_EQ(*ParseSize("512M"), 512ull << 20);
  EXPECT_EQ(*ParseSize("200G"), 200ull << 30);
  EXPECT_EQ(*ParseSize("4k"), 4096u);
  EXPECT_EQ(*ParseSize("4KiB"), 4096u);
  EXPECT_EQ(*ParseSize("4MB"), 4ull << 20);
  EXPECT_EQ(*ParseSize("1T"), 1ull << 40);
  EXPECT_EQ(*ParseSize("10B"), 10u);
  EXPECT_EQ(*ParseSize("1.5G"), 3ull << 29);
}

TEST(ParseSize, RejectsGarbageWithMessageNamingTheText) {
  for (const char* bad : {"", "-5", "12Q", "M", "1..2G", "1 G", "abc", "5GG", ".", "1e9"}) {
    auto r = ParseSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), EINVAL);
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(ParseSize, RejectsOverflow) {
  EXPECT_FALSE(ParseSize("18446744073709551616").ok());
  EXPECT_FALSE(ParseSize("17179869184G").ok());
  EXPECT_FALSE(ParseSize("99999999999999999999999").ok());
  EXPECT_FALSE(ParseSize("16E").ok());
}

TEST(FormatSize, HumanUnits) {
  EXPECT_EQ(FormatSize(0), "0 B");
  EXPECT_EQ(FormatSize(1023), "1023 B");
  EXPECT_EQ(FormatSize(1024), "1.00 KiB");
  EXPECT_EQ(FormatSize(3ull << 29), "1.50 GiB");
  EXPECT_EQ(FormatSize(200ull << 30), "200 GiB");
}

TEST(ChunkChecksum, DetectsSingleBitFlip) {
  std::string data(1 << 20, 'x');
  uint64_t a = ChunkChecksum(data.data(), data.size());
  data[12345] ^= 0x01;
  EXPECT_NE(a, ChunkChecksum(data.data(), data.size()));
  EXPECT_EQ(ChunkChecksum("", 0), ChunkChecksum("", 0));
}

}  // namespace
}  // namespace stoker
