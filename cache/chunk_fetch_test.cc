// ChunkFetch over the cache's real parts and a real local origin (behind
// test controls): a miss is one origin read per run, stored; a second fetch
// of a chunk being fetched follows the first (one origin read) and asks the
// origin to expedite it for whom it waits; stores put off hold the bytes for
// the next fetch until they are done; a prefetch gives up a chunk its reader
// has passed.
#include "cache/chunk_fetch.h"

#include <gtest/gtest.h>

#include <thread>

#include "cache/chunk_parts_test_util.h"
#include "cache/object_cache_test_origin.h"
#include "util/eventually.h"

namespace stoker {
namespace {

using testing::ChunkParts;
using testing::ControlledOrigin;
using testing::Pattern;
using testing::ScratchDir;
using testing::WriteFile;

constexpr uint64_t kChunk = ChunkParts::kChunk;

using testing::Eventually;

class ChunkFetchTest : public ::testing::Test {
 protected:
  // path written with size bytes, as a version the cache would have made.
  std::shared_ptr<ObjectVersion> Write(const std::string& path, uint64_t size, uint64_t id) {
    data_ = Pattern(size, static_cast<uint32_t>(id));
    WriteFile(dir_.Sub(path), data_);
    return testing::VersionAt(parts_, *origin_, path, id);
  }
  std::string Chunk(uint64_t idx) const { return data_.substr(idx * kChunk, kChunk); }
  static std::string Str(const ChunkBytes& b) { return std::string(b.data.get(), b.len); }

