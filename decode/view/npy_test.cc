#include "decode/view/npy.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(NpyTest, HeaderIsNumpyV1) {
  std::string h = NpyHeader({375, 500, 3});
  EXPECT_EQ(0u, h.size() % 64);
  EXPECT_EQ(std::string("\x93NUMPY\x01\x00", 8), h.substr(0, 8));
  const size_t len = static_cast<uint8_t>(h[8]) | static_cast<uint8_t>(h[9]) << 8;
  EXPECT_EQ(h.size() - 10, len);
  const std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (375, 500, 3), }";
  EXPECT_EQ(dict, h.substr(10, dict.size()));
  EXPECT_EQ('\n', h.back());
  for (size_t i = 10 + dict.size(); i + 1 < h.size(); ++i) EXPECT_EQ(' ', h[i]) << i;
}

TEST(NpyTest, ShapesOfEveryRank) {
  EXPECT_NE(std::string::npos, NpyHeader({5}).find("'shape': (5,), }"));
  EXPECT_NE(std::string::npos, NpyHeader({4, 7}).find("'shape': (4, 7), }"));
  EXPECT_NE(std::string::npos, NpyHeader({}).find("'shape': (), }"));
}

TEST(NpyTest, AlignmentAtEveryLength) {
  // Dimensions of every digit count move the dict length through a full
  // alignment period, including the case numpy pads by a whole 64 bytes.
  for (uint64_t a = 1; a < 100000; a = a * 3 + 1) {
    for (uint64_t b = 1; b < 100000; b = b * 7 + 2) {
      std::string h = NpyHeader({a, b, 3});
      ASSERT_EQ(0u, h.size() % 64);
      auto info = ParseNpyHeader(h);
      ASSERT_TRUE(info.ok()) << info.status().ToString();
      EXPECT_EQ((std::vector<uint64_t>{a, b, 3}), info->shape);
      EXPECT_EQ(h.size(), info->data_offset);
      const size_t dict_end = h.find('}') + 1;
      EXPECT_GE(h.size() - dict_end, 2u);  // at least one space and the newline
      EXPECT_LE(h.size() - dict_end, 65u);
    }
  }
}

TEST(NpyTest, ParseRefusesOthers) {
  EXPECT_FALSE(ParseNpyHeader("").ok());
  EXPECT_FALSE(ParseNpyHeader("\x93NUMPY\x01\x00\x10").ok());
  std::string h = NpyHeader({2, 2});
  EXPECT_FALSE(ParseNpyHeader(h.substr(0, h.size() - 1)).ok());
  std::string f = h;
  f.replace(f.find("|u1"), 3, "<f4");
  EXPECT_FALSE(ParseNpyHeader(f).ok());
}

}  // namespace
}  // namespace stoker
