#include "decode/tfrecord/tfrecord.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "decode/tfrecord/crc32c.h"

namespace stoker {
namespace {

std::vector<std::string> Payloads() {
  std::vector<std::string> v = {"", "a", "hello world", std::string(1000, 'x')};
  std::mt19937 rng(3);
  std::string big(300000, '\0');
  for (auto& c : big) c = static_cast<char>(rng());
  v.push_back(big);
  return v;
}

std::string FileOf(const std::vector<std::string>& payloads) {
  std::string file;
  for (const auto& p : payloads) AppendTfRecord(p, &file);
  return file;
}

TEST(TfRecordTest, FrameLayoutIsTensorFlows) {
  std::string file;
  AppendTfRecord("abc", &file);
  ASSERT_EQ(file.size(), 3 + kTfRecordOverhead);
  EXPECT_EQ(std::string("\x03\0\0\0\0\0\0\0", 8), file.substr(0, 8));
  uint32_t len_crc, data_crc;
  std::memcpy(&len_crc, file.data() + 8, 4);
  std::memcpy(&data_crc, file.data() + 15, 4);
  EXPECT_EQ(MaskCrc(Crc32c(file.data(), 8)), len_crc);
  EXPECT_EQ(MaskCrc(Crc32c("abc", 3)), data_crc);
  EXPECT_EQ("abc", file.substr(12, 3));
}

TEST(TfRecordTest, RoundTripWithExtents) {
  auto payloads = Payloads();
  std::string file = FileOf(payloads);
  MemoryByteSource src(file);
  TfRecordReader reader(&src);
  uint64_t offset = 0;
  for (const auto& want : payloads) {
    TfRecordExtent e;
    std::string data;
    auto got = reader.Next(&e, &data);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(*got);
    EXPECT_EQ(offset, e.offset);
    EXPECT_EQ(want.size(), e.length);
    EXPECT_EQ(want, data);
    EXPECT_EQ(want, file.substr(e.data_offset(), e.length));
    offset = e.end();
  }
  TfRecordExtent e;
  auto end = reader.Next(&e, nullptr);
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(*end);
  EXPECT_EQ(file.size(), offset);
}

TEST(TfRecordTest, ExtentsOnlyStillCheckCrc) {
  auto payloads = Payloads();
  std::string file = FileOf(payloads);
  file[file.size() - 10] ^= 1;  // inside the last (big) payload
  MemoryByteSource src(file);
  TfRecordReader reader(&src);
  TfRecordExtent e;
  for (size_t i = 0; i + 1 < payloads.size(); ++i) ASSERT_TRUE(*reader.Next(&e, nullptr));
  auto got = reader.Next(&e, nullptr);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(std::string::npos, got.status().message().find("bad data crc"));
}

TEST(TfRecordTest, EmptySourceHasNoRecords) {
  MemoryByteSource src("");
  TfRecordReader reader(&src);
  TfRecordExtent e;
  auto got = reader.Next(&e, nullptr);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
}

Status NextError(const std::string& file, int skip_records = 0) {
  MemoryByteSource src(file);
  TfRecordReader reader(&src);
  TfRecordExtent e;
  std::string data;
  for (int i = 0; i < skip_records; ++i) {
    auto r = reader.Next(&e, &data);
    if (!r.ok()) return Status::Invalid("unexpected early error: " + r.status().ToString());
  }
  auto r = reader.Next(&e, &data);
  if (r.ok()) return Status::OK();
  return r.status();
}

TEST(TfRecordTest, TruncatedHeader) {
  std::string file = FileOf({"one", "two"});
  file += std::string("\x05\0\0\0\0", 5);
  Status s = NextError(file, 2);
  EXPECT_EQ(EBADMSG, s.code());
  EXPECT_NE(std::string::npos, s.message().find("truncated header")) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find("offset 38")) << s.ToString();
}

TEST(TfRecordTest, LengthPastEnd) {
  std::string file = FileOf({"payload"});
  for (size_t cut = kTfRecordHeaderSize; cut < file.size(); ++cut) {
    Status s = NextError(file.substr(0, cut));
    EXPECT_EQ(EBADMSG, s.code()) << cut;
    EXPECT_NE(std::string::npos, s.message().find("past end")) << s.ToString();
  }
  // A header claiming a huge length with a matching CRC.
  uint8_t header[kTfRecordHeaderSize];
  EncodeTfRecordHeader(uint64_t{1} << 40, header);
  std::string huge(reinterpret_cast<char*>(header), sizeof(header));
  huge += "tiny";
  EXPECT_NE(std::string::npos, NextError(huge).message().find("past end"));
}

TEST(TfRecordTest, BadLengthCrc) {
  std::string file = FileOf({"payload"});
  file[0] ^= 0x01;
  Status s = NextError(file);
  EXPECT_EQ(EBADMSG, s.code());
  EXPECT_NE(std::string::npos, s.message().find("bad length crc")) << s.ToString();
  std::string file2 = FileOf({"payload"});
  file2[9] ^= 0x80;  // the CRC itself
  EXPECT_NE(std::string::npos, NextError(file2).message().find("bad length crc"));
}

TEST(TfRecordTest, BadDataCrcIsNotStickyOtherErrorsAre) {
  std::string file = FileOf({"first", "second", "third"});
  file[kTfRecordHeaderSize + 5 + 4 + kTfRecordHeaderSize] ^= 0x20;  // 's' of "second"
  MemoryByteSource src(file);
  TfRecordReader reader(&src);
  TfRecordExtent e;
  std::string data;
  ASSERT_TRUE(*reader.Next(&e, &data));
  auto bad = reader.Next(&e, &data);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string::npos, bad.status().message().find("bad data crc"));
  EXPECT_TRUE(reader.framing_intact());
  EXPECT_EQ(6u, e.length);  // the extent of the bad record is reported
  auto third = reader.Next(&e, &data);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ("third", data);

