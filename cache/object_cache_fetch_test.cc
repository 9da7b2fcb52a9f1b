// ObjectCache's misses and what it does ahead: concurrent misses collapsed,
// replies before stores, prefetch of sequential readers, checks ahead not
// repeated by the reader, warm.
#include <gtest/gtest.h>

#include "cache/object_cache.h"
#include "cache/object_cache_test_util.h"

namespace stoker {
namespace object_cache_test {
namespace {

TEST_F(ObjectCacheTest, ConcurrentMissesOfOneChunkReadTheOriginOnce) {
  std::string data = Pattern(kCs, 8);
  Put("a", data);
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  origin_->CloseGate();
  std::string got1, got2;
  std::thread t1([&] { got1 = ReadRange(*cache, o, 0, kCs); });
  ASSERT_TRUE(Eventually([&] { return origin_->waiting() == 1; }));
  std::thread t2([&] { got2 = ReadRange(*cache, o, 100, 1000); });
  ASSERT_TRUE(Eventually([&] { return cache->counters().collapsed_misses.load() == 1; }));
  origin_->OpenGate();
  t1.join();
  t2.join();
  EXPECT_EQ(got1, data);
  EXPECT_EQ(got2, data.substr(100, 1000));
  EXPECT_EQ(cache->counters().origin_reads.load(), 1u);
}

TEST_F(ObjectCacheTest, AReaderIsAnsweredBeforeItsChunksAreStored) {
  const std::string data = Pattern(2 * kCs + 10, 21);
  Put("a", data);
  auto cache = OpenCache();
  auto held = HeldRead(*cache, cache->Open("a", false).value(), data);
  EXPECT_EQ(cache->counters().chunks_written.load(), 0u) << "stored only after the reply";
  // Another open reads the chunks meanwhile: from the fetched bytes.
  auto o2 = cache->Open("a", false).value();
  EXPECT_EQ(ReadRange(*cache, o2, 0, data.size()), data);
  EXPECT_EQ(ReadRange(*cache, o2, kCs + 5, 100), data.substr(kCs + 5, 100));
  EXPECT_EQ(cache->counters().origin_reads.load(), 1u);
  EXPECT_EQ(cache->counters().chunks_written.load(), 0u);
  held.reset();
  EXPECT_EQ(cache->counters().chunks_written.load(), 3u);
  // Stored for good: a new process serves them without the origin.
  cache.reset();
  auto again = OpenCache();
  EXPECT_EQ(ReadAll(*again, "a"), data);
  EXPECT_EQ(again->counters().origin_reads.load(), 0u);
}

// Cache writes at or past from_off wait while the gate is closed (it starts
// closed); the rest go through at once.
class GatedWrites final : public IoBackend {
 public:
  explicit GatedWrites(uint64_t from_off)
      : inner_(std::move(MakeIoBackend(IoBackendKind::kSyscall)).value()), from_off_(from_off) {}
  void OpenGate() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int waiting() const { return waiting_.load(); }

  std::string Name() const override { return "gated(" + inner_->Name() + ")"; }
  Result<size_t> Read(int fd, void* buf, size_t len, off_t off) override {
    return inner_->Read(fd, buf, len, off);
  }
  void ReadBatch(std::vector<ReadOp>& ops) override { inner_->ReadBatch(ops); }
  Status Write(int fd, const void* buf, size_t len, off_t off) override {
    if (static_cast<uint64_t>(off) >= from_off_) {
      std::unique_lock<std::mutex> l(mu_);
      waiting_++;
      cv_.wait(l, [&] { return open_; });
      waiting_--;
    }
    return inner_->Write(fd, buf, len, off);
  }

