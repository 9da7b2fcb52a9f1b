#include "decode/tfrecord/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace stoker {
namespace {

// The implementations under test, so each vector checks every one this CPU has.
std::vector<uint32_t (*)(uint32_t, const void*, size_t)> Impls() {
  std::vector<uint32_t (*)(uint32_t, const void*, size_t)> v = {&Crc32cExtend,
                                                                &crc32c_internal::ExtendPortable};
  if (crc32c_internal::HardwareAvailable()) v.push_back(&crc32c_internal::ExtendHardware);
  return v;
}

uint32_t Crc(uint32_t (*f)(uint32_t, const void*, size_t), const std::vector<uint8_t>& v) {
  return f(0, v.data(), v.size());
}

TEST(Crc32cTest, CheckValue) {
  for (auto f : Impls()) EXPECT_EQ(0xE3069283u, f(0, "123456789", 9));
}

TEST(Crc32cTest, Rfc3720Vectors) {
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<uint8_t>(i);
    dec[i] = static_cast<uint8_t>(31 - i);
  }
  // An iSCSI read command PDU (RFC 3720 B.4).
  std::vector<uint8_t> pdu = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                              0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
                              0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
                              0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                              0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  for (auto f : Impls()) {
    EXPECT_EQ(0x8A9136AAu, Crc(f, zeros));
    EXPECT_EQ(0x62A8AB43u, Crc(f, ones));
    EXPECT_EQ(0x46DD794Eu, Crc(f, inc));
    EXPECT_EQ(0x113FDB5Cu, Crc(f, dec));
    EXPECT_EQ(0xD9963A56u, Crc(f, pdu));
  }
}

TEST(Crc32cTest, EmptyIsZero) {
  for (auto f : Impls()) EXPECT_EQ(0u, f(0, "", 0));
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  std::string s = "hello world, this is a longer string to split at every point";
  uint32_t whole = Crc32c(s.data(), s.size());
  for (auto f : Impls()) {
    for (size_t cut = 0; cut <= s.size(); ++cut) {
      EXPECT_EQ(whole, f(f(0, s.data(), cut), s.data() + cut, s.size() - cut)) << cut;
    }
  }
}

TEST(Crc32cTest, MaskRoundTripAndDiffers) {
  std::mt19937 rng(7);
  for (int i = 0; i < 10000; ++i) {
    uint32_t c = rng();
    EXPECT_EQ(c, UnmaskCrc(MaskCrc(c)));
    EXPECT_NE(c, MaskCrc(c));
    EXPECT_NE(MaskCrc(c), MaskCrc(MaskCrc(c)));
  }
  uint32_t c = Crc32c("foo", 3);
  EXPECT_EQ(c, UnmaskCrc(MaskCrc(c)));
}

TEST(Crc32cTest, HardwareAgreesWithTableAtAllAlignments) {
  if (!crc32c_internal::HardwareAvailable()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  std::mt19937 rng(42);
  std::vector<uint8_t> buf(4096 + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t align = 0; align < 16; ++align) {
    for (size_t len : {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 100, 1000, 4096}) {
      const uint8_t* p = buf.data() + align;
      uint32_t seed = rng();
      EXPECT_EQ(crc32c_internal::ExtendPortable(seed, p, len),
                crc32c_internal::ExtendHardware(seed, p, len))
          << "align " << align << " len " << len;
    }
  }
}

// Lengths on and around the three-stream block sizes and their multiples,
// where the streams are joined, at several alignments and seeds.
TEST(Crc32cTest, HardwareAgreesWithTableAroundStreamBlocks) {
  if (!crc32c_internal::HardwareAvailable()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  using crc32c_internal::kLongBlock;
  using crc32c_internal::kShortBlock;
  std::mt19937 rng(43);
  std::vector<uint8_t> buf(3 * 3 * kLongBlock + 3 * 3 * kShortBlock + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lens;
  for (size_t base : {3 * kShortBlock, 2 * 3 * kShortBlock, 3 * kLongBlock, 2 * 3 * kLongBlock,
                      3 * kLongBlock + 3 * kShortBlock, 2 * 3 * kLongBlock + 2 * 3 * kShortBlock,
                      3 * 3 * kLongBlock + 3 * 3 * kShortBlock}) {
    for (int d : {-9, -8, -7, -1, 0, 1, 7, 8, 9}) lens.push_back(base + d);
  }
  for (size_t align : {0, 1, 7, 8, 13}) {
    for (size_t len : lens) {
      ASSERT_LE(align + len, buf.size());
      const uint8_t* p = buf.data() + align;
      uint32_t seed = rng();
      EXPECT_EQ(crc32c_internal::ExtendPortable(seed, p, len),
                crc32c_internal::ExtendHardware(seed, p, len))
          << "align " << align << " len " << len;
    }
  }
  // A single flipped bit in any one stream changes the result.
  const size_t len = 3 * kLongBlock;
  const uint32_t whole = crc32c_internal::ExtendHardware(0, buf.data(), len);
  for (size_t at : {size_t{0}, kLongBlock + 5, 3 * kLongBlock - 1}) {
    buf[at] ^= 1;
    EXPECT_NE(whole, crc32c_internal::ExtendHardware(0, buf.data(), len)) << at;
    EXPECT_EQ(crc32c_internal::ExtendPortable(0, buf.data(), len),
              crc32c_internal::ExtendHardware(0, buf.data(), len))
        << at;
    buf[at] ^= 1;
  }
}

}  // namespace
}  // namespace stoker