  std::string broken = FileOf({"first", "second"});
  broken[kTfRecordHeaderSize + 5 + 4] ^= 1;  // length of "second"
  MemoryByteSource src2(broken);
  TfRecordReader reader2(&src2);
  ASSERT_TRUE(*reader2.Next(&e, &data));
  EXPECT_FALSE(reader2.Next(&e, &data).ok());
  EXPECT_FALSE(reader2.framing_intact());
  EXPECT_FALSE(reader2.Next(&e, &data).ok());  // sticky
  reader2.Seek(0);                             // an index position clears it
  EXPECT_TRUE(*reader2.Next(&e, &data));
}

TEST(TfRecordTest, MaxRecordLength) {
  std::string file = FileOf({std::string(100, 'z')});
  MemoryByteSource src(file);
  TfRecordReaderOptions options;
  options.max_record_length = 99;
  TfRecordReader reader(&src, options);
  TfRecordExtent e;
  auto r = reader.Next(&e, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string::npos, r.status().message().find("exceeds the limit"));
}

TEST(TfRecordTest, ReadAtIndexOffset) {
  auto payloads = Payloads();
  std::string file = FileOf(payloads);
  MemoryByteSource src(file);
  uint64_t off = 0;
  for (const auto& p : payloads) {
    auto got = ReadTfRecordAt(src, off);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(p, *got);
    off += p.size() + kTfRecordOverhead;
  }
  EXPECT_FALSE(ReadTfRecordAt(src, off).ok());  // at the end
  EXPECT_FALSE(ReadTfRecordAt(src, 1).ok());    // not a frame start
}

TEST(TfRecordTest, Sniffing) {
  std::string file = FileOf({"abc", "def"});
  auto* p = reinterpret_cast<const uint8_t*>(file.data());
  EXPECT_TRUE(IsTfRecord(p, file.size(), file.size()));
  EXPECT_TRUE(IsTfRecord(p, kTfRecordHeaderSize, file.size()));
  EXPECT_FALSE(IsTfRecord(p, kTfRecordHeaderSize - 1, file.size()));            // too few bytes
  EXPECT_FALSE(IsTfRecord(p, kTfRecordHeaderSize, 3 + kTfRecordOverhead - 1));  // doesn't fit
  std::string jpeg = "\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01";
  EXPECT_FALSE(IsTfRecord(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), 100000));
  std::mt19937 rng(5);
  int hits = 0;
  for (int i = 0; i < 20000; ++i) {
    uint8_t buf[kTfRecordHeaderSize];
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    hits += IsTfRecord(buf, sizeof(buf), uint64_t{1} << 62);
  }
  EXPECT_EQ(0, hits);
}

TEST(TfRecordTest, FileByteSource) {
  auto payloads = Payloads();
  std::string file = FileOf(payloads);
  char path[] = "/tmp/stoker_tfrecord_testXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(static_cast<ssize_t>(file.size()), write(fd, file.data(), file.size()));
  close(fd);
  auto src = FileByteSource::Open(path);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(file.size(), (*src)->size());
  TfRecordReader reader(src->get());
  TfRecordExtent e;
  std::string data;
  for (const auto& want : payloads) {
    ASSERT_TRUE(*reader.Next(&e, &data));
    EXPECT_EQ(want, data);
  }
  unlink(path);
  EXPECT_EQ(ENOENT, FileByteSource::Open(path).status().code());
}

}  // namespace
}  // namespace stoker