 private:
  const std::unique_ptr<IoBackend> inner_;
  const uint64_t from_off_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;  // GUARDED_BY(mu_)
  std::atomic<int> waiting_{0};
};

// A prefetch used to store each chunk before completing its fetch, so a
// reader that caught up with it waited for the cache writes (4-7 ms a chunk
// on the views benchmark) of every chunk up to its own.
// What a derived file's prefetch always does, here on a plain file.
TEST_F(ObjectCacheTest, AReaderWaitingOnAPrefetchIsAnsweredBeforeItsStores) {
  options_.defer_plain_prefetch_stores = true;
  options_.prefetch_bytes = 4 * kCs;
  options_.dir_prefetch_files = 0;
  const std::string data = Pattern(8 * kCs, 24);
  Put("a", data);
  auto gate = std::make_shared<GatedWrites>(kCs);  // chunk 0 is stored, the rest wait
  options_.io = gate;
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  EXPECT_EQ(ReadRange(*cache, o, 0, kCs), data.substr(0, kCs));  // sends the prefetch ahead
  ASSERT_TRUE(Eventually([&] { return gate->waiting() > 0; })) << "the prefetch stores nothing";
  std::atomic<bool> answered{false};
  std::string got;
  std::thread reader([&] {
    ReadReply r;
    Status s = cache->Read(*o.file, kCs, kCs, &r);
    got = s.ok() ? Materialize(r) : s.message();
    answered = true;
  });
  EXPECT_TRUE(Eventually([&] { return answered.load(); })) << "the reader waited for a store";
  EXPECT_GT(gate->waiting(), 0) << "answered while the store is still held";
  gate->OpenGate();
  reader.join();
  EXPECT_EQ(got, data.substr(kCs, kCs));
  // Every chunk is stored all the same, and none was fetched twice.
  EXPECT_TRUE(Eventually([&] { return cache->Stats()["chunks"] == 5u; }));
  EXPECT_EQ(cache->counters().chunks_fetched.load(), 5u);
  EXPECT_EQ(ReadAll(*cache, "a"), data);
}

TEST_F(ObjectCacheTest, WithNoRoomToDeferChunksAreStoredBeforeTheReply) {
  options_.deferred_store_bytes = kCs;  // room for one of the two chunks
  const std::string data = Pattern(2 * kCs, 22);
  Put("a", data);
  auto cache = OpenCache();
  auto held = HeldRead(*cache, cache->Open("a", false).value(), data);
  EXPECT_EQ(cache->counters().chunks_written.load(), 1u);
  held.reset();
  EXPECT_EQ(cache->counters().chunks_written.load(), 2u);
  EXPECT_EQ(ReadAll(*cache, "a"), data);
  EXPECT_EQ(cache->counters().origin_reads.load(), 1u);
}

TEST_F(ObjectCacheTest, AFailedReadStillStoresWhatItFetched) {
  // The origin's third read fails: chunk 1, then chunks 0 and 2 in one
  // Read (two origin reads: they are not adjacent), the second failing.
  FaultSpec third;
  third.error = EIO;
  third.every_nth = 3;
  third.path_substr = origin_dir_.path();
  auto faulty =
      MakeFaultyIoBackend(std::move(MakeIoBackend(IoBackendKind::kSyscall)).value(), {third});
  auto local =
      LocalOrigin::Create(origin_dir_.path(), std::shared_ptr<IoBackend>(std::move(faulty)));
  ASSERT_TRUE(local.ok());
  origin_ = std::make_shared<testing::ControlledOrigin>(*local);
  const std::string data = Pattern(3 * kCs, 23);
  Put("a", data);
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  EXPECT_EQ(ReadRange(*cache, o, kCs, 10), data.substr(kCs, 10));
  Status s;
  ReadRange(*cache, o, 0, data.size(), &s);
  EXPECT_EQ(s.code(), EIO);
  EXPECT_EQ(cache->counters().chunks_written.load(), 2u) << "chunk 0 was fetched and stored";
  EXPECT_EQ(ReadRange(*cache, o, 0, kCs), data.substr(0, kCs));
  EXPECT_EQ(cache->counters().origin_reads.load(), 3u);
}

TEST_F(ObjectCacheTest, SequentialReadersArePrefetched) {
  options_.prefetch_bytes = 4 * kCs;
  std::string data = Pattern(32 * kCs, 3);
  Put("a", data);
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  std::string got;
  for (uint64_t off = 0; off < data.size(); off += kCs / 2) {
    got += ReadRange(*cache, o, off, kCs / 2);
    // The first read sent the pool ahead; the reader waits for it once, or
    // on a busy machine it could read every chunk before a pool thread ran.
    if (off == 0) {
      EXPECT_TRUE(Eventually([&] { return cache->counters().prefetched_chunks.load() > 0; }));
    }
  }
  EXPECT_EQ(got, data);
  EXPECT_TRUE(Eventually([&] { return cache->Stats()["chunks"] == 32u; }));
  EXPECT_EQ(cache->counters().chunks_fetched.load(), 32u) << "nothing fetched twice";
}

// The kernel reads ahead with several requests at once and several threads
// answer them, so one sequential reader's reads arrive out of order: still
// prefetched (each read out of order used to count as a jump to a new
// position, and nothing was prefetched).
TEST_F(ObjectCacheTest, SequentialReadsArrivingOutOfOrderArePrefetched) {
  options_.prefetch_bytes = 4 * kCs;
  std::string data = Pattern(32 * kCs, 4);
  Put("a", data);
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  std::string got(data.size(), '\0');
  for (uint64_t c = 0; c < 32; c += 2) {
    for (uint64_t idx : {c + 1, c}) {  // 1, 0, 3, 2, ...
      got.replace(idx * kCs, kCs, ReadRange(*cache, o, idx * kCs, kCs));
    }
    // The prefetch keeps ahead of the reader (waited for, so that a slow
    // machine does not let the reader fetch first): two chunks past it at
    // least, since a prefetch starts once half a window is new. Without
    // the fix, nothing past the first window would ever be prefetched.
    const uint64_t ahead = std::min<uint64_t>(32, c + 4);
    EXPECT_TRUE(Eventually([&] { return cache->Stats()["chunks"].get<uint64_t>() >= ahead; }))
        << "the prefetch stopped before chunk " << ahead;
  }
  EXPECT_EQ(got, data);
  EXPECT_TRUE(Eventually([&] { return cache->Stats()["chunks"] == 32u; }));
  // The first window is 5 chunks; past it only a prefetch that went on
  // with the reader fetched anything.
  EXPECT_GT(cache->counters().prefetched_chunks.load(), 8u);
  EXPECT_EQ(cache->counters().chunks_fetched.load(), 32u) << "nothing fetched twice";
}

// Cache I/O that takes its time (a busy SSD) while it is held here: batched
// reads (the read-back checks of cached chunks) of bytes at or past an
// offset. Everything else passes through.
class HeldIo : public IoBackend {
 public:
  explicit HeldIo(std::unique_ptr<IoBackend> inner) : inner_(std::move(inner)) {}
  void HoldReadsFrom(off_t off) { Set(true, off); }
  void Release() { Set(false, 0); }
  int held() const { return held_.load(); }
  std::string Name() const override { return "held(" + inner_->Name() + ")"; }
  Result<size_t> Read(int fd, void* buf, size_t len, off_t off) override {
    return inner_->Read(fd, buf, len, off);
  }
  Status Write(int fd, const void* buf, size_t len, off_t off) override {
    return inner_->Write(fd, buf, len, off);
  }
  void ReadBatch(std::vector<ReadOp>& ops) override {
    Wait([&] {
      return reads_ && std::any_of(ops.begin(), ops.end(),
                                   [&](const ReadOp& op) { return op.off >= reads_from_; });
    });
    inner_->ReadBatch(ops);
  }

