// ChunkWriter over a real index and real data files: a chunk is visible
// only once committed, an aborted write leaves nothing behind (no record,
// no intent, no bytes, no quota), and what a crash left between begin and
// commit is reclaimed at the next start.
#include "cache/chunk_writer.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "cache/chunk_parts_test_util.h"
#include "util/checksum.h"

namespace stoker {
namespace {

using testing::ChunkParts;
using testing::Pattern;

constexpr uint64_t kChunk = ChunkParts::kChunk;

TEST(ChunkWriterTest, ACommittedChunkHasItsRecordItsBytesAndItsQuota) {
  ChunkParts p;
  auto v = p.Version(7, 2 * kChunk);
  const std::string data = Pattern(kChunk, 1);
  ASSERT_TRUE(p.writer->Store(*v, 1, ChunkParts::Bytes(data)));
  const ChunkKey key{7, 1, 1};
  auto rec = p.index->GetChunk(key);
  ASSERT_TRUE(rec.ok() && rec->has_value());
  EXPECT_EQ((*rec)->len, kChunk);
  EXPECT_EQ((*rec)->xxh3, ChunkChecksum(data.data(), data.size()));
  EXPECT_EQ(p.StoredBytes(key), data);
  EXPECT_EQ(p.Intents(), 0u) << "the commit takes the intent away";
  EXPECT_EQ(p.quota->committed(), AllocatedBytes(kChunk));
  EXPECT_EQ(p.counters.chunks_written.load(), 1u);
  bool verified = false;
  ASSERT_TRUE(p.resident.TryPin(key, &verified));
  p.resident.Unpin(key);
  EXPECT_TRUE(verified) << "bytes this process wrote need no check";
  // Stored again: present, not written twice.
  EXPECT_TRUE(p.writer->Store(*v, 1, ChunkParts::Bytes(data)));
  EXPECT_EQ(p.counters.chunks_written.load(), 1u);
  EXPECT_EQ(p.quota->committed(), AllocatedBytes(kChunk));
}

TEST(ChunkWriterTest, AFailedWriteAbortsAndLeavesNothingBehind) {
  ChunkParts::Config c;
  c.faults = {FaultSpec{FaultSpec::kWrite, EIO}};
  ChunkParts p(c);
  auto v = p.Version(3, kChunk);
  EXPECT_FALSE(p.writer->Store(*v, 0, ChunkParts::Bytes(Pattern(kChunk, 2))));
  EXPECT_FALSE(p.HasRecord({3, 1, 0}));
  EXPECT_EQ(p.Intents(), 0u);
  EXPECT_EQ(p.quota->committed(), 0u);
  EXPECT_EQ(p.quota->used(), p.quota->index_bytes()) << "the reservation went back";
  EXPECT_EQ(p.FileBlocks(v->key), 0u);
  EXPECT_EQ(p.counters.chunks_written.load(), 0u);
}

TEST(ChunkWriterTest, ASupersededVersionIsNotWritten) {
  ChunkParts p;
  auto v = p.Version(4, kChunk);
  v->superseded = true;
  EXPECT_FALSE(p.writer->Store(*v, 0, ChunkParts::Bytes(Pattern(kChunk, 3))));
  EXPECT_FALSE(p.HasRecord({4, 1, 0}));
  EXPECT_FALSE(p.FileExists(v->key));
  EXPECT_EQ(p.quota->committed(), 0u);
}

TEST(ChunkWriterTest, AFullQuotaLeavesTheChunkUncachedAndAsksForEviction) {
  ChunkParts::Config c;
  c.capacity = 4 * kChunk;
  ChunkParts p(c);
  auto v = p.Version(5, 8 * kChunk);
  int stored = 0;
  for (uint64_t i = 0; i < 8; ++i) {
    stored += p.writer->Store(*v, i, ChunkParts::Bytes(Pattern(kChunk, 10 + i))) ? 1 : 0;
  }
  EXPECT_LE(p.quota->committed(), c.capacity);
  EXPECT_LT(stored, 8);
  EXPECT_EQ(p.counters.chunks_not_cached.load(), static_cast<uint64_t>(8 - stored));
  EXPECT_GT(p.evict_asked.load(), 0);
  EXPECT_TRUE(p.quota->TakeRefused());
}

TEST(ChunkWriterTest, ASmallFileGoesToASlabSlotAndItsRemovalFreesTheSlot) {
  ChunkParts::Config c;
  c.slab_max_bytes = 16 << 10;
  ChunkParts p(c);
  auto v = p.Version(6, 1000);
  ASSERT_TRUE(p.writer->UsesSlab(*v));
  const std::string data = Pattern(1000, 4);
  ASSERT_TRUE(p.writer->Store(*v, 0, ChunkParts::Bytes(data)));
  const ChunkKey key{6, 1, 0};
  auto rec = p.index->GetChunk(key);
  ASSERT_TRUE(rec.ok() && rec->has_value());
  EXPECT_TRUE((*rec)->slot.valid());
  EXPECT_EQ(p.StoredBytes(key), data);
  EXPECT_FALSE(p.FileExists(v->key)) << "a slab chunk has no file of its own";
  EXPECT_EQ(p.counters.slab_chunks_written.load(), 1u);

  ASSERT_TRUE(p.resident.TryLatchForEvict(key));
  bool in_slot = false;
  auto freed = p.writer->PunchAndDrop(key, std::nullopt, &in_slot);
  p.resident.ReleaseLatch(key);
  ASSERT_TRUE(freed.ok());
  EXPECT_TRUE(in_slot);
  EXPECT_EQ(*freed, (*rec)->allocated);
  EXPECT_FALSE(p.HasRecord(key));
  // The slot is free again: the next small chunk takes the same one.
  auto w = p.Version(8, 1000);
  ASSERT_TRUE(p.writer->Store(*w, 0, ChunkParts::Bytes(Pattern(1000, 5))));
  auto again = p.index->GetChunk({8, 1, 0});
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->slot, (*rec)->slot);
}

TEST(ChunkWriterTest, AWriteACrashLeftBetweenBeginAndCommitIsReclaimed) {
  ChunkParts p;
  auto v = p.Version(9, 2 * kChunk);
  const ChunkKey key{9, 1, 1};
  // Begin and write, as a daemon killed before its commit left them.
  ASSERT_TRUE(p.index->PutIntent(key).ok());
  {
    auto file = p.store->Get(v->key, /*create=*/true);
    ASSERT_TRUE(file.ok());
    const std::string data = Pattern(kChunk, 6);
    ASSERT_EQ(::pwrite((*file)->fd(), data.data(), data.size(), kChunk),
              static_cast<ssize_t>(kChunk));
    ::fsync((*file)->fd());
  }
  ASSERT_EQ(p.Intents(), 1u);
  ASSERT_TRUE(p.writer->ReclaimIntents().ok());
  EXPECT_EQ(p.Intents(), 0u);
  EXPECT_FALSE(p.HasRecord(key));
  EXPECT_EQ(p.FileBlocks(v->key), 0u) << "the range the intent named is punched (or its file gone)";
}

TEST(ChunkWriterTest, ABadChunkIsDroppedUnlessGoodBytesWereWrittenSince) {
  ChunkParts p;
  auto v = p.Version(10, kChunk);
  const ChunkKey key{10, 1, 0};
  ASSERT_TRUE(p.writer->Store(*v, 0, ChunkParts::Bytes(Pattern(kChunk, 7))));
  // A reader's check found it bad, but this process wrote (verified) it
  // since: the drop leaves it.
  p.writer->DropBad(key);
  EXPECT_TRUE(p.HasRecord(key));
  // Its data file is gone: dropped regardless.
  p.writer->DropBad(key, /*force=*/true);
  EXPECT_FALSE(p.HasRecord(key));
  EXPECT_EQ(p.quota->committed(), 0u);
}

TEST(ChunkWriterTest, AStoredChunkNotYetVerifiedIsRewrittenWithMatchingBytes) {
  ChunkParts p;
  auto v = p.Version(11, kChunk);
  const ChunkKey key{11, 1, 0};
  const std::string data = Pattern(kChunk, 8);
  ASSERT_TRUE(p.writer->Store(*v, 0, ChunkParts::Bytes(data)));
  // As after a restart: nothing verified by this process, and the bytes on
  // the disk damaged.
  p.resident.ForgetVersion(v->key);
  {
    auto file = p.store->Get(v->key, false);
    ASSERT_TRUE(file.ok());
    ASSERT_EQ(::pwrite((*file)->fd(), "XXXX", 4, 100), 4);
  }
  ASSERT_NE(p.StoredBytes(key), data);
  EXPECT_TRUE(p.writer->Store(*v, 0, ChunkParts::Bytes(data)));
  EXPECT_EQ(p.StoredBytes(key), data);
  EXPECT_EQ(p.counters.chunks_written.load(), 1u) << "rewritten in place, not a new chunk";
  // Bytes that do not match the record are not put in its place.
  p.resident.ForgetVersion(v->key);
  EXPECT_TRUE(p.writer->Store(*v, 0, ChunkParts::Bytes(Pattern(kChunk, 9))));
  EXPECT_EQ(p.StoredBytes(key), data);
}

// Bytes of the files under dir in the page cache (mincore).
uint64_t ResidentBytes(const std::string& dir) {
  uint64_t total = 0;
  const long page = sysconf(_SC_PAGESIZE);
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.file_size() == 0) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const size_t len = e.file_size();
    void* m = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) continue;
    std::vector<unsigned char> vec((len + page - 1) / page);
    if (mincore(m, len, vec.data()) == 0) {
      for (unsigned char c : vec) total += (c & 1) ? page : 0;
    }
    munmap(m, len);
  }
  return total;
}

