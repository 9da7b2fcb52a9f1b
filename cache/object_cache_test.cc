// ObjectCache end to end over a real LocalOrigin in a temp dir: bytes
// around chunk boundaries, what a new process serves, derived files'
// ranges, bounded memory, corruption found and fetched again, the cache
// directory's start and options, stats.
#include "cache/object_cache.h"

#include <gtest/gtest.h>

#include "cache/object_cache_test_util.h"

namespace stoker {
namespace object_cache_test {
namespace {

TEST_F(ObjectCacheTest, ReadsMatchTheOriginAroundChunkBoundaries) {
  const std::vector<size_t> sizes = {0, 1, kCs - 1, kCs, kCs + 1, 3 * kCs + 17};
  for (size_t i = 0; i < sizes.size(); ++i) Put("f" + std::to_string(i), Pattern(sizes[i], i));
  auto cache = OpenCache();
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::string want = Pattern(sizes[i], i);
      EXPECT_EQ(ReadAll(*cache, "f" + std::to_string(i)), want) << sizes[i];
      auto o = cache->Open("f" + std::to_string(i), false).value();
      EXPECT_EQ(static_cast<size_t>(o.st.st_size), sizes[i]);
      std::mt19937 rng(i);
      for (int k = 0; k < 20; ++k) {
        uint64_t off = sizes[i] ? rng() % (sizes[i] + 10) : 0;
        size_t len = rng() % (3 * kCs);
        std::string expect = off < want.size() ? want.substr(off, len) : "";
        ASSERT_EQ(ReadRange(*cache, o, off, len), expect) << off << "+" << len;
      }
    }
  }
  auto& c = cache->counters();
  EXPECT_EQ(c.chunks_fetched.load(), 1u + 1 + 1 + 2 + 4);
  EXPECT_GT(c.cache_hit_bytes.load(), 0u);
  EXPECT_EQ(c.checksum_failures.load(), 0u);
  EXPECT_EQ(c.errors.load(), 0u);
}

TEST_F(ObjectCacheTest, PresentChunksAreOneMergedFdSegment) {
  Put("big", Pattern(4 * kCs, 1));
  auto cache = OpenCache();
  ASSERT_EQ(ReadAll(*cache, "big"), Pattern(4 * kCs, 1));
  auto o = cache->Open("big", false).value();
  ReadReply r;
  ASSERT_TRUE(cache->Read(*o.file, 10, 3 * kCs, &r).ok());
  ASSERT_EQ(r.segments().size(), 1u);
  EXPECT_GE(r.segments()[0].fd, 0);
  EXPECT_EQ(r.segments()[0].off, 10);
  EXPECT_EQ(r.size(), 3 * kCs);
  EXPECT_EQ(Materialize(r), Pattern(4 * kCs, 1).substr(10, 3 * kCs));
}

TEST_F(ObjectCacheTest, ANewProcessServesFromTheIndexWithoutTheOrigin) {
  Put("a", Pattern(5 * kCs + 3, 7));
  {
    auto cache = OpenCache();
    ASSERT_EQ(ReadAll(*cache, "a"), Pattern(5 * kCs + 3, 7));
  }
  origin_->SetFailure(ENOTCONN);
  auto cache = OpenCache();
  EXPECT_EQ(ReadAll(*cache, "a"), Pattern(5 * kCs + 3, 7));
  EXPECT_EQ(cache->counters().origin_bytes_read.load(), 0u);
  EXPECT_EQ(cache->counters().revalidations.load(), 0u) << "validated recently by the last daemon";
  EXPECT_EQ(cache->Stats()["objects"], 1u);
  EXPECT_EQ(cache->Stats()["chunks"], 6u);
}

// A derived file (a decoded view's) whose record was made on another device
// (the view remounted with other options: the same size and times, other
// bytes) is not served within --revalidate, nor while the origin is
// unreachable; it is replaced by a new version. A record of the same
// options still is. Regression: the remount served the old options' bytes.
// A derived file's range that its source says reads as EIO (a view's record
// that did not decode, held as zeros) is refused by Read, whether the source
// knew before the read or found out during it; such a file is never leased
// whole. A plain file is never asked about.
TEST_F(ObjectCacheTest, ADerivedFilesUnreadableRangesReadAsEio) {
  Put("a", Pattern(3 * kCs, 1));
  {
    auto cache = OpenCache();
    ASSERT_EQ(ReadAll(*cache, "a"), Pattern(3 * kCs, 1));
    EXPECT_EQ(origin_->check_reads(), 0) << "a plain file is not the source's to check";
  }
  origin_->DeriveAs(kDerivedDevBit | 1);
  {
    auto cache = OpenCache();
    ASSERT_EQ(ReadAll(*cache, "a"), Pattern(3 * kCs, 1));
    EXPECT_GT(origin_->check_reads(), 0);
  }
  auto cache = OpenCache();
  auto opened = cache->Open("a", false);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  LeaseRefusal why{};
  {
    auto lease = cache->LeaseWhole(*opened->file, &why);
    ASSERT_TRUE(lease.ok()) << LeaseRefusalName(why);
  }
  origin_->RefuseReadsFrom(kCs + 10);
  ReadReply first;
  EXPECT_TRUE(cache->Read(*opened->file, 0, kCs, &first).ok()) << "before the bad record";
  ReadReply bad;
  EXPECT_EQ(cache->Read(*opened->file, kCs, kCs, &bad).code(), EIO);
  auto lease = cache->LeaseWhole(*opened->file, &why);
  ASSERT_FALSE(lease.ok());
  EXPECT_STREQ(LeaseRefusalName(why), "view_errors");
}

TEST_F(ObjectCacheTest, ADerivedRecordOfOtherOptionsIsNeverServed) {
  const uint64_t fast = kDerivedDevBit | 1, accurate = kDerivedDevBit | 2;
  Put("a", Pattern(3 * kCs, 1));
  origin_->DeriveAs(fast);
  { ASSERT_EQ(ReadAll(*OpenCache(), "a"), Pattern(3 * kCs, 1)); }
  struct stat st;
  ASSERT_EQ(stat(origin_dir_.Sub("a").c_str(), &st), 0);
  Put("a", Pattern(3 * kCs, 2));  // in place: the same inode
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, origin_dir_.Sub("a").c_str(), times, 0), 0);
  origin_->DeriveAs(accurate);
  {
    auto cache = OpenCache();
    EXPECT_EQ(ReadAll(*cache, "a"), Pattern(3 * kCs, 2));
    EXPECT_EQ(cache->counters().revalidations.load(), 1u);
    EXPECT_EQ(cache->counters().origin_changes.load(), 1u);
  }
  origin_->SetFailure(ENOTCONN);
  origin_->DeriveAs(fast);
  {
    auto cache = OpenCache();
    Status s;
    ReadAll(*cache, "a", &s);
    EXPECT_EQ(ENOTCONN, s.code()) << s.ToString();
  }
  origin_->DeriveAs(accurate);
  {
    auto cache = OpenCache();
    EXPECT_EQ(ReadAll(*cache, "a"), Pattern(3 * kCs, 2));
    EXPECT_EQ(cache->counters().revalidations.load(), 0u);
  }
}

