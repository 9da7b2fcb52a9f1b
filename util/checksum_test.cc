#include "util/checksum.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <string>

namespace stoker {
namespace {

// Checksums are stored in the index: whichever code computes them, a cache
// written by an earlier build must still verify. XXH3_64bits is the scalar /
// SSE2 entry point every earlier build used.
TEST(ChunkChecksum, EqualsPlainXxh3ForEveryLengthClassAndAlignment) {
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
  for (size_t len : {0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 4095, 65536, 1 << 20,
                     (1 << 20) + 13, 3 << 20}) {
    for (size_t shift : {0, 1, 7}) {
      if (shift + len > data.size()) continue;
      EXPECT_EQ(ChunkChecksum(data.data() + shift, len), XXH3_64bits(data.data() + shift, len))
          << "length " << len << ", shift " << shift;
    }
  }
}

TEST(ChunkChecksum, KnownValue) {
  EXPECT_EQ(ChunkChecksum("", 0), 0x2D06800538D394C2ull);  // XXH3-64 of no bytes, seed 0
}

}  // namespace
}  // namespace stoker
