// ViewOrigin's bad input and compressed shards: records that do not
// decode follow on_error (skip, fail, failed for good), GZIP and ZLIB
// TFRecords decode, and a mount refuses colliding view names.
#include <gtest/gtest.h>
#include <zlib.h>

#include "decode/view/view_origin.h"
#include "decode/view/view_origin_test_util.h"

namespace stoker {
namespace view_test {
namespace {

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

}  // namespace

// Outside the unnamed namespace: a member of the shared fixture.
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

namespace {

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
}  // namespace view_test
}  // namespace stoker
