// ViewOrigin and ViewNamespace over a real ObjectCache and local origin:
// what the cache serves of a view file is what the producer makes of the
// raw file, sizes are known from the first stat, layouts persist in the
// index, a changed raw file changes the view, and bad input fails as
// on_error says.
#include "decode/view/view_origin.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_test_util.h"
#include "cache/worker_pool.h"
#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/decode_pool_test_util.h"
#include "decode/testing/test_jpegs.h"
#include "decode/tfrecord/tfrecord.h"
#include "decode/view/npy.h"
#include "decode/view/view_namespace.h"
#include "decode/view/view_producer.h"
#include "util/eventually.h"

namespace stoker {
namespace {

using testing::EncodeTj;
using testing::MakeImage;
using testing::Materialize;
using testing::ScratchDir;
using testing::WriteFile;

std::string Record(const std::string& jpeg, int label) {
  tf::Example ex;
  AddFeature(&ex, "image/encoded")->mutable_bytes_list()->add_value(jpeg);
  AddFeature(&ex, "image/format")->mutable_bytes_list()->add_value("JPEG");
  AddFeature(&ex, "image/class/label")->mutable_int64_list()->add_value(label);
  return ex.SerializeAsString();
}

std::string Jpeg(int w, int h, int seed, bool gray = false) {
  return EncodeTj(MakeImage(w, h, gray ? 1 : 3, seed), w, h, gray ? TJPF_GRAY : TJPF_RGB,
                  gray ? TJSAMP_GRAY : TJSAMP_420, 90);
}

std::string Shard(const std::vector<std::string>& payloads) {
  std::string out;
  for (const auto& p : payloads) AppendTfRecord(p, &out);
  return out;
}

// What the view of data must read as, made without the cache.
std::string Expected(const std::string& data, bool npy, const ViewOptions& o) {
  auto decoder = NewCpuJpegDecoder();
  MemoryByteSource src(data);
  ViewLayout l = npy ? *LayoutJpegNpyView(src, o, decoder->name())
                     : *LayoutTfRecordView(src, TfRecordCompression::kNone, o, decoder->name());
  std::string out(l.size, '\0');
  if (npy) {
    EXPECT_TRUE(
        ProduceNpyView(l, data, o, *decoder, reinterpret_cast<uint8_t*>(out.data()), out.size())
            .ok());
    return out;
  }
  for (const ViewRecord& r : l.records) {
    auto payload = ReadTfRecordAt(src, r.in_offset);
    EXPECT_TRUE(payload.ok());
    EXPECT_TRUE(ProduceTfRecordViewRecord(r, *payload, o, *decoder,
                                          reinterpret_cast<uint8_t*>(out.data() + r.out_offset),
                                          r.out_size)
                    .ok());
  }
  return out;
}

class ViewOriginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Sub("origin/train"));
    shard_ = Shard({Record(Jpeg(120, 80, 1), 0), Record(Jpeg(33, 17, 2, true), 1),
                    Record(Jpeg(200, 150, 3), 2)});
    jpeg_ = Jpeg(90, 60, 4);
    WriteFile(dir_.Sub("origin/train/shard-0"), shard_);
    WriteFile(dir_.Sub("origin/train/a.jpg"), jpeg_);
    WriteFile(dir_.Sub("origin/train/notes.txt"), "not a view file");
  }

  void Mount(const std::vector<std::string>& specs) {
    cache_.reset();
    views_ = ViewMount{};
    std::vector<ViewSpec> v;
    for (const auto& s : specs) v.push_back(*ParseViewSpec(s));
    auto raw = MakeOrigin(dir_.Sub("origin"));
    ASSERT_TRUE(raw.ok()) << raw.status().message();
    CacheOptions o;
    o.dir = dir_.Sub("cache");
    o.capacity_bytes = 64ull << 20;
    o.chunk_size = 16 << 10;
    o.revalidate_seconds = 0;
    if (prefetch_bytes_) o.prefetch_bytes = *prefetch_bytes_;
    if (dir_prefetch_files_) o.dir_prefetch_files = *dir_prefetch_files_;
    auto make_views = [&](RawReader& reader) -> Result<ObjectCache::Derived> {
      STOKER_ASSIGN_OR_RETURN(views_,
                              MakeViewMount(*raw, v, reader, DecodePoolOptions{pool_threads_}));
      return ObjectCache::Derived{views_.origin, views_.derived};
    };
    auto c = ObjectCache::Open(o, *raw, make_views);
    ASSERT_TRUE(c.ok()) << c.status().message();
    cache_ = std::move(c).value();
  }
  void TearDown() override {
    cache_.reset();
    if (views_.pool) views_.pool->Stop();
  }

  // The body of RecordFailingAtDecodeBecomesFailedForGood.
  void FailingRecordReadsEio(const std::vector<std::string>& payloads);

  // Reads path whole through the cache, piece by piece. With eio, a piece
  // that reads as EIO (a record that did not decode) is read again byte by
  // byte, and each byte that reads as EIO comes back as '\0' with its
  // offset in *eio; without, EIO fails the read.
  Result<std::string> ReadAll(const std::string& path, size_t piece = 5000,
                              std::set<uint64_t>* eio = nullptr) {
    STOKER_ASSIGN_OR_RETURN(ObjectCache::Opened o, cache_->Open(path, false));
    std::string out;
    for (uint64_t off = 0; off < static_cast<uint64_t>(o.st.st_size); off += piece) {
      ReadReply r;
      Status st = cache_->Read(*o.file, off, piece, &r);
      if (st.code() == EIO && eio != nullptr) {
        const uint64_t end = std::min<uint64_t>(off + piece, o.st.st_size);
        for (uint64_t b = off; b < end; ++b) {
          ReadReply one;
          Status bst = cache_->Read(*o.file, b, 1, &one);
          if (bst.code() == EIO) {
            eio->insert(b);
            out.push_back('\0');
            continue;
          }
          STOKER_RETURN_IF_ERROR(bst);
          out += Materialize(one);
        }
        continue;
      }
      STOKER_RETURN_IF_ERROR(st);
      out += Materialize(r);
    }
    return out;
  }

  const ViewCounters& counters() { return views_.stats->counters; }

  ScratchDir dir_{"views"};
  std::optional<uint64_t> prefetch_bytes_;
  std::optional<uint64_t> dir_prefetch_files_;
  int pool_threads_ = 2;
  std::string shard_;
  std::string jpeg_;
  ViewMount views_;
  std::unique_ptr<ObjectCache> cache_;
};