 private:
  void Set(bool reads, off_t from) {
    std::lock_guard<std::mutex> l(mu_);
    reads_ = reads;
    reads_from_ = from;
    cv_.notify_all();
  }
  template <typename Pred>
  void Wait(Pred holding) {
    std::unique_lock<std::mutex> l(mu_);
    if (!holding()) return;
    held_++;
    cv_.wait(l, [&] { return !holding(); });
    held_--;
  }
  const std::unique_ptr<IoBackend> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool reads_ = false;    // GUARDED_BY(mu_)
  off_t reads_from_ = 0;  // GUARDED_BY(mu_)
  std::atomic<int> held_{0};
};

// After a restart every cached chunk is read back and checked once before
// it is served. A sequential reader that asks for a chunk its prefetch is
// checking waits for that check: the chunk is not read and checked twice.
TEST_F(ObjectCacheTest, AChunkBeingCheckedAheadIsNotCheckedAgainByItsReader) {
  options_.prefetch_bytes = 4 * kCs;
  const std::string data = Pattern(8 * kCs, 25);
  Put("a", data);
  {
    auto first = OpenCache();
    EXPECT_EQ(ReadAll(*first, "a"), data);
    EXPECT_TRUE(Eventually([&] { return first->Stats()["chunks"] == 8u; }));
  }
  auto io = std::make_shared<HeldIo>(std::move(MakeIoBackend(IoBackendKind::kSyscall)).value());
  options_.io = io;
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  // Chunk 0 is checked by its read; the prefetch's checks of chunks 1-4
  // are held in their read-back.
  io->HoldReadsFrom(kCs);
  EXPECT_EQ(ReadRange(*cache, o, 0, kCs), data.substr(0, kCs));
  ASSERT_TRUE(Eventually([&] { return io->held() >= 1; })) << "the prefetch checked nothing";
  std::string got;
  std::thread reader([&] { got = ReadRange(*cache, o, kCs, kCs); });
  // Either the reader waits for the prefetch's check, or (the bug) it
  // reads the chunk back itself and is held too.
  ASSERT_TRUE(Eventually(
      [&] { return cache->counters().collapsed_checks.load() >= 1 || io->held() >= 2; }));
  EXPECT_EQ(io->held(), 1) << "the reader read back a chunk that was being checked";
  io->Release();
  reader.join();
  EXPECT_EQ(got, data.substr(kCs, kCs));
  EXPECT_EQ(cache->counters().collapsed_checks.load(), 1u);
  EXPECT_EQ(ReadRange(*cache, o, 2 * kCs, 6 * kCs), data.substr(2 * kCs));
  EXPECT_EQ(cache->counters().chunks_verified.load(), 8u) << "a chunk was checked twice";
  EXPECT_EQ(cache->counters().origin_reads.load(), 0u);
}

// Chunks this process verified are read ahead into memory as well (direct,
// around the page cache), and a reader that reaches one being read ahead
// waits for it rather than read it from the data file a second time.
TEST_F(ObjectCacheTest, AVerifiedChunkBeingReadAheadIsNotReadAgainByItsReader) {
  options_.prefetch_bytes = 4 * kCs;
  const std::string data = Pattern(16 * kCs, 26);
  Put("a", data);
  {
    auto first = OpenCache();
    EXPECT_EQ(ReadAll(*first, "a"), data);
    EXPECT_TRUE(Eventually([&] { return first->Stats()["chunks"] == 16u; }));
  }
  auto io = std::make_shared<HeldIo>(std::move(MakeIoBackend(IoBackendKind::kSyscall)).value());
  options_.io = io;
  auto cache = OpenCache();
  // Every chunk verified by this process, one read each and none of them
  // sequential (nothing is prefetched, so no read ahead is still running
  // below): chunk c after a jump to chunk 15 of the same open.
  for (uint64_t c = 0; c < 16; ++c) {
    auto v = cache->Open("a", false).value();
    if (c <= 10) EXPECT_EQ(ReadRange(*cache, v, 15 * kCs, kCs), data.substr(15 * kCs));
    EXPECT_EQ(ReadRange(*cache, v, c * kCs, kCs), data.substr(c * kCs, kCs));
  }
  ASSERT_EQ(cache->counters().chunks_verified.load(), 16u);
  const uint64_t collapsed = cache->counters().collapsed_checks.load();
  auto o = cache->Open("a", false).value();
  io->HoldReadsFrom(kCs);
  EXPECT_EQ(ReadRange(*cache, o, 0, kCs), data.substr(0, kCs));
  ASSERT_TRUE(Eventually([&] { return io->held() >= 1; })) << "verified chunks were not read ahead";
  std::atomic<bool> done{false};
  std::string got;
  std::thread reader([&] {
    got = ReadRange(*cache, o, kCs, kCs);
    done = true;
  });
  // The reader waits for the read ahead (the bug: it answers from the data
  // file while the same bytes are being read into memory for it).
  ASSERT_TRUE(Eventually(
      [&] { return cache->counters().collapsed_checks.load() > collapsed || done.load(); }));
  EXPECT_FALSE(done.load()) << "the reader did not wait for the chunk being read ahead";
  io->Release();
  reader.join();
  EXPECT_EQ(got, data.substr(kCs, kCs));
  EXPECT_EQ(ReadRange(*cache, o, 2 * kCs, 14 * kCs), data.substr(2 * kCs));
  EXPECT_EQ(cache->counters().chunks_verified.load(), 16u) << "a verified chunk was checked again";
  EXPECT_EQ(cache->counters().checksum_failures.load(), 0u);
  EXPECT_EQ(cache->counters().origin_reads.load(), 0u);
}

TEST_F(ObjectCacheTest, WarmPullsATreeIntoTheCache) {
  Put("d/x", Pattern(3 * kCs, 1));
  Put("d/sub/y", Pattern(kCs + 5, 2));
  Put("d/sub/z", "");
  Put("other", "not warmed");
  auto cache = OpenCache();
  ASSERT_TRUE(cache->Warm("d/x").ok());
  EXPECT_EQ(cache->counters().warm_files_queued.load(), 1u) << "a file counts at once";
  ASSERT_TRUE(cache->Warm("d").ok());
  EXPECT_EQ(cache->Warm("missing").code(), ENOENT);
  ASSERT_TRUE(Eventually([&] { return cache->counters().warm_files_done.load() == 4; }));
  EXPECT_EQ(cache->counters().warm_files_queued.load(), 4u);
  EXPECT_EQ(cache->counters().warm_bytes.load(), 4 * kCs + 5);
  uint64_t origin_bytes = cache->counters().origin_bytes_read.load();
  EXPECT_EQ(ReadAll(*cache, "d/x"), Pattern(3 * kCs, 1));
  EXPECT_EQ(ReadAll(*cache, "d/sub/y"), Pattern(kCs + 5, 2));
  EXPECT_EQ(cache->counters().origin_bytes_read.load(), origin_bytes);
}

TEST_F(ObjectCacheTest, AWarmJobReportsItsProgress) {
  Put("d/x", Pattern(3 * kCs, 1));
  Put("d/sub/y", Pattern(kCs + 5, 2));
  Put("e", Pattern(7, 3));
  auto cache = OpenCache();
  EXPECT_EQ(cache->StartWarm({"d", "missing"}).status().code(), ENOENT) << "all paths or none";
  EXPECT_TRUE(cache->WarmStatus(0).empty());
  Result<uint64_t> job = cache->StartWarm({"d", "e"});
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(Eventually([&] { return cache->WarmStatus(*job)["finished"].get<bool>(); }));
  nlohmann::json j = cache->WarmStatus(*job);
  EXPECT_EQ(j["files_found"], 3);
  EXPECT_EQ(j["files_done"], 3);
  EXPECT_EQ(j["bytes_found"], 4 * kCs + 5 + 7);
  EXPECT_EQ(j["bytes_done"], j["bytes_found"]);
  EXPECT_EQ(j["failures"], 0);
  EXPECT_EQ(j["paths"], nlohmann::json({"d", "e"}));
  EXPECT_TRUE(j["walked"].get<bool>());
  EXPECT_EQ(cache->WarmStatus(0).size(), 1u);
  EXPECT_TRUE(cache->WarmStatus(*job + 1).is_null());
}

}  // namespace
}  // namespace object_cache_test
}  // namespace stoker
