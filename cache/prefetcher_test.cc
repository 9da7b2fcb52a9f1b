// Prefetcher over the cache's real parts, a real worker pool and a real
// local origin: a sequential reader finds the window ahead of it in memory
// and in the cache; a reader going through a directory in order finds the
// next files' first chunks in the cache; a cache near its bound reads ahead
// only what it holds.
#include "cache/prefetcher.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "cache/chunk_parts_test_util.h"
#include "util/eventually.h"

namespace stoker {
namespace {

using testing::ChunkParts;
using testing::Eventually;
using testing::Pattern;
using testing::ScratchDir;
using testing::WriteFile;

constexpr uint64_t kChunk = ChunkParts::kChunk;

class PrefetcherTest : public ::testing::Test {
 protected:
  explicit PrefetcherTest(ChunkParts::Config config = {}) : parts_(std::move(config)) {}

  void SetUp() override {
    options_.chunk_size = kChunk;
    options_.prefetch_bytes = 4 * kChunk;
    options_.dir_prefetch_files = 2;
    options_.dir_prefetch_bytes = kChunk;
    prefetcher_ = std::make_unique<Prefetcher>(
        options_,
        Prefetcher::Parts{kChunk, parts_.index.get(), parts_.store.get(), parts_.quota.get(),
                          &parts_.resident, parts_.writer.get(), parts_.reader.get(), &fetch_,
                          &nothing_derived_, &parts_.counters,
                          [this](const std::string& path) { return Open(path); },
                          [this](const std::string& dir) { return List(dir); }});
    prefetcher_->Start(&pool_);
  }
  void TearDown() override { pool_.Stop(); }

  // An open of path as the cache would make it (a new version per path).
  Result<RawReader::Opened> Open(const std::string& path) {
    STOKER_ASSIGN_OR_RETURN(struct stat st, origin_->Stat(path));
    auto v = parts_.Version(IdOf(path), static_cast<uint64_t>(st.st_size));
    v->path = path;
    v->identity = IdentityFromStat(st);
    {
      MutexLock l(v->at_mu);
      v->at_origin = v->identity;
    }
    RawReader::Opened o;
    o.file = std::make_shared<OpenFileState>(v, std::make_shared<OriginHandle>(origin_, path),
                                             std::make_shared<Readahead>(recent_), false,
                                             options_.prefetch_bytes, kChunk);
    o.st = st;
    return o;
  }
  Result<std::vector<std::string>> List(const std::string& dir) {
    std::vector<std::string> files;
    STOKER_RETURN_IF_ERROR(origin_->ReadDir(dir, [&](const OriginDirEntry& e) {
      if (S_ISREG(e.st.st_mode)) files.push_back(e.name);
      return true;
    }));
    return files;
  }
  uint64_t IdOf(const std::string& path) {
    MutexLock l(ids_mu_);
    auto [it, added] = ids_.emplace(path, ids_.size() + 1);
    return it->second;
  }
  bool Cached(const std::string& path, uint64_t idx) {
    return parts_.HasRecord(ChunkKey{IdOf(path), 1, idx});
  }