TEST_F(ViewOriginTest, ListsOnlyWhatTheViewUnderstands) {
  Mount({"decoded"});
  std::set<std::string> names;
  std::vector<OriginDirEntry> entries;
  ASSERT_TRUE(views_.origin
                  ->ReadDir(".decoded/train",
                            [&](const OriginDirEntry& e) {
                              entries.push_back(e);
                              return true;
                            })
                  .ok());
  for (const auto& e : entries) {
    names.insert(e.name);
    EXPECT_FALSE(e.attrs_complete) << e.name;  // nothing laid out yet
  }
  EXPECT_EQ(names, (std::set<std::string>{"a.jpg.npy", "shard-0"}));
  // The root hides nothing of the origin and lists no view.
  std::set<std::string> root;
  ASSERT_TRUE(views_.origin
                  ->ReadDir("",
                            [&](const OriginDirEntry& e) {
                              root.insert(e.name);
                              return true;
                            })
                  .ok());
  EXPECT_EQ(root, (std::set<std::string>{"train"}));
  EXPECT_EQ(views_.origin->Stat(".decoded/train/notes.txt").status().code(), ENOENT);
  EXPECT_EQ(views_.origin->Stat(".decoded/train/a.jpg").status().code(), ENOENT);
  auto dir = views_.origin->Stat(".decoded/train");
  ASSERT_TRUE(dir.ok());
  EXPECT_TRUE(S_ISDIR(dir->st_mode));
  EXPECT_TRUE(views_.derived->IsDerived(".decoded/train/shard-0"));
  EXPECT_FALSE(views_.derived->IsDerived("train/shard-0"));
}