TEST(ChunkWriterTest, DataFilesKeptInThePageCacheAreWrittenThroughIt) {
  ChunkParts p;
  p.writer->SetDataFilesInPageCache(true);
  auto v = p.Version(9, 4 * kChunk);
  EXPECT_FALSE(p.writer->Direct(*v));
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(p.writer->Store(*v, i, ChunkParts::Bytes(Pattern(kChunk, 20 + i))));
  }
  // Its pages are the copy a passthrough open reads: all in memory.
  EXPECT_GE(ResidentBytes(p.dir.Sub("data")), 4 * kChunk);
  EXPECT_EQ(p.StoredBytes(ChunkKey{9, 1, 3}), Pattern(kChunk, 23));
  p.writer->SetDataFilesInPageCache(false);
  EXPECT_TRUE(p.writer->Direct(*v));
}

TEST(ChunkWriterTest, SlabChunksAreWrittenDirectEvenWithDataFilesInThePageCache) {
  ChunkParts::Config c;
  c.slab_max_bytes = kChunk;
  ChunkParts p(c);
  p.writer->SetDataFilesInPageCache(true);
  auto small = p.Version(3, kChunk / 2);
  EXPECT_TRUE(p.writer->Direct(*small)) << "the kernel keeps a slab file's pages itself";
  auto big = p.Version(4, 2 * kChunk);
  EXPECT_FALSE(p.writer->Direct(*big));
}

}  // namespace
}  // namespace stoker