  ScratchDir dir_{"prefetcher"};
  std::shared_ptr<Origin> origin_ = testing::LocalOriginAt(dir_.path());
  ChunkParts parts_;
  NothingDerived nothing_derived_;
  OriginReader origin_reader_{
      OriginReader::Parts{kChunk, parts_.index.get(), &nothing_derived_, &parts_.counters}};
  std::shared_ptr<RecentBytes> recent_ =
      std::make_shared<RecentBytes>(RecentBytes::Limits{96 * kChunk, 64 * kChunk, 16 * kChunk});
  ChunkFetch fetch_{
      ChunkFetch::Parts{kChunk, &origin_reader_, parts_.writer.get(), parts_.reader.get(),
                        &nothing_derived_, &parts_.counters, recent_.get()},
      16};
  CacheOptions options_;
  WorkerPool pool_{2, 64};
  std::unique_ptr<Prefetcher> prefetcher_;
  Mutex ids_mu_;
  std::map<std::string, uint64_t> ids_ GUARDED_BY(ids_mu_);
};

TEST_F(PrefetcherTest, ASequentialReaderFindsTheWindowAheadInMemoryAndCached) {
  const std::string data = Pattern(10 * kChunk, 1);
  WriteFile(dir_.Sub("f"), data);
  auto opened = Open("f");
  ASSERT_TRUE(opened.ok());
  OpenFileState& f = *opened->file;
  // A read from the start is a sequential one: the window (4 chunks) past
  // it is read ahead.
  prefetcher_->AfterRead(f, 0, kChunk, 0);
  for (uint64_t idx = 1; idx < 5; ++idx) {
    ASSERT_TRUE(Eventually([&] { return f.readahead->Get(idx).has_value(); }))
        << "chunk " << idx << " was not read ahead";
    EXPECT_EQ(std::string(f.readahead->Get(idx)->data.get(), kChunk),
              data.substr(idx * kChunk, kChunk));
    EXPECT_TRUE(Eventually([&] { return Cached("f", idx); })) << idx;
  }
  EXPECT_GE(parts_.counters.prefetched_chunks.load(), 4u);
  EXPECT_FALSE(Cached("f", 5)) << "read ahead past the window";
}

TEST_F(PrefetcherTest, AReaderGoingThroughADirectoryFindsTheNextFilesCached) {
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    WriteFile(dir_.Sub(std::string("d/") + name), Pattern(2 * kChunk, name[0]));
  }
  prefetcher_->AfterOpen("d/a");
  prefetcher_->AfterOpen("d/b");  // two in order: a scan
  // The next (c) is checked if held whole, else read ahead; d too (2 files
  // ahead), each its first dir_prefetch_bytes.
  EXPECT_TRUE(Eventually([&] { return Cached("d/c", 0) && Cached("d/d", 0); }));
  EXPECT_FALSE(Cached("d/c", 1)) << "more than dir_prefetch_bytes";
  EXPECT_FALSE(Cached("d/e", 0)) << "more than dir_prefetch_files ahead";
  // Counted once each file's fill returns, after its chunks are stored.
  EXPECT_TRUE(Eventually([&] { return parts_.counters.dir_prefetched_files.load() >= 2; }));
}

class FullPrefetcherTest : public PrefetcherTest {
 protected:
  // A quota already at its high watermark.
  FullPrefetcherTest() : PrefetcherTest(ChunkParts::Config{4 * kChunk, 0.5, 0.25}) {}
};

TEST_F(FullPrefetcherTest, ACacheNearItsBoundReadsAheadOnlyWhatItHolds) {
  for (const char* name : {"a", "b", "c", "d"}) {
    WriteFile(dir_.Sub(std::string("d/") + name), Pattern(kChunk, name[0]));
  }
  // What it holds: a chunk of d/d, stored before the scan.
  auto held = Open("d/d");
  ASSERT_TRUE(held.ok());
  FetchTally tally;
  Fill fill;
  fill.urgency = Urgency::kWarm;
  ASSERT_TRUE(
      prefetcher_->FillRange(held->file->version, *held->file->origin, 0, 1, &tally, nullptr, fill)
          .ok());
  ASSERT_TRUE(Cached("d/d", 0));
  ASSERT_FALSE(parts_.quota->RoomBelowLow(kChunk));
  prefetcher_->AfterOpen("d/a");
  prefetcher_->AfterOpen("d/b");
  ASSERT_TRUE(Eventually([&] { return parts_.counters.dir_prefetched_files.load() >= 1; }));
  pool_.Stop();  // every queued prefetch done or dropped
  EXPECT_FALSE(Cached("d/c", 0)) << "fetched ahead into a cache near its bound";
}

}  // namespace
}  // namespace stoker