TEST_F(ViewOriginTest, BigDirectoriesAreRecognisedInParallel) {
  const std::string small = Jpeg(8, 8, 3);
  std::set<std::string> want;
  for (int i = 0; i < 300; ++i) {
    const std::string name = "f" + std::to_string(i);
    WriteFile(dir_.Sub("origin/big/" + name), i % 3 == 0 ? small : "text " + name);
    if (i % 3 == 0) want.insert(name + ".npy");
  }
  Mount({"decoded"});
  for (int round = 0; round < 2; ++round) {  // the second from memory
    std::set<std::string> got;
    ASSERT_TRUE(views_.origin
                    ->ReadDir(".decoded/big",
                              [&](const OriginDirEntry& e) {
                                got.insert(e.name);
                                return true;
                              })
                    .ok());
    EXPECT_EQ(got, want);
  }
}

std::vector<OriginDirEntry> List(Origin& origin, const std::string& dir) {
  std::vector<OriginDirEntry> entries;
  Status s = origin.ReadDir(dir, [&](const OriginDirEntry& e) {
    entries.push_back(e);
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.message();
  return entries;
}

// on_error=skip: a JPEG whose header is fine but whose scan is cut short is
// not listed at all (a listed name must stat: glob then np.load), and what
// is listed comes laid out, with its size. A fail view still lists it by its
// head, without a size, scanning nothing.
TEST_F(ViewOriginTest, ASkipListingLeavesOutAJpegThatDoesNotDecode) {
  WriteFile(dir_.Sub("origin/train/cut.jpg"), Jpeg(120, 80, 8).substr(0, 900));
  Mount({"skip:on_error=skip", "fail:on_error=fail"});
  std::map<std::string, OriginDirEntry> skip;
  for (const auto& e : List(*views_.origin, ".skip/train")) skip[e.name] = e;
  EXPECT_EQ(counters().layouts_computed.load(), 1u);  // a.jpg; the TFRecord by its head
  EXPECT_EQ(skip.count("cut.jpg.npy"), 0u);
  ASSERT_EQ(skip.count("a.jpg.npy"), 1u);
  ASSERT_EQ(skip.count("shard-0"), 1u);
  EXPECT_TRUE(skip["a.jpg.npy"].attrs_complete);
  EXPECT_EQ(static_cast<uint64_t>(skip["a.jpg.npy"].st.st_size),
            Expected(jpeg_, true, ViewOptions{}).size());
  for (const auto& [name, e] : skip) {
    auto st = views_.origin->Stat(".skip/train/" + name);
    ASSERT_TRUE(st.ok()) << name << ": " << st.status().message();
    if (e.attrs_complete) {
      EXPECT_EQ(st->st_size, e.st.st_size) << name;
    }
  }
  EXPECT_EQ(views_.origin->Stat(".skip/train/cut.jpg.npy").status().code(), ENOENT);
  EXPECT_NE(views_.stats->errors.Text().find(".skip/train/cut.jpg.npy: offset 0: "),
            std::string::npos)
      << views_.stats->errors.Text();

  const uint64_t computed = counters().layouts_computed.load();
  std::map<std::string, OriginDirEntry> fail;
  for (const auto& e : List(*views_.origin, ".fail/train")) fail[e.name] = e;
  ASSERT_EQ(fail.count("cut.jpg.npy"), 1u);
  for (const auto& [name, e] : fail) EXPECT_FALSE(e.attrs_complete) << name;
  EXPECT_EQ(counters().layouts_computed.load(), computed) << "a fail listing scans nothing";
  // Its header is fine: a fail view lays it out (and reads it as EIO).
  EXPECT_TRUE(views_.origin->Stat(".fail/train/cut.jpg.npy").ok());

  // Listed again (from memory), the same.
  std::set<std::string> again;
  for (const auto& e : List(*views_.origin, ".skip/train")) again.insert(e.name);
  EXPECT_EQ(again, (std::set<std::string>{"a.jpg.npy", "shard-0"}));
}

using testing::Eventually;

// A reader whose chunk a warm is producing (the cache collapses its miss
// into the warm's fetch) raises the warm's decode jobs to its own priority:
// they run before readahead work that was queued before the reader came,
// not behind it.
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

TEST_F(ViewOriginTest, ServesWhatTheProducerMakesWithExactSizes) {
  Mount({"decoded", "acc:dct=accurate,channels=3"});
  for (const char* view : {"decoded", "acc"}) {
    ViewOptions o =
        ParseViewSpec(view == std::string("acc") ? "acc:dct=accurate,channels=3" : "decoded")
            ->options;
    for (bool npy : {false, true}) {
      const std::string path =
          std::string(".") + view + (npy ? "/train/a.jpg.npy" : "/train/shard-0");
      const std::string want = Expected(npy ? jpeg_ : shard_, npy, o);
      auto st = views_.origin->Stat(path);
      ASSERT_TRUE(st.ok()) << st.status().message();
      EXPECT_EQ(static_cast<uint64_t>(st->st_size), want.size()) << path;
      EXPECT_EQ(st->st_mode & 0222, 0u);
      auto got = ReadAll(path);
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_EQ(*got, want) << path;
    }
  }
  // Listed with sizes once laid out.
  std::vector<OriginDirEntry> entries;
  ASSERT_TRUE(views_.origin
                  ->ReadDir(".decoded/train",
                            [&](const OriginDirEntry& e) {
                              entries.push_back(e);
                              return true;
                            })
                  .ok());
  for (const auto& e : entries) EXPECT_TRUE(e.attrs_complete) << e.name;
  EXPECT_EQ(counters().records_decoded.load() >= 6, true);
  EXPECT_EQ(counters().errors.load(), 0u);
  // Views of one raw file under other options are other devices (inodes),
  // and no view file has its raw file's inode number.
  EXPECT_NE(views_.views[0]->device(), views_.views[1]->device());
  auto raw = views_.origin->Stat("train/shard-0");
  auto v0 = views_.origin->Stat(".decoded/train/shard-0");
  auto v1 = views_.origin->Stat(".acc/train/shard-0");
  ASSERT_TRUE(raw.ok() && v0.ok() && v1.ok());
  EXPECT_NE(v0->st_ino, raw->st_ino);
  EXPECT_NE(v0->st_ino, v1->st_ino);
  EXPECT_EQ(v0->st_ino, views_.origin->Stat(".decoded/train/shard-0")->st_ino);  // stable
  EXPECT_NE(views_.origin->Stat(".decoded/train")->st_ino, views_.origin->Stat("train")->st_ino);
}

TEST_F(ViewOriginTest, LayoutsAndDecodedBytesSurviveReopen) {
  Mount({"decoded"});
  auto first = ReadAll(".decoded/train/shard-0");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(counters().layouts_computed.load(), 1u);
  Mount({"decoded"});
  auto again = ReadAll(".decoded/train/shard-0");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(counters().layouts_computed.load(), 0u);
  EXPECT_EQ(counters().layouts_loaded.load(), 1u);
  EXPECT_EQ(counters().records_decoded.load(), 0u);  // served from the SSD tier
}

// A record cut by the end of what one open read (a directory prefetch
// reads only a file's first chunks) is handed to the next open of the file,
// not decoded again: each record of an epoch is decoded once.
TEST_F(ViewOriginTest, ARecordCutByAnEarlierOpenIsNotDecodedAgain) {
  prefetch_bytes_ = 0;
  Mount({"decoded"});
  const std::string path = ".decoded/train/shard-0";
  const std::string want = Expected(shard_, false, ParseViewSpec("decoded")->options);
  ASSERT_GT(want.size(), 2u * 16 << 10);
  std::string got;
  {
    auto o = cache_->Open(path, false);
    ASSERT_TRUE(o.ok()) << o.status().message();
    ReadReply r;
    ASSERT_TRUE(cache_->Read(*o->file, 0, 16 << 10, &r).ok());  // one chunk: record 0 is cut
    got = Materialize(r);
  }
  EXPECT_EQ(counters().records_decoded.load(), 1u);
  auto rest = ReadAll(path);
  ASSERT_TRUE(rest.ok()) << rest.status().message();
  EXPECT_EQ(*rest, want);
  EXPECT_EQ(got, want.substr(0, got.size()));
  EXPECT_EQ(counters().records_decoded.load(), 3u) << "each record decoded once";
}

TEST_F(ViewOriginTest, ChangedRawFileChangesTheView) {
  Mount({"decoded"});
  auto before = ReadAll(".decoded/train/shard-0");
  ASSERT_TRUE(before.ok());
  const std::string changed = Shard({Record(Jpeg(40, 30, 9), 7)});
  WriteFile(dir_.Sub("origin/train/shard-0"), changed);
  auto after = ReadAll(".decoded/train/shard-0");
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_EQ(*after, Expected(changed, false, ViewOptions{}));
  // The old decoded chunks (and the old raw ones) are dropped, not kept
  // beside the new: once the drops ran, the cache holds the new raw file's
  // chunks and the new view's, nothing else.
  const uint64_t chunk = 16 << 10;  // the fixture's chunk size
  const uint64_t want = (changed.size() + chunk - 1) / chunk + (after->size() + chunk - 1) / chunk;
  EXPECT_TRUE(Eventually([&] {
    nlohmann::json j = cache_->Stats();
    return j["pending_drops"] == 0 && j["chunks"] == want;
  })) << cache_->Stats().dump();
}

TEST_F(ViewOriginTest, BadRecordsFollowOnError) {
  std::string bad_crc = Shard({Record(Jpeg(20, 20, 5), 0)});
  bad_crc.back() ^= 0x55;
  const std::string shard = Shard({Record(Jpeg(64, 48, 6), 0), Record("not a jpeg", 1)}) + bad_crc;
  WriteFile(dir_.Sub("origin/train/shard-0"), shard);
  std::string huge = jpeg_;
  // SOF0 of a TurboJPEG file: FF C0 len(2) precision(1) height(2) width(2).
  const size_t sof = huge.find("\xff\xc0", 2);
  ASSERT_NE(sof, std::string::npos);
  huge.replace(sof + 5, 4, "\xff\xff\xff\xff");
  WriteFile(dir_.Sub("origin/train/huge.jpg"), huge);

  Mount({"skip:on_error=skip", "fail:on_error=fail"});
  auto skipped = ReadAll(".skip/train/shard-0");
  ASSERT_TRUE(skipped.ok()) << skipped.status().message();
  MemoryByteSource src(*skipped);
  TfRecordReader reader(&src);
  TfRecordExtent e;
  std::string payload;
  int n = 0;
  while (*reader.Next(&e, &payload)) ++n;
  EXPECT_EQ(n, 1);
  EXPECT_EQ(views_.origin->Stat(".skip/train/huge.jpg.npy").status().code(), ENOENT);

  // Under fail, the cache holds the good records and zeros for the bad
  // ones, and its reads of those ranges fail with EIO (CheckRead, which the
  // cache asks before and after each read).
  std::set<uint64_t> eio;
  auto failed = ReadAll(".fail/train/shard-0", 5000, &eio);
  ASSERT_TRUE(failed.ok()) << failed.status().message();
  uint64_t len0 = 0;
  std::memcpy(&len0, failed->data(), 8);
  const uint64_t frame0 = len0 + kTfRecordOverhead;
  ASSERT_LT(frame0, failed->size());
  EXPECT_EQ(failed->substr(0, frame0), skipped->substr(0, frame0));
  EXPECT_EQ(eio.count(frame0 - 1), 0u);
  EXPECT_EQ(eio.count(frame0), 1u);
  EXPECT_TRUE(views_.derived->CheckRead(".fail/train/shard-0", 0, frame0).ok());
  EXPECT_EQ(views_.derived->CheckRead(".fail/train/shard-0", frame0 - 1, 2).code(), EIO);
  EXPECT_EQ(views_.derived->CheckRead(".fail/train/shard-0", 0, failed->size()).code(), EIO);
  EXPECT_TRUE(views_.derived->CheckRead(".fail/train/shard-0", failed->size(), 10).ok());
  EXPECT_TRUE(views_.derived->CheckRead(".skip/train/shard-0", 0, 1 << 20).ok());
  EXPECT_EQ(views_.derived->CheckRead(".fail/train/huge.jpg.npy", 0, 1).code(), EIO);
  EXPECT_TRUE(views_.derived->CheckRead(".fail/train/a.jpg.npy", 0, 1 << 20).ok());
  EXPECT_TRUE(views_.derived->CheckRead("train/shard-0", 0, 1 << 20).ok());
  const std::string errors = views_.stats->errors.Text();
  EXPECT_NE(errors.find(".skip/train/shard-0: offset "), std::string::npos) << errors;
  EXPECT_NE(errors.find(".fail/train/huge.jpg.npy: offset 0: "), std::string::npos) << errors;
  EXPECT_NE(errors.find(".skip/train/huge.jpg.npy: offset 0: "), std::string::npos) << errors;
  EXPECT_GE(counters().errors.load(), 5u);
  EXPECT_GE(counters().failed_reads.load(), 2u);
}

// window_bits: 16 + MAX_WBITS for GZIP, MAX_WBITS for ZLIB.
std::string Deflated(const std::string& in, int window_bits) {
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = in.size();
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = out.size();
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}
std::string Gzip(const std::string& in) { return Deflated(in, 16 + MAX_WBITS); }
std::string Zlib(const std::string& in) { return Deflated(in, MAX_WBITS); }

// A GZIP TFRecord (by its name and content) reads as the view of the
// inflated records, in pieces that start anywhere.
TEST_F(ViewOriginTest, GzipTfRecordKeepsItsNameAndDecodes) {
  WriteFile(dir_.Sub("origin/train/shard-1.gz"), Gzip(shard_));
  WriteFile(dir_.Sub("origin/train/other.gz"), Gzip("plain text, not records"));
  Mount({"decoded"});
  EXPECT_EQ(views_.origin->Stat(".decoded/train/other.gz").status().code(), ENOENT);
  const std::string want = Expected(shard_, false, ViewOptions{});
  {
    // The end first: the inflating goes past the start, then starts over.
    auto o = cache_->Open(".decoded/train/shard-1.gz", false);
    ASSERT_TRUE(o.ok()) << o.status().message();
    ASSERT_EQ(static_cast<size_t>(o->st.st_size), want.size());
    ReadReply tail;
    ASSERT_TRUE(cache_->Read(*o->file, want.size() - 100, 100, &tail).ok());
    EXPECT_EQ(Materialize(tail), want.substr(want.size() - 100));
    ReadReply head;
    ASSERT_TRUE(cache_->Read(*o->file, 0, 100, &head).ok());
    EXPECT_EQ(Materialize(head), want.substr(0, 100));
  }
  auto got = ReadAll(".decoded/train/shard-1.gz", 7000);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, want);
}

// compression= names the compression of every TFRecord file, as
// TFRecordDataset's compression_type does: shards without a suffix are in
// such a view, and compression=none leaves out those with one.
TEST_F(ViewOriginTest, CompressionOptionRecognisesShardsWithoutASuffix) {
  WriteFile(dir_.Sub("origin/train/shard-z"), Zlib(shard_));
  WriteFile(dir_.Sub("origin/train/shard-g"), Gzip(shard_));
  WriteFile(dir_.Sub("origin/train/shard-1.gz"), Gzip(shard_));
  Mount({"auto", "z:compression=zlib", "g:compression=gzip", "n:compression=none"});
  const std::string want = Expected(shard_, false, ViewOptions{});
  auto in_view = [&](const std::string& path) { return views_.origin->Stat(path).ok(); };
  EXPECT_FALSE(in_view(".auto/train/shard-z"));
  EXPECT_FALSE(in_view(".auto/train/shard-g"));
  EXPECT_TRUE(in_view(".auto/train/shard-1.gz"));
  EXPECT_FALSE(in_view(".z/train/shard-g"));
  EXPECT_FALSE(in_view(".g/train/shard-z"));
  EXPECT_FALSE(in_view(".n/train/shard-1.gz"));
  for (const char* path : {".z/train/shard-z", ".g/train/shard-g", ".g/train/shard-1.gz",
                           ".n/train/shard-0", ".z/train/shard-0"}) {
    auto got = ReadAll(path, 7000);
    ASSERT_TRUE(got.ok()) << path << ": " << got.status().message();
    EXPECT_EQ(*got, want) << path;
  }
}

// A record whose header probes but whose scan is cut short, under
// on_error=skip: the layout checked it and left it out, so the view is the
// other records in order, its size never changes, and nothing reads EIO.
TEST_F(ViewOriginTest, RecordFailingAtDecodeIsSkippedUnderSkip) {
  const std::string cut = Jpeg(120, 80, 8).substr(0, 900);
  const std::vector<std::string> payloads = {Record(Jpeg(64, 40, 1), 0), Record(cut, 1),
                                             Record(Jpeg(50, 30, 2), 2)};
  const std::string shard = Shard(payloads);
  WriteFile(dir_.Sub("origin/train/shard-0"), shard);
  const std::string want = Expected(Shard({payloads[0], payloads[2]}), false, ViewOptions{});
  for (int mount = 0; mount < 2; ++mount) {
    Mount({"decoded:on_error=skip"});
    auto st = views_.origin->Stat(".decoded/train/shard-0");
    ASSERT_TRUE(st.ok()) << st.status().message();
    EXPECT_EQ(static_cast<uint64_t>(st->st_size), want.size());
    auto got = ReadAll(".decoded/train/shard-0", 3000);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, want);
    EXPECT_TRUE(views_.derived->CheckRead(".decoded/train/shard-0", 0, got->size()).ok());
    EXPECT_EQ(counters().images_checked.load(), mount == 0 ? 3u : 0u);  // then from the index
    EXPECT_EQ(counters().failed_reads.load(), 0u);
  }
  EXPECT_NE(views_.stats->errors.Text().find(".decoded/train/shard-0: offset " +
                                             std::to_string(Shard({payloads[0]}).size())),
            std::string::npos)
      << views_.stats->errors.Text();
}

