#include "decode/tfrecord/tfrecord_compressed.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <string>
#include <vector>

namespace stoker {
namespace {

std::string Deflate(const std::string& in, TfRecordCompression kind) {
  z_stream zs{};
  int bits = kind == TfRecordCompression::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
  EXPECT_EQ(Z_OK, deflateInit2(&zs, 6, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY));
  std::string out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = in.size();
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = out.size();
  EXPECT_EQ(Z_STREAM_END, deflate(&zs, Z_FINISH));
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::vector<std::string> Payloads() {
  std::vector<std::string> v = {"", "x", "some text payload"};
  std::mt19937 rng(9);
  for (size_t n : {1000, 70000, 600000}) {  // larger than the input buffer too
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng() % 7);  // compressible
    v.push_back(s);
  }
  return v;
}

std::string Framed(const std::vector<std::string>& payloads) {
  std::string f;
  for (const auto& p : payloads) AppendTfRecord(p, &f);
  return f;
}

std::vector<std::string> ReadAll(const std::string& compressed, TfRecordCompression kind,
                                 Status* status) {
  MemoryByteSource src(compressed);
  CompressedTfRecordReader reader(&src, kind);
  std::vector<std::string> out;
  uint64_t offset = 0;
  for (;;) {
    TfRecordExtent e;
    std::string data;
    auto got = reader.Next(&e, &data);
    if (!got.ok()) {
      *status = got.status();
      return out;
    }
    if (!*got) break;
    EXPECT_EQ(offset, e.offset);
    offset = e.end();
    out.push_back(data);
  }
  *status = Status::OK();
  return out;
}

class CompressedTest : public ::testing::TestWithParam<TfRecordCompression> {};

TEST_P(CompressedTest, RoundTrip) {
  auto payloads = Payloads();
  std::string z = Deflate(Framed(payloads), GetParam());
  Status s;
  EXPECT_EQ(payloads, ReadAll(z, GetParam(), &s));
  EXPECT_TRUE(s.ok()) << s.ToString();
  MemoryByteSource src(z);
  EXPECT_TRUE(IsCompressedTfRecord(src, GetParam()));
  EXPECT_EQ(GetParam(), SniffCompression(reinterpret_cast<const uint8_t*>(z.data()), z.size()));
}

TEST_P(CompressedTest, TruncatedStreamIsAnErrorAtEveryCut) {
  std::string z = Deflate(Framed({"abc", std::string(5000, 'q'), "tail"}), GetParam());
  for (size_t cut = 0; cut < z.size(); cut += 1 + cut / 16) {
    Status s;
    ReadAll(z.substr(0, cut), GetParam(), &s);
    if (cut == 0) {
      EXPECT_TRUE(s.ok()) << "an empty file is an empty stream: " << s.ToString();
      continue;
    }
    EXPECT_EQ(EBADMSG, s.code()) << "cut " << cut << ": " << s.ToString();
  }
}

TEST_P(CompressedTest, CorruptDataIsAnError) {
  std::string z = Deflate(Framed(Payloads()), GetParam());
  std::mt19937 rng(1);
  int errors = 0;
  for (int i = 0; i < 50; ++i) {
    std::string bad = z;
    bad[10 + rng() % (bad.size() - 10)] ^= static_cast<char>(1 + rng() % 255);
    Status s;
    ReadAll(bad, GetParam(), &s);
    errors += !s.ok();
  }
  EXPECT_GT(errors, 40);  // a flip may land where deflate tolerates it, rarely
}

TEST_P(CompressedTest, InflatedCrcErrorsAreReported) {
  std::string framed = Framed({"good", "evil", "good"});
  framed[12 + 4 + 4 + 12] ^= 1;  // data of the second record
  Status s;
  auto got = ReadAll(Deflate(framed, GetParam()), GetParam(), &s);
  EXPECT_EQ(1u, got.size());
  EXPECT_NE(std::string::npos, s.message().find("bad data crc")) << s.ToString();
}

INSTANTIATE_TEST_SUITE_P(Kinds, CompressedTest,
                         ::testing::Values(TfRecordCompression::kGzip, TfRecordCompression::kZlib));

TEST(CompressedTfRecordTest, ConcatenatedGzipMembers) {
  std::string a = Framed({"one", "two"}), b = Framed({"three"});
  std::string z = Deflate(a, TfRecordCompression::kGzip) + Deflate(b, TfRecordCompression::kGzip);
  Status s;
  std::vector<std::string> want = {"one", "two", "three"};
  EXPECT_EQ(want, ReadAll(z, TfRecordCompression::kGzip, &s));
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(CompressedTfRecordTest, NotCompressedOrNotTfRecord) {
  std::string plain = Framed({"abc"});
  MemoryByteSource src(plain);
  EXPECT_FALSE(IsCompressedTfRecord(src, TfRecordCompression::kGzip));
  std::string z = Deflate("just some text, not records", TfRecordCompression::kGzip);
  MemoryByteSource src2(z);
  EXPECT_FALSE(IsCompressedTfRecord(src2, TfRecordCompression::kGzip));
  EXPECT_FALSE(IsCompressedTfRecord(src2, TfRecordCompression::kZlib));  // wrong wrapper
  EXPECT_EQ(TfRecordCompression::kNone,
            SniffCompression(reinterpret_cast<const uint8_t*>(plain.data()), plain.size()));
}

TEST(CompressedTfRecordTest, CompressionFromName) {
  EXPECT_EQ(TfRecordCompression::kGzip, CompressionFromName("train-00001.tfrecord.gz"));
  EXPECT_EQ(TfRecordCompression::kGzip, CompressionFromName("a.gzip"));
  EXPECT_EQ(TfRecordCompression::kZlib, CompressionFromName("a.zlib"));
  EXPECT_EQ(TfRecordCompression::kZlib, CompressionFromName("a.zz"));
  EXPECT_EQ(TfRecordCompression::kNone, CompressionFromName("train-00001-of-01024"));
  EXPECT_EQ(TfRecordCompression::kNone, CompressionFromName("gz"));
}

}  // namespace
}  // namespace stoker