TEST_F(ObjectCacheTest, KnownVersionsInMemoryAreBounded) {
  options_.max_object_entries = 8;
  for (int i = 0; i < 40; ++i) Put("f" + std::to_string(i), Pattern(kCs / 2 + i, i));
  auto cache = OpenCache();
  std::vector<ObjectCache::Opened> held;  // open files keep their entries
  for (int i = 0; i < 3; ++i) held.push_back(cache->Open("f" + std::to_string(i), false).value());
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 40; ++i) {
      ASSERT_EQ(ReadAll(*cache, "f" + std::to_string(i)), Pattern(kCs / 2 + i, i)) << i;
      EXPECT_LE(cache->Stats()["objects_in_memory"].get<uint64_t>(), 8u + 1);
    }
  }
  for (const auto& o : held) {
    EXPECT_EQ(ReadRange(*cache, o, 0, kCs).size(), o.st.st_size + 0u) << "held files still read";
  }
  EXPECT_EQ(cache->Stats()["objects"], 40u);
  EXPECT_EQ(cache->counters().origin_bytes_read.load(), [] {
    uint64_t n = 0;
    for (int i = 0; i < 40; ++i) n += kCs / 2 + i;
    return n;
  }()) << "a trimmed entry's chunks are still found through the index";
}

TEST_F(ObjectCacheTest, FlippedByteIsDetectedAndRefetched) {
  std::string data = Pattern(3 * kCs, 3);
  Put("a", data);
  { ASSERT_EQ(ReadAll(*OpenCache(), "a"), data); }
  testing::FlipByte(DataFile(1, 1), kCs + 100);
  auto cache = OpenCache();
  EXPECT_EQ(ReadAll(*cache, "a"), data);
  EXPECT_EQ(cache->counters().checksum_failures.load(), 1u);
  EXPECT_EQ(cache->counters().chunks_fetched.load(), 1u);
  EXPECT_EQ(cache->counters().errors.load(), 0u);
  EXPECT_EQ(ReadAll(*cache, "a"), data);  // and the refetched chunk is cached again
  EXPECT_EQ(cache->counters().chunks_fetched.load(), 1u);
}

