#include "decode/view/view_layout.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/testing/test_jpegs.h"
#include "decode/tfrecord/crc32c.h"
#include "decode/view/npy.h"
#include "decode/view/view_producer.h"

namespace stoker {
namespace {

using testing::DecodeTj;
using testing::EncodeLibjpeg;
using testing::EncodeTj;
using testing::JpegColor;
using testing::LibjpegOptions;
using testing::MakeImage;

void SetBytes(tf::Example* ex, const std::string& key, const std::string& v) {
  AddFeature(ex, key)->mutable_bytes_list()->add_value(v);
}
void SetInt(tf::Example* ex, const std::string& key, int64_t v) {
  AddFeature(ex, key)->mutable_int64_list()->add_value(v);
}

// Shaped like the ImageNet TFRecords of TensorFlow's build_imagenet_data.py.
std::string ImageNetRecord(const std::string& jpeg, int label, int h, int w) {
  tf::Example ex;
  SetBytes(&ex, "image/encoded", jpeg);
  SetBytes(&ex, "image/format", "JPEG");
  SetBytes(&ex, "image/colorspace", "RGB");
  SetBytes(&ex, "image/filename", "n01440764_" + std::to_string(label) + ".JPEG");
  SetBytes(&ex, "image/class/synset", "n01440764");
  SetInt(&ex, "image/class/label", label);
  SetInt(&ex, "image/height", h);
  SetInt(&ex, "image/width", w);
  SetInt(&ex, "image/channels", 3);
  return ex.SerializeAsString();
}

std::vector<std::string> Jpegs() {
  std::vector<std::string> v;
  int i = 0;
  for (int subsamp : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_GRAY}) {
    for (auto [w, h] : {std::pair{33, 17}, std::pair{120, 64}}) {
      const bool gray = subsamp == TJSAMP_GRAY;
      v.push_back(EncodeTj(MakeImage(w, h, gray ? 1 : 3, ++i), w, h, gray ? TJPF_GRAY : TJPF_RGB,
                           subsamp, 85));
    }
  }
  LibjpegOptions o;
  o.progressive = true;
  v.push_back(EncodeLibjpeg(MakeImage(50, 70, 3, 99), 50, 70, o));
  return v;
}

struct Dataset {
  std::string file;
  std::vector<std::string> jpegs;  // of the good records, in order
};

Dataset GoodDataset() {
  Dataset d;
  d.jpegs = Jpegs();
  for (size_t i = 0; i < d.jpegs.size(); ++i) {
    auto info = ProbeJpeg(reinterpret_cast<const uint8_t*>(d.jpegs[i].data()), d.jpegs[i].size());
    AppendTfRecord(ImageNetRecord(d.jpegs[i], int(i), info->height, info->width), &d.file);
  }
  return d;
}

// Produces every entry of the layout the way the pool will: each record on
// its own, from its raw payload, into its predicted place.
std::string ProduceAll(const ViewLayout& layout, const std::vector<std::string>& payloads,
                       const ViewOptions& options, JpegDecoder& decoder) {
  std::string out(layout.size, '\xee');
  size_t next = 0;
  for (const ViewRecord& r : layout.records) {
    if (r.kind == ViewRecordKind::kFailed) continue;
    std::string_view payload = payloads.at(next++);
    Status st = ProduceTfRecordViewRecord(r, payload, options, decoder,
                                          reinterpret_cast<uint8_t*>(out.data()) + r.out_offset,
                                          r.out_size);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return out;
}

std::vector<std::string> PayloadsOfImages(const std::string& file, const ViewLayout& layout) {
  MemoryByteSource src(file);
  std::vector<std::string> v;
  for (const ViewRecord& r : layout.records) {
    if (r.kind == ViewRecordKind::kImage) v.push_back(*ReadTfRecordAt(src, r.in_offset));
  }
  return v;
}

void CheckOutput(const std::string& out, const ViewLayout& layout,
                 const std::vector<std::string>& jpegs, const ViewOptions& options) {
  MemoryByteSource src(out);
  TfRecordReader reader(&src);
  size_t image = 0;
  for (const ViewRecord& r : layout.records) {
    ASSERT_EQ(ViewRecordKind::kImage, r.kind);
    TfRecordExtent e;
    std::string payload;
    auto got = reader.Next(&e, &payload);  // checks both CRCs
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(*got);
    EXPECT_EQ(r.out_offset, e.offset);
    EXPECT_EQ(r.out_size, e.frame_size());
    auto ex = ParseExample(payload);
    ASSERT_TRUE(ex.ok());
    auto pixels = FindImageBytes(*ex, options.feature);
    ASSERT_TRUE(pixels.ok());
    auto at = [&](const char* key) { return *FindFeature(*ex, key); };
    EXPECT_EQ(r.shape.height, at("image/height").int64_list().value(0));
    EXPECT_EQ(r.shape.width, at("image/width").int64_list().value(0));
    EXPECT_EQ(r.shape.channels, at("image/channels").int64_list().value(0));
    EXPECT_EQ(int64_t(image), at("image/class/label").int64_list().value(0));
    EXPECT_EQ("JPEG", at("image/format").bytes_list().value(0));
    EXPECT_EQ(*pixels, out.substr(r.pixel_offset(), r.shape.pixel_bytes()));
    // The pixels are TurboJPEG's for the same settings.
    int flags = options.decode.dct == DctMethod::kAccurate ? TJFLAG_ACCURATEDCT : TJFLAG_FASTDCT;
    auto want = DecodeTj(jpegs.at(image), r.shape.channels == 1 ? TJPF_GRAY : TJPF_RGB, flags);
    EXPECT_TRUE(std::string(want.begin(), want.end()) == *pixels) << "record " << image;
    ++image;
  }
  TfRecordExtent e;
  auto end = reader.Next(&e, nullptr);
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(*end);
  EXPECT_EQ(jpegs.size(), image);
}

class ViewRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(ViewRoundTrip, ProducedBytesMatchThePrediction) {
  auto spec = ParseViewSpec(GetParam());
  ASSERT_TRUE(spec.ok());
  const ViewOptions& options = spec->options;
  auto decoder = NewCpuJpegDecoder();
  Dataset d = GoodDataset();
  MemoryByteSource src(d.file);
  auto layout = LayoutTfRecordView(src, TfRecordCompression::kNone, options, decoder->name());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_TRUE(layout->errors.empty());
  ASSERT_EQ(d.jpegs.size(), layout->records.size());
  EXPECT_EQ(d.file.size(), layout->source_size);
  EXPECT_EQ(options.Fingerprint(decoder->name()), layout->fingerprint);
  uint64_t sum = 0;
  for (const ViewRecord& r : layout->records) {
    EXPECT_EQ(sum, r.out_offset);
    sum += r.out_size;
  }
  EXPECT_EQ(sum, layout->size);
  std::string out = ProduceAll(*layout, PayloadsOfImages(d.file, *layout), options, *decoder);
  EXPECT_EQ(layout->size, out.size());
  CheckOutput(out, *layout, d.jpegs, options);

  // Produced again (another process, another order): the same bytes.
  std::string again = ProduceAll(*layout, PayloadsOfImages(d.file, *layout), options, *decoder);
  EXPECT_TRUE(out == again);

  // The encoded layout comes back equal.
  auto decoded = DecodeViewLayout(EncodeViewLayout(*layout));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(*layout == *decoded);
}

INSTANTIATE_TEST_SUITE_P(Options, ViewRoundTrip,
                         ::testing::Values("d", "d:dct=accurate", "d:channels=1",
                                           "d:channels=3,dct=accurate"));

std::string Deflate(const std::string& in) {
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
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

TEST(ViewLayoutTest, GzipSourceGivesTheSameView) {
  ViewOptions options;
  auto decoder = NewCpuJpegDecoder();
  Dataset d = GoodDataset();
  MemoryByteSource plain(d.file);
  auto want = LayoutTfRecordView(plain, TfRecordCompression::kNone, options, decoder->name());
  std::string gz = Deflate(d.file);
  MemoryByteSource src(gz);
  auto layout = LayoutTfRecordView(src, TfRecordCompression::kGzip, options, decoder->name());
  ASSERT_TRUE(layout.ok() && want.ok());
  EXPECT_EQ(want->records, layout->records);  // offsets are inflated offsets
  EXPECT_EQ(want->size, layout->size);
  EXPECT_EQ(gz.size(), layout->source_size);
}

// Records that go wrong in every way a scan can find.
struct BadDataset {
  std::string file;
  int good = 0;
  int bad = 0;
};

BadDataset MixedDataset() {
  BadDataset d;
  std::string jpeg = EncodeTj(MakeImage(32, 24, 3), 32, 24, TJPF_RGB, TJSAMP_420);
  auto add = [&](const std::string& payload, bool good) {
    AppendTfRecord(payload, &d.file);
    (good ? d.good : d.bad)++;
  };
  add(ImageNetRecord(jpeg, 0, 24, 32), true);
  add("\xff\xff\xff not a protobuf", false);
  tf::Example no_image;
  SetInt(&no_image, "image/class/label", 3);
  add(no_image.SerializeAsString(), false);
  add(ImageNetRecord("GIF89a....", 0, 1, 1), false);
  add(ImageNetRecord(jpeg.substr(0, 100), 0, 24, 32), false);  // ends inside the header
  std::string huge = jpeg;
  // The SOF0 of a TurboJPEG file: FF C0 00 11 08 HH HH WW WW.
  size_t sof = huge.find("\xff\xc0");
  huge[sof + 5] = huge[sof + 6] = huge[sof + 7] = huge[sof + 8] = '\xff';
  add(ImageNetRecord(huge, 0, 65535, 65535), false);
  add(ImageNetRecord(jpeg, 6, 24, 32), true);
  // A record whose data CRC is wrong: framing intact, the scan goes on.
  std::string crc_bad;
  AppendTfRecord(ImageNetRecord(jpeg, 7, 24, 32), &crc_bad);
  crc_bad[crc_bad.size() - 1] ^= 1;
  d.file += crc_bad;
  d.bad++;
  add(ImageNetRecord(jpeg, 8, 24, 32), true);
  d.file += std::string("\x07\x00\x00", 3);  // a broken tail
  d.bad++;
  return d;
}

// The image/class/label of each record of a view, in order.
std::vector<int64_t> LabelsOf(const std::string& out) {
  MemoryByteSource view(out);
  TfRecordReader reader(&view);
  TfRecordExtent e;
  std::string payload;
  std::vector<int64_t> labels;
  while (*reader.Next(&e, &payload)) {
    labels.push_back(
        FindFeature(*ParseExample(payload), "image/class/label")->int64_list().value(0));
  }
  return labels;
}

TEST(ViewLayoutTest, OnErrorSkipLeavesBadRecordsOut) {
  auto spec = ParseViewSpec("v:on_error=skip");
  auto decoder = NewCpuJpegDecoder();
  BadDataset d = MixedDataset();
  MemoryByteSource src(d.file);
  auto layout = LayoutTfRecordView(src, TfRecordCompression::kNone, spec->options, decoder->name());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(size_t(d.good), layout->records.size());
  ASSERT_EQ(size_t(d.bad), layout->errors.size());
  std::vector<int> codes;
  for (const auto& e : layout->errors) codes.push_back(e.code);
  EXPECT_EQ((std::vector<int>{EBADMSG, ENOENT, EBADMSG, ENODATA, EFBIG, EBADMSG, EBADMSG}), codes);
  EXPECT_NE(std::string::npos, layout->errors[5].message.find("bad data crc"));
  EXPECT_EQ(d.file.size() - 3, layout->errors.back().in_offset);
  std::string out = ProduceAll(*layout, PayloadsOfImages(d.file, *layout), spec->options, *decoder);
  std::vector<int64_t> labels = LabelsOf(out);
  EXPECT_EQ((std::vector<int64_t>{0, 6, 8}), labels);
}

TEST(ViewLayoutTest, OnErrorFailKeepsBadRangesThatReadAsEio) {
  ViewOptions options;  // fail
  auto decoder = NewCpuJpegDecoder();
  BadDataset d = MixedDataset();
  MemoryByteSource src(d.file);
  auto layout = LayoutTfRecordView(src, TfRecordCompression::kNone, options, decoder->name());
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(size_t(d.good + d.bad), layout->records.size());
  EXPECT_EQ(size_t(d.bad), layout->errors.size());
  uint64_t raw_end = 0;
  for (const ViewRecord& r : layout->records) {
    EXPECT_EQ(raw_end, r.in_offset);  // every raw byte is accounted for
    raw_end = r.in_offset + r.in_size;
    if (r.kind == ViewRecordKind::kFailed) {
      EXPECT_EQ(r.in_size, r.out_size);
      std::vector<uint8_t> buf(r.out_size);
      EXPECT_EQ(EIO,
                ProduceTfRecordViewRecord(r, "", options, *decoder, buf.data(), buf.size()).code());
    }
  }
  EXPECT_EQ(d.file.size(), raw_end);
  EXPECT_EQ(ViewRecordKind::kFailed, layout->records.back().kind);
  EXPECT_EQ(3u, layout->records.back().out_size);
  auto decoded = DecodeViewLayout(EncodeViewLayout(*layout));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(*layout == *decoded);
}

TEST(ViewLayoutTest, CorruptScanDataFailsAtProductionNotLayout) {
  std::string jpeg = EncodeTj(MakeImage(64, 64, 3), 64, 64, TJPF_RGB, TJSAMP_444);
  auto info = ProbeJpeg(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size());
  std::string cut = jpeg.substr(0, info->header_size + 10);  // header intact, data cut
  std::string file;
  AppendTfRecord(ImageNetRecord(cut, 0, 64, 64), &file);
  ViewOptions options;
  auto decoder = NewCpuJpegDecoder();
  MemoryByteSource src(file);
  auto layout = LayoutTfRecordView(src, TfRecordCompression::kNone, options, decoder->name());
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(1u, layout->records.size());
  EXPECT_EQ(ViewRecordKind::kImage, layout->records[0].kind);
  std::vector<uint8_t> out(layout->size);
  Status st = ProduceTfRecordViewRecord(layout->records[0], *ReadTfRecordAt(src, 0), options,
                                        *decoder, out.data(), out.size());
  EXPECT_EQ(EBADMSG, st.code()) << st.ToString();
}

// Under on_error=skip with a check, a record whose JPEG probes but does not
// decode is left out like one that does not probe, errors stay in raw order
// across check batches, and every JPEG is checked once; under fail the
// check is not used.
TEST(ViewLayoutTest, OnErrorSkipWithCheckLeavesOutWhatDoesNotDecode) {
  std::string jpeg = EncodeTj(MakeImage(64, 48, 3), 64, 48, TJPF_RGB, TJSAMP_420);
  auto info = ProbeJpeg(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size());
  const std::string cut = jpeg.substr(0, info->header_size + (jpeg.size() - info->header_size) / 2);
  const size_t n = 2 * TfRecordLayoutBuilder::kCheckBatch + 5;
  const std::set<size_t> cut_at = {3, TfRecordLayoutBuilder::kCheckBatch - 1, 40, n - 1};
  const size_t crc_bad = 41;
  std::string file;
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < n; ++i) {
    offsets.push_back(file.size());
    std::string frame;
    AppendTfRecord(ImageNetRecord(cut_at.count(i) ? cut : jpeg, int(i), 48, 64), &frame);
    if (i == crc_bad) frame.back() ^= 1;
    file += frame;
  }
  size_t checked = 0;
  JpegCheck check = [&](const std::vector<std::string_view>& jpegs) {
    EXPECT_LE(jpegs.size(), TfRecordLayoutBuilder::kCheckBatch);
    std::vector<Status> st;
    for (std::string_view j : jpegs) {
      st.push_back(CheckJpegDecodes(reinterpret_cast<const uint8_t*>(j.data()), j.size()));
    }
    checked += jpegs.size();
    return st;
  };
  auto decoder = NewCpuJpegDecoder();
  MemoryByteSource src(file);
  auto spec = ParseViewSpec("v:on_error=skip");
  auto layout =
      LayoutTfRecordView(src, TfRecordCompression::kNone, spec->options, decoder->name(), check);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(n - 1, checked);  // all but the record whose CRC is bad
  ASSERT_EQ(n - cut_at.size() - 1, layout->records.size());
  std::vector<uint64_t> want_errors;
  for (size_t i = 0; i < n; ++i) {
    if (cut_at.count(i) || i == crc_bad) want_errors.push_back(offsets[i]);
  }
  std::vector<uint64_t> got_errors;
  for (const ViewError& e : layout->errors) got_errors.push_back(e.in_offset);
  EXPECT_EQ(want_errors, got_errors);
  EXPECT_EQ(EBADMSG, layout->errors[0].code);
  // The view is the good records, in order, and every one produces.
  std::string out = ProduceAll(*layout, PayloadsOfImages(file, *layout), spec->options, *decoder);
  std::vector<int64_t> labels = LabelsOf(out);
  std::vector<int64_t> want_labels;
  for (size_t i = 0; i < n; ++i) {
    if (!cut_at.count(i) && i != crc_bad) want_labels.push_back(int64_t(i));
  }
  EXPECT_EQ(want_labels, labels);

  checked = 0;
  auto failed =
      LayoutTfRecordView(src, TfRecordCompression::kNone, ViewOptions{}, decoder->name(), check);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(0u, checked);
  EXPECT_EQ(n, failed->records.size());
  EXPECT_EQ(ViewRecordKind::kImage, failed->records[3].kind);  // fails when produced
}

// A JPEG file that does not decode is left out of a checked skip view.
TEST(ViewLayoutTest, NpyViewUnderSkipIsCheckedWhole) {
  std::string jpeg = EncodeTj(MakeImage(64, 48, 3), 64, 48, TJPF_RGB, TJSAMP_420);
  const std::string cut = jpeg.substr(0, jpeg.size() - 100);
  JpegCheck check = [](const std::vector<std::string_view>& jpegs) {
    std::vector<Status> st;
    for (std::string_view j : jpegs) {
      st.push_back(CheckJpegDecodes(reinterpret_cast<const uint8_t*>(j.data()), j.size()));
    }
    return st;
  };
  auto spec = ParseViewSpec("v:on_error=skip");
  MemoryByteSource good(jpeg), bad(cut);
  EXPECT_TRUE(LayoutJpegNpyView(good, spec->options, "d", check).ok());
  EXPECT_EQ(EBADMSG, LayoutJpegNpyView(bad, spec->options, "d", check).status().code());
  EXPECT_TRUE(LayoutJpegNpyView(bad, spec->options, "d").ok());  // no check: not seen
  auto fail = LayoutJpegNpyView(bad, ViewOptions{}, "d", check);
  ASSERT_TRUE(fail.ok());
  EXPECT_FALSE(fail->npy_failed());  // fail: found when produced
}

TEST(ViewLayoutTest, ChangedRawRecordIsDetected) {
  Dataset d = GoodDataset();
  ViewOptions options;
  auto decoder = NewCpuJpegDecoder();
  MemoryByteSource src(d.file);
  auto layout = LayoutTfRecordView(src, TfRecordCompression::kNone, options, decoder->name());
  ASSERT_TRUE(layout.ok());
  const ViewRecord& r = layout->records[0];
  std::string other = ImageNetRecord(d.jpegs[3], 0, 1, 1);  // a different image
  std::vector<uint8_t> out(r.out_size);
  Status st = ProduceTfRecordViewRecord(r, other, options, *decoder, out.data(), out.size());
  EXPECT_EQ(EBADMSG, st.code());
  EXPECT_NE(std::string::npos, st.message().find("does not match its layout"));
}

TEST(ViewLayoutTest, RecordLookup) {
  Dataset d = GoodDataset();
  MemoryByteSource src(d.file);
  auto layout = LayoutTfRecordView(src, TfRecordCompression::kNone, {}, "x");
  ASSERT_TRUE(layout.ok());
  const auto& recs = layout->records;
  for (size_t i = 0; i < recs.size(); ++i) {
    EXPECT_EQ(i, layout->RecordAt(recs[i].out_offset));
    EXPECT_EQ(i, layout->RecordAt(recs[i].out_end() - 1));
    EXPECT_EQ(std::make_pair(i, i + 1), layout->RecordsOverlapping(recs[i].out_offset, 1));
  }
  EXPECT_EQ(recs.size(), layout->RecordAt(layout->size));
  EXPECT_EQ(std::make_pair(size_t(0), recs.size()), layout->RecordsOverlapping(0, layout->size));
  EXPECT_EQ(std::make_pair(size_t(1), size_t(3)),
            layout->RecordsOverlapping(recs[1].out_end() - 1, recs[2].out_size + 1));
  EXPECT_EQ(std::make_pair(recs.size(), recs.size()), layout->RecordsOverlapping(layout->size, 10));
  EXPECT_EQ(std::make_pair(recs.size(), recs.size()), layout->RecordsOverlapping(5, 0));
}

TEST(ViewLayoutTest, EncodedLayoutRefusesCorruption) {
  BadDataset d = MixedDataset();
  MemoryByteSource src(d.file);
  auto layout = LayoutTfRecordView(src, TfRecordCompression::kNone, {}, "x");
  ASSERT_TRUE(layout.ok());
  const std::string enc = EncodeViewLayout(*layout);
  for (size_t i = 0; i < enc.size(); ++i) {
    std::string bad = enc;
    bad[i] ^= 0x10;
    EXPECT_FALSE(DecodeViewLayout(bad).ok()) << i;
  }
  for (size_t n = 0; n < enc.size(); ++n) EXPECT_FALSE(DecodeViewLayout(enc.substr(0, n)).ok());
  // Random bodies with a valid checksum reach the structural checks.
  std::mt19937 rng(31);
  for (int i = 0; i < 20000; ++i) {
    std::string body = enc.substr(0, enc.size() - 4);
    for (int k = 0; k < 1 + i % 4; ++k) body[4 + rng() % (body.size() - 4)] = char(rng());
    uint32_t crc = Crc32c(body.data(), body.size());
    for (int b = 0; b < 4; ++b) body.push_back(static_cast<char>(crc >> (8 * b)));
    auto got = DecodeViewLayout(body);
    if (!got.ok()) continue;
    uint64_t sum = 0;
    for (const auto& r : got->records) sum += r.out_size;
    EXPECT_EQ(got->size, sum);
  }
}

TEST(ViewLayoutTest, NpyViewOfAJpegFile) {
  std::string jpeg = EncodeTj(MakeImage(75, 50, 3), 75, 50, TJPF_RGB, TJSAMP_422);
  // Push the frame header past the first read with big COM segments.
  std::string padded = jpeg.substr(0, 2);
  for (int i = 0; i < 3; ++i) {
    padded += "\xff\xfe\xff\xf0";
    padded += std::string(0xfff0 - 2, 'c');
  }
  padded += jpeg.substr(2);
  auto decoder = NewCpuJpegDecoder();
  for (const std::string& file : {jpeg, padded}) {
    for (int ch : {0, 1}) {
      ViewOptions options;
      options.decode.channels = ch;
      MemoryByteSource src(file);
      auto layout = LayoutJpegNpyView(src, options, decoder->name());
      ASSERT_TRUE(layout.ok()) << layout.status().ToString();
      const uint32_t c = ch == 0 ? 3 : 1;
      EXPECT_EQ((ImageShape{50, 75, c}), layout->shape);
      EXPECT_EQ(layout->npy_header_size + 50 * 75 * c, layout->size);
      std::vector<uint8_t> out(layout->size);
      ASSERT_TRUE(ProduceNpyView(*layout, file, options, *decoder, out.data(), out.size()).ok());
      auto npy = ParseNpyHeader(std::string_view(reinterpret_cast<char*>(out.data()), out.size()));
      ASSERT_TRUE(npy.ok());
      EXPECT_EQ((std::vector<uint64_t>{50, 75, c}), npy->shape);
      EXPECT_EQ(layout->npy_header_size, npy->data_offset);
      auto want = DecodeTj(jpeg, c == 1 ? TJPF_GRAY : TJPF_RGB, TJFLAG_FASTDCT);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin() + npy->data_offset));
      auto back = DecodeViewLayout(EncodeViewLayout(*layout));
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_TRUE(*layout == *back);
    }
  }
}

TEST(ViewLayoutTest, NpyViewOfABadJpeg) {
  std::string jpeg = EncodeTj(MakeImage(20, 20, 3), 20, 20, TJPF_RGB, TJSAMP_444);
  std::string cut = jpeg.substr(0, 60);
  auto decoder = NewCpuJpegDecoder();
  MemoryByteSource src(cut);
  ViewOptions fail;
  auto layout = LayoutJpegNpyView(src, fail, decoder->name());
  ASSERT_TRUE(layout.ok());
  EXPECT_TRUE(layout->npy_failed());
  EXPECT_EQ(cut.size(), layout->size);
  ASSERT_EQ(1u, layout->errors.size());
  EXPECT_EQ(ENODATA, layout->errors[0].code);
  std::vector<uint8_t> out(layout->size);
  EXPECT_EQ(EIO, ProduceNpyView(*layout, cut, fail, *decoder, out.data(), out.size()).code());
  auto back = DecodeViewLayout(EncodeViewLayout(*layout));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*layout == *back);
  ViewOptions skip;
  skip.on_error = OnError::kSkip;
  EXPECT_EQ(ENODATA, LayoutJpegNpyView(src, skip, decoder->name()).status().code());
}

}  // namespace
}  // namespace stoker