// The same record under on_error=fail: it becomes kFailed in the stored
// layout and reads as EIO, while the good records that share its cache
// chunks stay readable.
// Small: all three records lie wholly inside one cache chunk, so each is
// produced straight into the chunk, the failed one too.
TEST_F(ViewOriginTest, RecordFailingAtDecodeBecomesFailedForGood) {
  for (bool small : {false, true}) {
    SCOPED_TRACE(small ? "small" : "large");
    const std::string whole = Jpeg(30, 20, 8);
    const std::string cut =
        small ? whole.substr(0, whole.size() - 20) : Jpeg(120, 80, 8).substr(0, 900);
    const std::vector<std::string> payloads = {
        Record(small ? Jpeg(20, 12, 1) : Jpeg(64, 40, 1), 0), Record(cut, 1),
        Record(small ? Jpeg(16, 10, 2) : Jpeg(50, 30, 2), 2)};
    FailingRecordReadsEio(payloads);
  }
}

void ViewOriginTest::FailingRecordReadsEio(const std::vector<std::string>& payloads) {
  const std::string shard = Shard(payloads);
  WriteFile(dir_.Sub("origin/train/shard-0"), shard);
  auto decoder = NewCpuJpegDecoder();
  MemoryByteSource mem(shard);
  ViewOptions o;
  ViewLayout l = *LayoutTfRecordView(mem, TfRecordCompression::kNone, o, decoder->name());
  ASSERT_EQ(l.records.size(), 3u);
  ASSERT_EQ(l.records[1].kind, ViewRecordKind::kImage);  // the header probes fine

  for (int mount = 0; mount < 2; ++mount) {
    Mount({"decoded:on_error=fail"});
    std::set<uint64_t> eio;
    auto got = ReadAll(".decoded/train/shard-0", 3000, &eio);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->size(), l.size);
    for (size_t i : {size_t{0}, size_t{2}}) {
      const ViewRecord& r = l.records[i];
      std::string want(r.out_size, '\0');
      auto payload = ReadTfRecordAt(mem, r.in_offset);
      ASSERT_TRUE(ProduceTfRecordViewRecord(r, *payload, o, *decoder,
                                            reinterpret_cast<uint8_t*>(want.data()), want.size())
                      .ok());
      EXPECT_EQ(got->substr(r.out_offset, r.out_size), want) << i;
      EXPECT_EQ(eio.lower_bound(r.out_offset), eio.lower_bound(r.out_offset + r.out_size)) << i;
      EXPECT_TRUE(
          views_.derived->CheckRead(".decoded/train/shard-0", r.out_offset, r.out_size).ok());
    }
    const ViewRecord& bad = l.records[1];
    EXPECT_EQ(std::distance(eio.lower_bound(bad.out_offset),
                            eio.lower_bound(bad.out_offset + bad.out_size)),
              static_cast<std::ptrdiff_t>(bad.out_size))
        << "every byte of the bad record reads as EIO";
    EXPECT_EQ(views_.derived->CheckRead(".decoded/train/shard-0", bad.out_offset + 5, 1).code(),
              EIO);
    if (mount == 1) {
      // From the index: nothing decoded again, the record still refused.
      EXPECT_EQ(counters().layouts_loaded.load(), 1u);
      EXPECT_EQ(counters().records_decoded.load(), 0u);
    }
  }
  EXPECT_NE(views_.stats->errors.Text().find(".decoded/train/shard-0: offset " +
                                             std::to_string(l.records[1].in_offset)),
            std::string::npos)
      << views_.stats->errors.Text();
}