  ScratchDir dir_{"chunk-fetch"};
  std::shared_ptr<ControlledOrigin> origin_ =
      std::make_shared<ControlledOrigin>(testing::LocalOriginAt(dir_.path()));
  std::string data_;
  ChunkParts parts_;
  OriginReader origin_reader_{
      OriginReader::Parts{kChunk, parts_.index.get(), origin_.get(), &parts_.counters}};
  std::shared_ptr<RecentBytes> recent_ =
      std::make_shared<RecentBytes>(RecentBytes::Limits{64 * kChunk, 32 * kChunk, 16 * kChunk});
  ChunkFetch fetch_{
      ChunkFetch::Parts{kChunk, &origin_reader_, parts_.writer.get(), parts_.reader.get(),
                        origin_.get(), &parts_.counters, recent_.get()},
      8};
};

TEST_F(ChunkFetchTest, AMissIsOneOriginReadPerRunAndIsStored) {
  auto v = Write("f", 3 * kChunk + 7, 1);
  OriginHandle handle(origin_, "f");
  std::vector<ChunkBytes> out;
  FetchTally tally;
  ChunkFetch::Request r;
  r.urgency = Urgency::kPrefetch;
  ASSERT_TRUE(fetch_.Fetch(v, handle, {0, 1, 3}, r, &out, &tally).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Str(out[0]), Chunk(0));
  EXPECT_EQ(Str(out[1]), Chunk(1));
  EXPECT_EQ(Str(out[2]), Chunk(3));
  EXPECT_EQ(tally.chunks, 3u);
  EXPECT_EQ(tally.bytes, 2 * kChunk + 7);
  EXPECT_EQ(parts_.counters.origin_reads.load(), 2u) << "runs {0,1} and {3}";
  EXPECT_EQ(origin_->last_read_for(), Urgency::kPrefetch);
  for (uint64_t idx : {0, 1, 3}) {
    EXPECT_EQ(parts_.StoredBytes(ChunkKey{1, 1, idx}), Chunk(idx)) << idx;
  }
  EXPECT_FALSE(parts_.HasRecord(ChunkKey{1, 1, 2}));
}

TEST_F(ChunkFetchTest, AFollowerWaitsForTheLeaderAndExpeditesItForItsReader) {
  auto v = Write("f", 2 * kChunk, 2);
  OriginHandle handle(origin_, "f");
  origin_->CloseGate();
  std::vector<ChunkBytes> warm_out;
  std::vector<ChunkBytes> reader_out;
  Status warm_st;
  Status reader_st;
  std::thread warm([&] {
    ChunkFetch::Request r;
    r.urgency = Urgency::kWarm;
    FetchTally tally;
    warm_st = fetch_.Fetch(v, handle, {0, 1}, r, &warm_out, &tally);
  });
  ASSERT_TRUE(Eventually([&] { return origin_->waiting() == 1; })) << "the warm's read began";
  std::thread reader([&] {
    ChunkFetch::Request r;
    r.urgency = Urgency::kReader;
    FetchTally tally;
    reader_st = fetch_.Fetch(v, handle, {1}, r, &reader_out, &tally);
  });
  EXPECT_TRUE(Eventually([&] { return origin_->expedited() == 1; }))
      << "the reader did not ask for the warm's work to be moved up";
  EXPECT_EQ(origin_->last_expedite(), Urgency::kReader);
  origin_->OpenGate();
  warm.join();
  reader.join();
  ASSERT_TRUE(warm_st.ok()) << warm_st.message();
  ASSERT_TRUE(reader_st.ok()) << reader_st.message();
  ASSERT_EQ(reader_out.size(), 1u);
  EXPECT_EQ(Str(reader_out[0]), Chunk(1));
  EXPECT_EQ(Str(warm_out[1]), Chunk(1));
  EXPECT_EQ(parts_.counters.origin_reads.load(), 1u) << "the reader followed, it did not read";
  EXPECT_EQ(parts_.counters.collapsed_misses.load(), 1u);
  EXPECT_EQ(origin_->last_read_for(), Urgency::kWarm);
}

TEST_F(ChunkFetchTest, StoresPutOffHoldTheBytesForTheNextFetchUntilDone) {
  auto v = Write("f", 2 * kChunk, 3);
  OriginHandle handle(origin_, "f");
  {
    ChunkFetch::DeferredStores defer(&fetch_, v);
    ChunkFetch::Request r;
    r.defer = &defer;
    std::vector<ChunkBytes> out;
    FetchTally tally;
    ASSERT_TRUE(fetch_.Fetch(v, handle, {0, 1}, r, &out, &tally).ok());
    EXPECT_FALSE(defer.empty());
    EXPECT_FALSE(parts_.HasRecord(ChunkKey{3, 1, 0})) << "stored before its reader was answered";
    EXPECT_EQ(fetch_.unstored_bytes(), 2 * kChunk);
    // Another fetch meanwhile: the held bytes, not a second origin read.
    std::vector<ChunkBytes> again;
    ASSERT_TRUE(fetch_.Fetch(v, handle, {1}, ChunkFetch::Request{}, &again, &tally).ok());
    EXPECT_EQ(Str(again[0]), Chunk(1));
    EXPECT_EQ(parts_.counters.origin_reads.load(), 1u);
  }
  EXPECT_EQ(fetch_.unstored_bytes(), 0u);
  EXPECT_EQ(parts_.StoredBytes(ChunkKey{3, 1, 0}), Chunk(0));
  EXPECT_EQ(parts_.StoredBytes(ChunkKey{3, 1, 1}), Chunk(1));
}

TEST_F(ChunkFetchTest, APrefetchGivesUpAChunkItsReaderHasPassed) {
  auto v = Write("f", 3 * kChunk, 4);
  OriginHandle handle(origin_, "f");
  Readahead readahead(recent_);
  readahead.DropBefore(2);  // the reader is at chunk 2
  ChunkFetch::Request r;
  r.urgency = Urgency::kPrefetch;
  r.readahead = &readahead;
  r.ahead = true;
  std::vector<ChunkBytes> out;
  FetchTally tally;
  ASSERT_TRUE(fetch_.Fetch(v, handle, {1, 2}, r, &out, &tally).ok());
  EXPECT_EQ(out[0].len, 0u) << "chunk 1 was given up";
  EXPECT_EQ(Str(out[1]), Chunk(2));
  EXPECT_EQ(tally.chunks, 1u);
  EXPECT_FALSE(parts_.HasRecord(ChunkKey{4, 1, 1}));
  EXPECT_EQ(Str(*readahead.Get(2)), Chunk(2)) << "held for the reader";
}

}  // namespace
}  // namespace stoker