TEST_F(ObjectCacheTest, TornWriteIsDetectedAndRefetched) {
  std::string data = Pattern(2 * kCs, 4);
  Put("a", data);
  { ASSERT_EQ(ReadAll(*OpenCache(), "a"), data); }
  // Power loss: the record made it, the second half of chunk 1 did not.
  ASSERT_EQ(truncate(DataFile(1, 1).c_str(), kCs + kCs / 2), 0);
  auto cache = OpenCache();
  EXPECT_EQ(ReadAll(*cache, "a"), data);
  EXPECT_EQ(cache->counters().checksum_failures.load(), 1u);
}

TEST_F(ObjectCacheTest, MissingDataFileIsRefetched) {
  std::string data = Pattern(2 * kCs, 5);
  Put("a", data);
  { ASSERT_EQ(ReadAll(*OpenCache(), "a"), data); }
  ASSERT_EQ(unlink(DataFile(1, 1).c_str()), 0);
  auto cache = OpenCache();
  EXPECT_EQ(ReadAll(*cache, "a"), data);
  EXPECT_EQ(cache->counters().chunks_fetched.load(), 2u);
  EXPECT_EQ(ReadAll(*cache, "a"), data);
  EXPECT_EQ(cache->counters().chunks_fetched.load(), 2u);
}

TEST_F(ObjectCacheTest, InterruptedWriteOfACrashedDaemonIsReclaimed) {
  options_.slab_max_bytes = 0;  // a version's own file (SlabCacheTest has slots)
  std::string data = Pattern(kCs, 6);
  Put("a", data);
  { ASSERT_EQ(ReadAll(*OpenCache(), "a"), data); }
  {
    // What kill -9 between pwrite and commit leaves: an intent and bytes.
    ChunkIndex::Options o;
    o.path = options_.dir + "/index";
    auto idx = ChunkIndex::Open(o).value();
    ASSERT_TRUE(idx->PutIntent({1, 1, 3}).ok());
    int fd = open(DataFile(1, 1).c_str(), O_WRONLY);
    std::string junk = Pattern(kCs, 99);
    ASSERT_EQ(pwrite(fd, junk.data(), junk.size(), 3 * kCs), static_cast<ssize_t>(kCs));
    close(fd);
  }
  uint64_t before = testing::AllocatedUnder(options_.dir + "/data");
  auto cache = OpenCache();
  EXPECT_LE(testing::AllocatedUnder(options_.dir + "/data"), before - kCs);
  EXPECT_EQ(ReadAll(*cache, "a"), data);
  EXPECT_EQ(cache->counters().origin_bytes_read.load(), 0u);
}

TEST_F(ObjectCacheTest, KeepCacheOnlyForAVersionThisProcessHasOpened) {
  Put("a", "hello");
  auto cache = OpenCache();
  auto first = cache->Open("a", false).value();
  EXPECT_FALSE(first.keep_cache);
  EXPECT_FALSE(first.changed);
  EXPECT_TRUE(cache->Open("a", false).value().keep_cache);
  EXPECT_TRUE(cache->Open("a", true).value().keep_cache) << "revalidated, unchanged";
  EXPECT_EQ(cache->counters().revalidations.load(), 2u);
  cache.reset();
  cache = OpenCache();
  EXPECT_FALSE(cache->Open("a", false).value().keep_cache) << "a new process";
}

TEST_F(ObjectCacheTest, ASecondDaemonOnTheSameDirIsBusy) {
  auto cache = OpenCache();
  auto second = ObjectCache::Open(options_, origin_, AsDerived(origin_));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), EBUSY);
  EXPECT_NE(second.status().message().find("in use by stoker pid " + std::to_string(getpid())),
            std::string::npos);
}

TEST_F(ObjectCacheTest, AnotherChunkSizeIsRefusedAndTheCacheKept) {
  Put("a", Pattern(3 * kCs, 1));
  { ASSERT_EQ(ReadAll(*OpenCache(), "a"), Pattern(3 * kCs, 1)); }
  options_.chunk_size = 2 * kCs;
  auto refused = ObjectCache::Open(options_, origin_, AsDerived(origin_));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), kCacheMismatch);
  EXPECT_EQ(refused.status().message(), "cache dir '" + options_.dir +
                                            "' holds chunks of 64 KiB, not 128 KiB: mount it "
                                            "with --chunk-size 64K, or add --reset to empty it");
  options_.chunk_size = kCs;
  auto cache = OpenCache();
  EXPECT_EQ(cache->Stats()["fresh_start"], "");
  EXPECT_EQ(cache->Stats()["chunks"], 3u) << "the refused open kept what the cache held";
}