// A reader the views are never to use: making them reads nothing.
class UnusedReader final : public RawReader {
 public:
  Result<Opened> OpenForDerived(const std::string&) override { return Refuse(); }
  Result<std::optional<std::string>> GetDerived(const OpenFileState&, const std::string&) override {
    return Refuse();
  }
  Status PutDerived(const OpenFileState&, const std::string&, const std::string&) override {
    return Refuse();
  }
  Status Read(OpenFileState&, uint64_t, size_t, ReadReply*) override { return Refuse(); }
  RecentBytes& recent() override {
    ADD_FAILURE() << "made views keep bytes";
    return recent_;
  }

 private:
  RecentBytes recent_{RecentBytes::Limits{}};
  static Status Refuse() {
    ADD_FAILURE() << "made views read through their reader";
    return Status::Error(EIO, "not to be read");
  }
};

TEST(ViewMountTest, RefusesCollisionsAndDuplicates) {
  ScratchDir dir("views");
  std::filesystem::create_directories(dir.Sub("origin/.decoded"));
  auto raw = MakeOrigin(dir.Sub("origin"));
  ASSERT_TRUE(raw.ok());
  UnusedReader reader;
  auto collide = MakeViewMount(*raw, {*ParseViewSpec("decoded")}, reader);
  EXPECT_EQ(collide.status().code(), EEXIST);
  EXPECT_NE(collide.status().message().find("'.decoded'"), std::string::npos);
  auto twice = MakeViewMount(*raw, {*ParseViewSpec("a"), *ParseViewSpec("a:dct=accurate")}, reader);
  EXPECT_EQ(twice.status().code(), EINVAL);
  auto control = MakeViewMount(*raw, {*ParseViewSpec("stoker")}, reader);
  EXPECT_EQ(control.status().code(), EINVAL);
  auto none = MakeViewMount(*raw, {}, reader);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->origin, *raw);
}

}  // namespace
}  // namespace stoker
