// HitLog: the access that inserted a chunk is not a hit on it, one hit per
// chunk per window, and what is gathered reaches the index on Flush.
#include "cache/hit_log.h"

#include <gtest/gtest.h>

#include "cache/chunk_parts_test_util.h"

namespace stoker {
namespace {

using testing::ChunkParts;

TEST(HitLogTest, AHitSoonAfterTheInsertIsTheSameAccess) {
  ChunkParts p;
  const ChunkKey key{1, 1, 0};
  p.hits->RecordInsert(key, p.index->Tick());
  p.hits->RecordHit(key);
  EXPECT_EQ(p.hits->pending(), 0u);
  for (uint64_t i = 0; i <= HitLog::kSameAccessTicks; ++i) p.index->Tick();
  p.hits->RecordHit(key);
  EXPECT_EQ(p.hits->pending(), 1u) << "an access well after the insert is a hit";
}

TEST(HitLogTest, AChunkIsHitOncePerWindow) {
  ChunkParts p;
  const uint64_t before = p.index->clock();
  for (int i = 0; i < 5; ++i) p.hits->RecordHit({2, 1, 3});
  EXPECT_EQ(p.hits->pending(), 1u);
  EXPECT_EQ(p.index->clock(), before + 1) << "one tick for the window's hits on one chunk";
}

TEST(HitLogTest, AnInsertIsRememberedForTwoWindowsOnly) {
  ChunkParts p;
  const ChunkKey key{3, 1, 0};
  p.hits->RecordInsert(key, p.index->Tick());
  p.hits->Flush(/*new_window=*/true);
  p.hits->RecordHit(key);
  EXPECT_EQ(p.hits->pending(), 0u) << "still the previous window's insert";
  p.hits->Flush(/*new_window=*/true);
  p.hits->RecordHit(key);
  EXPECT_EQ(p.hits->pending(), 1u);
}

TEST(HitLogTest, FlushPromotesWhatWasHit) {
  ChunkParts p;
  auto v = p.Version(4, ChunkParts::kChunk);
  ASSERT_TRUE(p.writer->Store(*v, 0, ChunkParts::Bytes(testing::Pattern(ChunkParts::kChunk, 1))));
  const ChunkKey key{4, 1, 0};
  auto before = p.index->GetChunk(key);
  ASSERT_TRUE(before.ok() && before->has_value());
  for (uint64_t i = 0; i <= HitLog::kSameAccessTicks; ++i) p.index->Tick();
  p.hits->RecordHit(key);
  auto unflushed = p.index->GetChunk(key);
  EXPECT_EQ((*unflushed)->last_access, (*before)->last_access) << "no index write per hit";
  p.hits->Flush(/*new_window=*/false);
  EXPECT_EQ(p.hits->pending(), 0u);
  auto after = p.index->GetChunk(key);
  ASSERT_TRUE(after.ok() && after->has_value());
  EXPECT_GT((*after)->last_access, (*before)->last_access);
}

}  // namespace
}  // namespace stoker
