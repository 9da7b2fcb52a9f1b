// ChunkReader over a real index and real data files: a good chunk is
// checked once and then known verified; bit rot, a hole or a data file cut
// short fail the check, and the chunk is dropped so that it is fetched again.
#include "cache/chunk_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "cache/chunk_parts_test_util.h"

namespace stoker {
namespace {

using testing::ChunkParts;
using testing::Pattern;

constexpr uint64_t kChunk = ChunkParts::kChunk;

class ChunkReaderTest : public ::testing::Test {
 protected:
  // Stores n chunks of a version (the last one short), then forgets that
  // this process verified them, as after a restart.
  std::shared_ptr<ObjectVersion> Stored(uint64_t id, uint64_t n) {
    auto v = p_.Version(id, n * kChunk - 100);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t len = i + 1 < n ? kChunk : kChunk - 100;
      data_.push_back(Pattern(len, static_cast<uint32_t>(id * 100 + i)));
      STOKER_CHECK(p_.writer->Store(*v, i, ChunkParts::Bytes(data_.back())), "store");
    }
    p_.resident.ForgetVersion(v->key);
    return v;
  }
  // Pins the chunks of v and lists them with their records' checksums.
  std::vector<ChunkToCheck> PinAll(const ObjectVersion& v) {
    std::vector<ChunkToCheck> out;
    for (uint64_t i = 0; i < v.chunks; ++i) {
      const ChunkKey key{v.key.object_id, v.key.version, i};
      bool verified = false;
      STOKER_CHECK(p_.resident.TryPin(key, &verified), "pin");
      auto rec = p_.index->GetChunk(key);
      STOKER_CHECK(rec.ok() && rec->has_value(), "record");
      out.push_back({i, (*rec)->xxh3, (*rec)->slot});
    }
    return out;
  }
  void UnpinGood(const ObjectVersion& v, const std::vector<char>& good) {
    for (uint64_t i = 0; i < good.size(); ++i) {
      if (good[i]) p_.resident.Unpin({v.key.object_id, v.key.version, i});
    }
  }
  bool Verified(const ChunkKey& key) {
    bool verified = false;
    if (!p_.resident.TryPin(key, &verified)) return false;
    p_.resident.Unpin(key);
    return verified;
  }
  std::shared_ptr<DataFile> File(const ObjectVersion& v) {
    auto f = p_.store->Get(v.key, false);
    STOKER_CHECK(f.ok(), "data file");
    return *f;
  }

  ChunkParts p_;
  std::vector<std::string> data_;
};

TEST_F(ChunkReaderTest, GoodChunksAreCheckedOnceAndServedFromWhatWasRead) {
  auto v = Stored(1, 3);
  auto file = File(*v);
  std::vector<ChunkBytes> bytes;
  std::vector<char> good = p_.reader->Check(*v, *file, PinAll(*v), &bytes);
  ASSERT_EQ(good, (std::vector<char>{1, 1, 1}));
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(std::string(bytes[i].data.get(), bytes[i].len), data_[i]);
    EXPECT_TRUE(bytes[i].from_cache);
    EXPECT_TRUE(Verified({1, 1, i}));
  }
  UnpinGood(*v, good);
  EXPECT_EQ(p_.counters.chunks_verified.load(), 3u);
  EXPECT_EQ(p_.counters.checksum_failures.load(), 0u);
}

TEST_F(ChunkReaderTest, AFlippedByteFailsTheCheckAndTheChunkIsDropped) {
  auto v = Stored(2, 3);
  auto file = File(*v);
  char c;
  ASSERT_EQ(::pread(file->fd(), &c, 1, kChunk + 10), 1);
  c ^= 0x5a;
  ASSERT_EQ(::pwrite(file->fd(), &c, 1, kChunk + 10), 1);
  std::vector<char> good = p_.reader->CheckInBatches(*v, *file, PinAll(*v));
  EXPECT_EQ(good, (std::vector<char>{1, 0, 1}));
  UnpinGood(*v, good);
  EXPECT_EQ(p_.counters.checksum_failures.load(), 1u);
  EXPECT_FALSE(p_.HasRecord({2, 1, 1})) << "dropped: the next read fetches it again";
  EXPECT_FALSE(p_.reader->IsCached({2, 1, 1}));
  EXPECT_TRUE(p_.reader->IsCached({2, 1, 0}));
  EXPECT_EQ(p_.quota->committed(), 2 * AllocatedBytes(kChunk));
}

TEST_F(ChunkReaderTest, ADataFileCutShortFailsTheChunksItNoLongerHolds) {
  auto v = Stored(3, 3);
  auto file = File(*v);
  ASSERT_EQ(::ftruncate(file->fd(), 2 * kChunk + 50), 0);
  std::vector<char> good = p_.reader->Check(*v, *file, PinAll(*v));
  EXPECT_EQ(good, (std::vector<char>{1, 1, 0}));
  UnpinGood(*v, good);
  EXPECT_FALSE(p_.HasRecord({3, 1, 2}));
  EXPECT_EQ(p_.counters.checksum_failures.load(), 1u) << "a short read is a failed check too";
}

TEST_F(ChunkReaderTest, CheckingInBatchesCoversEveryChunk) {
  const uint64_t n = 2 * ChunkReader::kCheckBatch + 3;
  auto v = Stored(4, n);
  std::vector<char> good = p_.reader->CheckInBatches(*v, *File(*v), PinAll(*v));
  EXPECT_EQ(good, std::vector<char>(n, 1));
  UnpinGood(*v, good);
  EXPECT_EQ(p_.counters.chunks_verified.load(), n);
}

TEST_F(ChunkReaderTest, AStoredChunkLoadsOnlyWhileItMatchesItsRecord) {
  auto v = Stored(5, 2);
  auto got = p_.reader->LoadStored(*v, 1);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::string(got->data.get(), got->len), data_[1]);
  EXPECT_FALSE(Verified({5, 1, 1})) << "loading is not a check that this process keeps";
  ASSERT_EQ(::pwrite(File(*v)->fd(), "X", 1, kChunk), 1);
  EXPECT_FALSE(p_.reader->LoadStored(*v, 1).has_value());
  EXPECT_FALSE(p_.reader->LoadStored(*v, 7).has_value()) << "no such chunk";
}

}  // namespace
}  // namespace stoker
