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
