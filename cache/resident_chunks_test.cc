// ResidentChunks: pins, eviction latches and the verified bit.
#include "cache/resident_chunks.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

void PinAndVerify(ResidentChunks& r, const ChunkKey& k) {
  bool verified = true;
  ASSERT_TRUE(r.TryPin(k, &verified));
  r.MarkVerified(k);
  r.Unpin(k);
}

bool PinnedVerified(ResidentChunks& r, const ChunkKey& k) {
  bool verified = false;
  EXPECT_TRUE(r.TryPin(k, &verified));
  r.Unpin(k);
  return verified;
}

// A victim the evictor latched and then left in place is as verified as it
// was: its next reader serves it without reading it back to check it.
TEST(ResidentChunksTest, AChunkUnlatchedInPlaceIsVerifiedAgain) {
  ResidentChunks r;
  const ChunkKey k{1, 1, 0};
  PinAndVerify(r, k);
  ASSERT_TRUE(r.TryLatchForEvict(k));
  bool verified = true;
  EXPECT_FALSE(r.TryPin(k, &verified));  // on its way out, maybe
  EXPECT_FALSE(r.TryLatchForEvict(k));
  r.Unlatch(k);
  EXPECT_TRUE(PinnedVerified(r, k));

  // Never verified: unlatching does not make it so.
  const ChunkKey fresh{1, 1, 1};
  ASSERT_TRUE(r.TryLatchForEvict(fresh));
  r.Unlatch(fresh);
  EXPECT_FALSE(PinnedVerified(r, fresh));
}

TEST(ResidentChunksTest, AChunkReleasedAfterEvictionIsNotVerified) {
  ResidentChunks r;
  const ChunkKey k{1, 1, 0};
  PinAndVerify(r, k);
  ASSERT_TRUE(r.TryLatchForEvict(k));
  r.ReleaseLatch(k);
  EXPECT_FALSE(PinnedVerified(r, k));
  // A later latch left in place does not bring back the old bit either.
  ASSERT_TRUE(r.TryLatchForEvict(k));
  r.Unlatch(k);
  EXPECT_FALSE(PinnedVerified(r, k));
  EXPECT_EQ(r.size(), 0u);
}

// A version dropped while one of its chunks was latched: the chunk's old
// verification does not come back with the unlatch.
TEST(ResidentChunksTest, AVersionForgottenWhileLatchedStaysUnverified) {
  ResidentChunks r;
  const ChunkKey k{7, 3, 2};
  PinAndVerify(r, k);
  ASSERT_TRUE(r.TryLatchForEvict(k));
  r.ForgetVersion(k.version_key());
  r.Unlatch(k);
  EXPECT_FALSE(PinnedVerified(r, k));
  EXPECT_EQ(r.size(), 0u);
}

TEST(ResidentChunksTest, APinnedChunkCannotBeLatched) {
  ResidentChunks r;
  const ChunkKey k{1, 1, 0};
  bool verified = false;
  ASSERT_TRUE(r.TryPin(k, &verified));
  EXPECT_FALSE(r.TryLatchForEvict(k));
  EXPECT_TRUE(r.pinned(k));
  r.Unpin(k);
  EXPECT_TRUE(r.TryLatchForEvict(k));
  r.ReleaseLatch(k);
}

}  // namespace
}  // namespace stoker

namespace stoker {
namespace {

// Epoch after epoch over more chunks than the bound: memory stays bounded,
// and what a reader pins keeps its bit.
TEST(ResidentChunksTest, VerifiedBitsAreBoundedAndPinnedOnesKept) {
  ResidentChunks r(/*max_verified=*/640);  // 10 a shard
  const ChunkKey held{1, 1, 0};
  bool verified = false;
  ASSERT_TRUE(r.TryPin(held, &verified));
  r.MarkVerified(held);
  for (uint64_t obj = 2; obj < 5000; ++obj) PinAndVerify(r, ChunkKey{obj, 1, 0});
  EXPECT_LE(r.verified(), 640u + 64u);
  EXPECT_GE(r.verified(), 320u) << "far more forgotten than needed";
  EXPECT_LE(r.size(), 640u + 64u + 1u) << "forgotten bits must not leave entries behind";
  EXPECT_TRUE(r.pinned(held));
  r.Unpin(held);
  EXPECT_TRUE(PinnedVerified(r, held)) << "a pinned chunk lost its verified bit";
  // A forgotten one is simply unverified: checked again by its next reader.
  size_t unverified = 0;
  for (uint64_t obj = 2; obj < 5000; ++obj) unverified += !PinnedVerified(r, ChunkKey{obj, 1, 0});
  EXPECT_GE(unverified, 5000u - 2u - 704u);
}

}  // namespace
}  // namespace stoker