TEST_F(ObjectCacheTest, AnotherOriginIsRefusedAndTheCacheKept) {
  Put("a", Pattern(3 * kCs, 1));
  options_.origin_location = "local:/one";
  { ASSERT_EQ(ReadAll(*OpenCache(), "a"), Pattern(3 * kCs, 1)); }
  options_.origin_location = "local:/two";
  auto refused = ObjectCache::Open(options_, origin_, AsDerived(origin_));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), kCacheMismatch);
  EXPECT_EQ(refused.status().message(), "cache dir '" + options_.dir +
                                            "' holds files of local:/one, not local:/two: mount "
                                            "it over local:/one, or add --reset to empty it");
  options_.origin_location = "local:/one";
  auto cache = OpenCache();
  EXPECT_EQ(cache->Stats()["chunks"], 3u) << "the refused open kept what the cache held";
}

TEST_F(ObjectCacheTest, ACacheWithoutAnOriginRecordGetsOneThenResetTakesItOver) {
  Put("a", Pattern(3 * kCs, 1));
  { ASSERT_EQ(ReadAll(*OpenCache(), "a"), Pattern(3 * kCs, 1)); }  // no location: none recorded
  options_.origin_location = "local:/one";
  { EXPECT_EQ(OpenCache()->Stats()["chunks"], 3u) << "an older cache is kept"; }
  options_.origin_location = "local:/two";
  EXPECT_EQ(ObjectCache::Open(options_, origin_, AsDerived(origin_)).status().code(),
            kCacheMismatch)
      << "the first open recorded local:/one";
  options_.reset = true;
  { EXPECT_EQ(OpenCache()->Stats()["chunks"], 0u); }
  options_.reset = false;
  EXPECT_EQ(OpenCache()->Stats()["fresh_start"], "") << "the reset recorded local:/two";
}

TEST_F(ObjectCacheTest, ResetEmptiesTheCacheWhateverItsChunkSize) {
  Put("a", Pattern(3 * kCs, 1));
  { ASSERT_EQ(ReadAll(*OpenCache(), "a"), Pattern(3 * kCs, 1)); }
  options_.chunk_size = 2 * kCs;
  options_.reset = true;
  auto cache = OpenCache();
  EXPECT_EQ(cache->Stats()["fresh_start"], "emptied on request (--reset)");
  EXPECT_EQ(cache->Stats()["chunks"], 0u);
  EXPECT_EQ(cache->Stats()["chunk_size"], 2 * kCs);
  EXPECT_EQ(ReadAll(*cache, "a"), Pattern(3 * kCs, 1));
  EXPECT_EQ(cache->Stats()["chunks"], 2u);
}

TEST_F(ObjectCacheTest, BadOptionsAreRefused) {
  options_.chunk_size = 1000;
  EXPECT_EQ(ObjectCache::Open(options_, origin_, AsDerived(origin_)).status().code(), EINVAL);
  options_.chunk_size = kCs;
  options_.capacity_bytes = 3 * kCs;
  EXPECT_EQ(ObjectCache::Open(options_, origin_, AsDerived(origin_)).status().code(), EINVAL);
}

TEST_F(ObjectCacheTest, StatsCarryTheSchema) {
  Put("a", "abc");
  auto cache = OpenCache();
  ReadAll(*cache, "a");
  ReadAll(*cache, "a");
  auto j = cache->Stats();
  for (const char* k : {"bytes_read",
                        "cache_hit_bytes",
                        "origin_bytes_read",
                        "cache_used_bytes",
                        "cache_capacity_bytes",
                        "objects",
                        "chunks",
                        "evicted_bytes",
                        "revalidations",
                        "errors",
                        "checksum_failures",
                        "collapsed_misses",
                        "prefetched_chunks",
                        "warm_files_queued",
                        "warm_files_done",
                        "warm_bytes",
                        "chunks_not_cached",
                        "index_bytes",
                        "chunk_size",
                        "io_backend",
                        "origin",
                        "cache_dir",
                        "hit_ratio"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["bytes_read"], 6u);
  EXPECT_EQ(j["cache_hit_bytes"], 3u);
  EXPECT_DOUBLE_EQ(j["hit_ratio"].get<double>(), 0.5);
  EXPECT_EQ(j["cache_dir"], options_.dir);
}

// Small objects in slab slots (cache/slab.h).

}  // namespace
}  // namespace object_cache_test
}  // namespace stoker
