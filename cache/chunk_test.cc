// Chunk arithmetic: counts, lengths, spans, allocation, at and around the
// chunk boundaries.
#include "cache/chunk.h"

#include <gtest/gtest.h>

#include <unordered_set>

namespace stoker {
namespace {

constexpr uint64_t kCs = 1 << 20;

TEST(ChunkTest, CountAndLengthAtBoundaries) {
  EXPECT_EQ(ChunkCount(0, kCs), 0u);
  EXPECT_EQ(ChunkCount(1, kCs), 1u);
  EXPECT_EQ(ChunkCount(kCs - 1, kCs), 1u);
  EXPECT_EQ(ChunkCount(kCs, kCs), 1u);
  EXPECT_EQ(ChunkCount(kCs + 1, kCs), 2u);
  EXPECT_EQ(ChunkLength(kCs + 1, kCs, 0), kCs);
  EXPECT_EQ(ChunkLength(kCs + 1, kCs, 1), 1u);
  EXPECT_EQ(ChunkLength(kCs + 1, kCs, 2), 0u);
  EXPECT_EQ(ChunkLength(kCs, kCs, 1), 0u);
  EXPECT_EQ(ChunkLength(0, kCs, 0), 0u);
  EXPECT_EQ(ChunkOffset(kCs, 3), 3 * kCs);
}

TEST(ChunkTest, AllocatedBytesRoundUpToBlocks) {
  EXPECT_EQ(AllocatedBytes(1), 4096u);
  EXPECT_EQ(AllocatedBytes(4096), 4096u);
  EXPECT_EQ(AllocatedBytes(4097), 8192u);
  EXPECT_EQ(AllocatedBytes(kCs), kCs);
}

TEST(ChunkTest, SpanClipsToSize) {
  ChunkSpan s = SpanOf(10 * kCs, kCs, kCs - 1, 2);
  EXPECT_EQ(s.first, 0u);
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.len, 2u);
  s = SpanOf(10 * kCs, kCs, kCs, kCs);
  EXPECT_EQ(s.first, 1u);
  EXPECT_EQ(s.count, 1u);
  s = SpanOf(100, kCs, 90, 1000);
  EXPECT_EQ(s.len, 10u);
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(SpanOf(100, kCs, 100, 10).count, 0u);  // at EOF
  EXPECT_EQ(SpanOf(100, kCs, 200, 10).count, 0u);  // past EOF
  EXPECT_EQ(SpanOf(100, kCs, 0, 0).count, 0u);
  s = SpanOf(3 * kCs + 5, kCs, 0, UINT64_MAX);
  EXPECT_EQ(s.len, 3 * kCs + 5);
  EXPECT_EQ(s.count, 4u);
}

TEST(ChunkTest, KeysHashAndOrderByVersionFirst) {
  ChunkKey a{1, 1, 5}, b{1, 2, 0}, c{2, 1, 0};
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  std::unordered_set<ChunkKey, ChunkKeyHash> set{a, b, c, ChunkKey{1, 1, 5}};
  EXPECT_EQ(set.size(), 3u);
  EXPECT_NE(ChunkKeyHash()(ChunkKey{1, 1, 0}), ChunkKeyHash()(ChunkKey{1, 2, 0}));
}

}  // namespace
}  // namespace stoker
