// ReadPath over the cache's real parts and a real local origin: a cached
// chunk is served as a range of its data file and a missing one fetched
// (and stored once the reply goes); a stored chunk this process has not
// verified is checked once, and a bad one fetched again; a superseded
// version reads as ESTALE and a view's bad range as EIO.
#include "cache/read_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "cache/chunk_parts_test_util.h"
#include "cache/object_cache_test_origin.h"

namespace stoker {
namespace {

using testing::ChunkParts;
using testing::ControlledOrigin;
using testing::FetchParts;
using testing::Pattern;
using testing::ScratchDir;
using testing::WriteFile;

constexpr uint64_t kChunk = ChunkParts::kChunk;
constexpr uint64_t kSize = 2 * kChunk + 10;  // 3 chunks, the last one short

class ReadPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_.Sub("f"), data_);
    v_ = testing::VersionAt(parts_, *origin_, "f", 1);
    f_ = testing::OpenOf(v_, origin_);
  }
  void Store(uint64_t idx) {
    ASSERT_TRUE(
        parts_.writer->Store(*v_, idx, ChunkParts::Bytes(data_.substr(idx * kChunk, kChunk))));
  }
  // The bytes a reply's segments hold, in order.
  static std::string BytesOf(const ReadReply& reply) {
    std::string out;
    for (const ReadSegment& s : reply.segments()) {
      if (s.mem != nullptr) {
        out.append(s.mem, s.len);
        continue;
      }
      std::string part(s.len, '\0');
      STOKER_CHECK(pread(s.fd, part.data(), s.len, s.off) == static_cast<ssize_t>(s.len), "pread");
      out += part;
    }
    return out;
  }

  ScratchDir dir_{"read-path"};
  std::shared_ptr<ControlledOrigin> origin_ =
      std::make_shared<ControlledOrigin>(testing::LocalOriginAt(dir_.path()));
  const std::string data_ = Pattern(kSize, 3);
  ChunkParts parts_;
  FetchParts fetch_{parts_, origin_.get()};
  // The replies of a test go before its parts.
  ReadPath reads_{
      ReadPath::Parts{kChunk, parts_.index.get(), parts_.store.get(),
                      std::shared_ptr<ResidentChunks>(std::shared_ptr<void>(), &parts_.resident),
                      parts_.writer.get(), parts_.reader.get(), &fetch_.fetch, parts_.hits.get(),
                      &fetch_.prefetcher, origin_.get(), &parts_.counters}};
  std::shared_ptr<ObjectVersion> v_;
  std::shared_ptr<OpenFileState> f_;
};

TEST_F(ReadPathTest, ACachedChunkIsServedFromTheDataFileAndAMissingOneIsFetched) {
  Store(0);
  auto reply = std::make_unique<ReadReply>();
  ASSERT_TRUE(reads_.Read(*f_, 0, 2 * kChunk, reply.get()).ok());
  ASSERT_EQ(reply->segments().size(), 2u);
  EXPECT_GE(reply->segments()[0].fd, 0) << "chunk 0: a range of its data file";
  EXPECT_EQ(reply->segments()[0].len, kChunk);
  EXPECT_NE(reply->segments()[1].mem, nullptr) << "chunk 1: the bytes fetched";
  EXPECT_EQ(BytesOf(*reply), data_.substr(0, 2 * kChunk));
  EXPECT_EQ(parts_.counters.cache_hit_bytes.load(), kChunk);
  EXPECT_EQ(parts_.counters.bytes_read.load(), 2 * kChunk);
  EXPECT_EQ(parts_.counters.origin_reads.load(), 1u);
  EXPECT_TRUE(parts_.resident.pinned(ChunkKey{1, 1, 0})) << "served from its file: pinned";

  reply.reset();  // the reply went: its pins go, what it fetched is stored
  EXPECT_FALSE(parts_.resident.pinned(ChunkKey{1, 1, 0}));
  EXPECT_EQ(parts_.StoredBytes(ChunkKey{1, 1, 1}), data_.substr(kChunk, kChunk));
  EXPECT_FALSE(parts_.HasRecord(ChunkKey{1, 1, 2})) << "read past the span";
}

TEST_F(ReadPathTest, AChunkNotVerifiedIsCheckedOnceAndABadOneFetchedAgain) {
  Store(0);
  Store(1);
  parts_.resident.ForgetVersion(v_->key);  // as after a restart: nothing verified
  auto file = parts_.store->Get(v_->key, false);
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(pwrite((*file)->fd(), "X", 1, kChunk + 3), 1);  // chunk 1 goes bad
  {
    ReadReply reply;
    ASSERT_TRUE(reads_.Read(*f_, 0, 2 * kChunk, &reply).ok());
    EXPECT_EQ(BytesOf(reply), data_.substr(0, 2 * kChunk));
    EXPECT_EQ(parts_.counters.chunks_verified_by_readers.load(), 1u);
    EXPECT_EQ(parts_.counters.checksum_failures.load(), 1u);
    EXPECT_EQ(parts_.counters.origin_reads.load(), 1u) << "only chunk 1 fetched";
  }
  // Both verified now: another open reads one range of the data file, and
  // nothing is read again.
  ReadReply again;
  ASSERT_TRUE(reads_.Read(*testing::OpenOf(v_, origin_), 0, 2 * kChunk, &again).ok());
  ASSERT_EQ(again.segments().size(), 1u);
  EXPECT_GE(again.segments()[0].fd, 0);
  EXPECT_EQ(BytesOf(again), data_.substr(0, 2 * kChunk));
  EXPECT_EQ(parts_.counters.chunks_verified_by_readers.load(), 1u);
  EXPECT_EQ(parts_.counters.origin_reads.load(), 1u);
}

TEST_F(ReadPathTest, ASupersededVersionIsStaleAndAViewsBadRangeReadsAsEio) {
  auto view = testing::OpenOf(v_, origin_, /*derived=*/true);
  origin_->RefuseReadsFrom(kChunk);
  ReadReply good;
  ASSERT_TRUE(reads_.Read(*view, 0, 100, &good).ok());
  EXPECT_EQ(BytesOf(good), data_.substr(0, 100));
  EXPECT_EQ(origin_->check_reads(), 2) << "asked before and after the read";
  ReadReply bad;
  EXPECT_EQ(reads_.Read(*view, kChunk, 100, &bad).code(), EIO);

  v_->superseded = true;
  ReadReply stale;
  EXPECT_EQ(reads_.Read(*f_, 0, 100, &stale).code(), ESTALE);
  EXPECT_EQ(parts_.counters.errors.load(), 1u);
}

}  // namespace
}  // namespace stoker
