// ViewOrigin's decode priorities: a reader that joins work a warm or a
// prefetch started raises it, and a warm walk lays out at warm priority
// until a stat waits on it.
#include <gtest/gtest.h>

#include "decode/view/view_origin.h"
#include "decode/view/view_origin_test_util.h"

namespace stoker {
namespace view_test {
namespace {

TEST_F(ViewOriginTest, AReaderJoiningAWarmRaisesItsDecodeJobs) {
  prefetch_bytes_ = 0;
  dir_prefetch_files_ = 0;
  pool_threads_ = 1;
  Mount({"decoded"});
  DecodePool& pool = *views_.pool;
  PoolGate gate(pool);
  const std::string path = ".decoded/train/shard-0";
  const std::string want = Expected(shard_, false, ViewOptions{});
  // The warm's fetch of the file decodes its three records at kWarm.
  ASSERT_TRUE(cache_->Warm(path).ok());
  bool queued = Eventually([&] { return pool.queued() >= 3; });
  EXPECT_TRUE(queued) << "the warm's decode jobs never came";
  std::optional<size_t> queued_when_ahead_ran;
  std::thread ahead = QueueProbe(pool, DecodePriority::kReadahead, &queued_when_ahead_ran);
  queued = queued && Eventually([&] { return pool.queued() >= 4; });
  const uint64_t collapsed = cache_->counters().collapsed_misses.load();
  Status read_status;
  std::string got;
  std::thread reader([&] {
    auto o = cache_->Open(path, false);
    if (!o.ok()) {
      read_status = o.status();
      return;
    }
    ReadReply r;
    read_status = cache_->Read(*o->file, 0, 5000, &r);
    got = Materialize(r);
  });
  // Waiting on the warm's fetch now (and raised before it waits).
  EXPECT_TRUE(queued &&
              Eventually([&] { return cache_->counters().collapsed_misses.load() > collapsed; }))
      << "the reader did not join the warm's fetch";
  EXPECT_EQ(pool.jobs_raised(), 3u);
  gate.Open();
  for (std::thread* t : {&ahead, &reader}) t->join();
  ASSERT_TRUE(read_status.ok()) << read_status.message();
  EXPECT_EQ(got, want.substr(0, 5000));
  ASSERT_TRUE(queued_when_ahead_ran.has_value());
  EXPECT_EQ(*queued_when_ahead_ran, 0u) << "the warm's jobs ran after the readahead work";
  EXPECT_EQ(views_.Stats()["decode_jobs_raised"], 3);
}

// Two reads of one open view file that cut the same record: the one that
// finds it being produced by the other (a warm's, here) raises the other's
// decode batch to its own priority while it waits.
TEST_F(ViewOriginTest, AReadWaitingOnAWarmReadsRecordRaisesIt) {
  pool_threads_ = 1;
  Mount({"decoded"});
  DecodePool& pool = *views_.pool;
  MemoryByteSource mem(shard_);
  const ViewLayout l = *LayoutTfRecordView(mem, TfRecordCompression::kNone, ViewOptions{},
                                           NewCpuJpegDecoder()->name());
  ASSERT_EQ(l.records.size(), 3u);
  const ViewRecord& cut = l.records[1];
  ASSERT_GT(cut.out_size, 100u);
  auto file = views_.views[0]->Open("train/shard-0");
  ASSERT_TRUE(file.ok()) << file.status().message();
  PoolGate gate(pool);
  // The warm's read: record 0 whole, record 1 cut; two jobs at kWarm.
  std::string warm_buf(cut.out_offset + 10, '\0');
  Result<size_t> warm_got = size_t{0};
  std::thread warm([&] {
    warm_got = (*file)->ReadAtAligned(warm_buf.data(), warm_buf.size(), 0, Urgency::kWarm);
  });
  bool queued = Eventually([&] { return pool.queued() >= 2; });
  EXPECT_TRUE(queued) << "the warm's read queued nothing";
  std::optional<size_t> queued_when_ahead_ran;
  std::thread ahead = QueueProbe(pool, DecodePriority::kReadahead, &queued_when_ahead_ran);
  queued = queued && Eventually([&] { return pool.queued() >= 3; });
  // The reader's read: inside record 1 only, which the warm's read produces.
  std::string reader_buf(10, '\0');
  Result<size_t> reader_got = size_t{0};
  std::thread reader([&] {
    reader_got = (*file)->ReadAt(reader_buf.data(), reader_buf.size(), cut.out_offset + 20);
  });
  EXPECT_TRUE(queued && Eventually([&] { return pool.jobs_raised() >= 2; }))
      << "the reader did not raise the warm's read";
  gate.Open();
  for (std::thread* t : {&warm, &ahead, &reader}) t->join();
  ASSERT_TRUE(warm_got.ok()) << warm_got.status().message();
  ASSERT_TRUE(reader_got.ok()) << reader_got.status().message();
  const std::string want = Expected(shard_, false, ViewOptions{});
  EXPECT_EQ(warm_buf, want.substr(0, warm_buf.size()));
  EXPECT_EQ(reader_buf, want.substr(cut.out_offset + 20, reader_buf.size()));
  ASSERT_TRUE(queued_when_ahead_ran.has_value());
  EXPECT_EQ(*queued_when_ahead_ran, 0u) << "the warm's jobs ran after the readahead work";
  EXPECT_EQ(pool.jobs_raised(), 2u);
  EXPECT_EQ(counters().records_decoded.load(), 2u) << "record 1 decoded once";
}

// A warm walk of a skip view lays its JPEGs out for its listing as warm
// work (their checks queue below readers' and prefetch's), and a stat that
// waits on such a layout raises its check to its own priority.
TEST_F(ViewOriginTest, AWarmWalkOfASkipViewLaysOutAsWarmUntilAStatWaits) {
  prefetch_bytes_ = 0;
  dir_prefetch_files_ = 0;
  pool_threads_ = 1;
  Mount({"skip:on_error=skip"});
  DecodePool& pool = *views_.pool;
  PoolGate gate(pool);
  ASSERT_TRUE(cache_->Warm(".skip/train").ok());
  // The walk's listing checks a.jpg (the TFRecord is listed by its head).
  const bool queued = Eventually([&] { return pool.queued() >= 1; });
  EXPECT_TRUE(queued) << "the walk's listing did not check a.jpg";
  EXPECT_EQ(pool.jobs_raised(), 0u);
  std::optional<Result<struct stat>> st;
  std::thread stat([&] { st.emplace(views_.origin->Stat(".skip/train/a.jpg.npy")); });
  EXPECT_TRUE(queued && Eventually([&] { return pool.jobs_raised() >= 1; }))
      << "the stat did not raise the warm's check";
  gate.Open();
  stat.join();
  ASSERT_TRUE(st->ok()) << st->status().message();
  EXPECT_EQ(static_cast<uint64_t>((*st)->st_size), Expected(jpeg_, true, ViewOptions{}).size());
  EXPECT_EQ(pool.jobs_raised(), 1u);
}

}  // namespace
}  // namespace view_test
}  // namespace stoker
