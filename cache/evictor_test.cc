// Evictor over a real index and real data files: kicked by a write that
// takes the cache above its high watermark, it evicts back under it and
// unlinks the files it emptied; a queued drop takes a version's chunks and
// file away.
#include "cache/evictor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "cache/chunk_parts_test_util.h"

namespace stoker {
namespace {

using testing::ChunkParts;
using testing::Pattern;

constexpr uint64_t kChunk = ChunkParts::kChunk;

template <typename F>
bool WaitFor(F done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// A cache of the given number of chunks and watermarks.
ChunkParts::Config Bounded(uint64_t chunks, double high, double low) {
  ChunkParts::Config c;
  c.capacity = chunks * kChunk;
  c.high = high;
  c.low = low;
  return c;
}

// Stores versions first..last of one chunk each (so that each victim
// empties its file), as far as the quota lets them in.
void StoreOneChunkVersions(ChunkParts& p, uint64_t first, uint64_t last) {
  for (uint64_t id = first; id <= last; ++id) {
    auto v = p.Version(id, kChunk);
    p.writer->Store(*v, 0, ChunkParts::Bytes(Pattern(kChunk, static_cast<uint32_t>(id))));
  }
}

TEST(EvictorTest, AWriteAboveTheHighWatermarkGetsTheCacheBackUnderIt) {
  const ChunkParts::Config c = Bounded(20, 0.6, 0.3);
  ChunkParts p(c);
  p.StartEvictor();
  StoreOneChunkVersions(p, 1, 16);
  ASSERT_TRUE(WaitFor([&] { return !p.quota->AboveHigh(); }))
      << "committed " << p.quota->committed() << " of " << c.capacity;
  EXPECT_GT(p.counters.evicted_chunks.load(), 0u);
  EXPECT_EQ(p.index->meta().chunks * AllocatedBytes(kChunk), p.quota->committed())
      << "the quota follows the index";
  uint64_t files = 0;
  for (uint64_t id = 1; id <= 16; ++id) {
    const bool has = p.HasRecord({id, 1, 0});
    EXPECT_EQ(p.FileExists({id, 1}), has) << "version " << id;
    files += has;
  }
  EXPECT_EQ(files, p.index->meta().chunks);
}

TEST(EvictorTest, AQueuedDropTakesAVersionsChunksAndFile) {
  ChunkParts p;
  p.StartEvictor();
  auto v = p.Version(1, 3 * kChunk);
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        p.writer->Store(*v, i, ChunkParts::Bytes(Pattern(kChunk, static_cast<uint32_t>(i)))));
  }
  auto keep = p.Version(2, kChunk);
  ASSERT_TRUE(p.writer->Store(*keep, 0, ChunkParts::Bytes(Pattern(kChunk, 9))));
  v->superseded = true;
  p.evictor->QueueDrop(v->key);
  ASSERT_TRUE(WaitFor([&] { return p.evictor->pending_drops() == 0; }));
  for (uint64_t i = 0; i < 3; ++i) EXPECT_FALSE(p.HasRecord({1, 1, i}));
  EXPECT_FALSE(p.FileExists(v->key));
  EXPECT_TRUE(p.HasRecord({2, 1, 0}));
  EXPECT_EQ(p.quota->committed(), AllocatedBytes(kChunk));
}

TEST(EvictorTest, AChunkAReaderHasPinnedIsNotEvicted) {
  ChunkParts p(Bounded(10, 0.5, 0.2));
  auto pinned = p.Version(1, kChunk);
  ASSERT_TRUE(p.writer->Store(*pinned, 0, ChunkParts::Bytes(Pattern(kChunk, 1))));
  bool verified = false;
  ASSERT_TRUE(p.resident.TryPin({1, 1, 0}, &verified));
  p.StartEvictor();
  StoreOneChunkVersions(p, 2, 9);
  ASSERT_TRUE(WaitFor([&] { return p.counters.evicted_chunks.load() > 0; }));
  p.evictor->Stop();
  EXPECT_TRUE(p.HasRecord({1, 1, 0}));
  p.resident.Unpin({1, 1, 0});
}

}  // namespace
}  // namespace stoker
