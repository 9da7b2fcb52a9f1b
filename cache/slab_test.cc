// Slot classes, places and slab file names (cache/slab.h, ChunkStore).
#include "cache/slab.h"

#include <gtest/gtest.h>

#include "cache/chunk_store.h"

namespace stoker {
namespace {

TEST(SlabTest, ClassesHoldTheirChunkAndWasteAtMostAnEighth) {
  EXPECT_EQ(SlotClassFor(1), 1u);
  EXPECT_EQ(SlotClassFor(4096), 1u);
  EXPECT_EQ(SlotClassFor(4097), 2u);
  EXPECT_EQ(SlotClassFor(64 << 10), 16u);
  EXPECT_EQ(SlotClassFor(100 << 10), 26u);  // 100 KiB -> 104 KiB slots
  EXPECT_EQ(SlotClassFor(1 << 20), 256u);
  for (uint64_t len = 1; len <= (4u << 20); len += 1531) {
    const uint64_t slot = SlotBytes(SlotClassFor(len));
    ASSERT_GE(slot, len);
    // The slot beyond the chunk's blocks is never written (a hole).
    const uint64_t blocks = AllocatedBytes(len);
    if (blocks > (64u << 10)) {
      ASSERT_LE(slot - blocks, blocks / 8) << len;
    } else {
      ASSERT_EQ(slot, blocks) << len;
    }
  }
}

TEST(SlabTest, APlaceIsTheSlotOrTheChunksOffsetInItsVersionsFile) {
  const ChunkKey key{7, 3, 2};
  ChunkPlace own = PlaceOf(key, SlotRef{}, 65536);
  EXPECT_EQ(own.file, key.version_key());
  EXPECT_EQ(own.off, 2u * 65536);
  EXPECT_EQ(own.span, 65536u);
  ChunkPlace slot = PlaceOf(key, SlotRef{26, 5, 3}, 65536);
  EXPECT_TRUE(IsSlabFileKey(slot.file));
  EXPECT_FALSE(IsSlabFileKey(own.file));
  EXPECT_EQ(slot.off, 3u * 26 * 4096);
  EXPECT_EQ(slot.span, 26u * 4096);
}

TEST(SlabTest, SlabFileNamesRoundTripAndRejectOthers) {
  VersionKey v = SlabFileKey(26, 0);
  EXPECT_EQ(ChunkStore::RelativePath(v), "slab/106496-0");
  EXPECT_EQ(ChunkStore::ParseSlabFileName("106496-0"), v);
  EXPECT_EQ(ChunkStore::ParseSlabFileName("4096-4294967295"), SlabFileKey(1, 0xffffffffu));
  for (const char* bad :
       {"106496-", "-1", "0-1", "4095-1", "04096-1", "4096-01", "4096-4294967296", "x-1", "4096"}) {
    EXPECT_FALSE(ChunkStore::ParseSlabFileName(bad)) << bad;
  }
  // An object's file name is never a slab's, and the other way round.
  EXPECT_FALSE(ChunkStore::ParseFileName("0-5"));
}

}  // namespace
}  // namespace stoker
