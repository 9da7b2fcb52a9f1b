#include "decode/tar/tar_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace stoker {
namespace {

std::vector<TarMember> ReadAll(const std::string& archive, Status* error = nullptr,
                               uint64_t* end = nullptr) {
  MemoryByteSource src(archive);
  TarReader reader(&src);
  std::vector<TarMember> out;
  for (;;) {
    TarMember m;
    auto got = reader.Next(&m);
    if (!got.ok()) {
      if (error) *error = got.status();
      break;
    }
    if (!*got) break;
    out.push_back(m);
  }
  if (end) *end = reader.offset();
  return out;
}

// The first header block of member with another type and size field, its
// checksum made good again.
std::string Retyped(const std::string& member, char type, uint64_t size) {
  std::string h = member.substr(0, 512);
  h[156] = type;
  std::snprintf(&h[124], 12, "%011llo", static_cast<unsigned long long>(size));
  SealTarHeader(reinterpret_cast<uint8_t*>(h.data()));
  return h;
}

TEST(TarFormat, ReadsMembersOfEachFormat) {
  const std::string long_dir(120, 'd');
  const std::string a = TarMemberBytes("k1.cls", "7");
  const std::string b = TarMemberBytes(long_dir + "/k1.jpg", std::string(700, 'j'));
  const std::string c = TarMemberBytes(std::string(150, 'g') + ".jpeg", "xy", TarFormat::kGnu);
  const std::string d = TarMemberBytes(std::string(300, 'p') + ".jpg", "z", TarFormat::kPax);
  const std::string archive = a + b + c + d + TarEnd();
  uint64_t end = 0;
  std::vector<TarMember> m = ReadAll(archive, nullptr, &end);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].name, "k1.cls");
  EXPECT_EQ(m[0].offset, 0u);
  EXPECT_EQ(m[0].data_offset, 512u);
  EXPECT_EQ(m[0].size, 1u);
  EXPECT_EQ(m[0].end(), 1024u);
  EXPECT_TRUE(m[0].is_regular());
  EXPECT_EQ(m[1].name, long_dir + "/k1.jpg");  // ustar prefix + name
  EXPECT_EQ(m[1].offset, a.size());
  EXPECT_EQ(m[1].size, 700u);
  EXPECT_EQ(m[2].name, std::string(150, 'g') + ".jpeg");  // GNU long name
  EXPECT_EQ(m[2].offset, a.size() + b.size());
  EXPECT_EQ(m[2].data_offset, a.size() + b.size() + 3 * 512);  // L header, name, header
  EXPECT_EQ(m[3].name, std::string(300, 'p') + ".jpg");        // pax path
  EXPECT_EQ(m[3].end(), archive.size() - 1024);
  EXPECT_EQ(end, archive.size() - 1024);
}

TEST(TarFormat, EndsAtTheFileEndOnABlockBoundary) {
  const std::string archive = TarMemberBytes("a.cls", "1");
  uint64_t end = 0;
  Status error;
  EXPECT_EQ(ReadAll(archive, &error, &end).size(), 1u);
  EXPECT_TRUE(error.ok());
  EXPECT_EQ(end, archive.size());
}

TEST(TarFormat, DataErrorsNameTheOffset) {
  std::string archive = TarMemberBytes("a.cls", "1") + TarMemberBytes("b.cls", "2") + TarEnd();
  std::string bad = archive;
  bad[1024 + 3] ^= 1;  // b's name: its checksum no longer matches
  Status error;
  EXPECT_EQ(ReadAll(bad, &error).size(), 1u);
  EXPECT_EQ(error.code(), EBADMSG);
  EXPECT_NE(error.message().find("bad header checksum at offset 1024"), std::string::npos);

  const std::string cut = TarMemberBytes("a.cls", std::string(2000, 'x')).substr(0, 1500);
  EXPECT_EQ(ReadAll(cut, &error).size(), 0u);
  EXPECT_NE(error.message().find("runs past the end"), std::string::npos);

  EXPECT_EQ(ReadAll(archive.substr(0, 1324), &error).size(), 1u);  // a, then part of a header
  EXPECT_NE(error.message().find("truncated header"), std::string::npos);

  // A long name with no member after it.
  const std::string orphan =
      TarMemberBytes(std::string(200, 'n'), "", TarFormat::kGnu).substr(0, 1024);
  EXPECT_EQ(ReadAll(orphan + TarEnd(), &error).size(), 0u);
  EXPECT_NE(error.message().find("after an extension header"), std::string::npos);
}

TEST(TarFormat, RecognisesHeadersAndEmptyArchives) {
  const std::string m = TarMemberBytes("a.jpg", "1");
  EXPECT_TRUE(IsTarBlock(reinterpret_cast<const uint8_t*>(m.data())));
  EXPECT_TRUE(IsTarBlock(reinterpret_cast<const uint8_t*>(TarEnd().data())));
  std::string text(512, 'a');
  EXPECT_FALSE(IsTarBlock(reinterpret_cast<const uint8_t*>(text.data())));
}

// Headers followed by as many zeros as the file claims (a member of 8 GiB
// without 8 GiB of memory).
class HeadersThenZeros final : public ByteSource {
 public:
  HeadersThenZeros(std::string headers, uint64_t size) : h_(std::move(headers)), size_(size) {}
  uint64_t size() const override { return size_; }
  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override {
    if (off >= size_) return size_t{0};
    len = static_cast<size_t>(std::min<uint64_t>(len, size_ - off));
    for (size_t i = 0; i < len; ++i) {
      static_cast<char*>(buf)[i] = off + i < h_.size() ? h_[off + i] : '\0';
    }
    return len;
  }

 private:
  const std::string h_;
  const uint64_t size_;
};

// Rewrites the member at the start of archive for a new size; returns the
// member read back from the rewritten headers.
TarMember Rewritten(const std::string& member, std::string_view old_suffix, uint64_t new_size,
                    std::string* headers_out = nullptr) {
  MemoryByteSource src(member);
  TarReader reader(&src);
  TarMember m;
  EXPECT_TRUE(*reader.Next(&m));
  auto headers = RewriteTarHeaders(std::string_view(member).substr(0, m.data_offset), old_suffix,
                                   ".npy", new_size);
  EXPECT_TRUE(headers.ok()) << headers.status().message();
  if (headers_out) *headers_out = *headers;
  HeadersThenZeros again(*headers, headers->size() + TarPadded(new_size) + 1024);
  TarReader back(&again);
  TarMember out;
  EXPECT_TRUE(*back.Next(&out));
  EXPECT_FALSE(*back.Next(&m));
  return out;
}

TEST(TarFormat, RewritesNameAndSizeInEachFormat) {
  TarMember m = Rewritten(TarMemberBytes("dir/k.jpg", "abc"), ".jpg", 5000);
  EXPECT_EQ(m.name, "dir/k.npy");
  EXPECT_EQ(m.size, 5000u);
  EXPECT_EQ(m.data_offset, 512u);

  const std::string deep = std::string(120, 'd') + "/k.JPEG";
  m = Rewritten(TarMemberBytes(deep, "abc"), ".JPEG", 77);
  EXPECT_EQ(m.name, std::string(120, 'd') + "/k.npy");

  const std::string gnu = std::string(507, 'g') + ".jpeg";  // the long name shrinks a block
  std::string headers;
  m = Rewritten(TarMemberBytes(gnu, "abc", TarFormat::kGnu), ".jpeg", 123456, &headers);
  EXPECT_EQ(m.name, std::string(507, 'g') + ".npy");
  EXPECT_EQ(m.size, 123456u);
  EXPECT_EQ(headers.size(), 3 * 512u);

  const std::string pax = std::string(95, 'p') + ".jpeg";  // LEN goes from 3 digits to 2
  m = Rewritten(TarMemberBytes(std::string(200, 'q') + pax, "abc", TarFormat::kPax), ".jpeg", 9);
  EXPECT_EQ(m.name, std::string(200, 'q') + std::string(95, 'p') + ".npy");

  // Past 8 GiB the size goes base-256.
  m = Rewritten(TarMemberBytes("k.jpg", "abc"), ".jpg", (uint64_t{1} << 33) + 5);
  EXPECT_EQ(m.size, (uint64_t{1} << 33) + 5);
}

TEST(TarFormat, RewriteKeepsEveryOtherByte) {
  const std::string member = TarMemberBytes("k.jpg", "abc");
  std::string headers;
  Rewritten(member, ".jpg", 3, &headers);
  // Same name length and size: only the name's suffix and the checksum move.
  ASSERT_EQ(headers.size(), 512u);
  for (size_t i = 0; i < 512; ++i) {
    if ((i >= 1 && i < 5) || (i >= 148 && i < 156)) continue;
    EXPECT_EQ(headers[i], member[i]) << "byte " << i;
  }
}

TEST(TarFormat, RewriteOfAPaxSizeRecord) {
  // A pax header that also gives the size (as writers do past 8 GiB).
  const std::string pax = "16 size=1000000\n19 path=a/long.jpg\n";
  const std::string pax_member = TarMemberBytes("PaxHeader", pax);
  const std::string raw = Retyped(pax_member, 'x', pax.size()) + pax_member.substr(512) +
                          TarMemberBytes("long.jpg", "abc").substr(0, 512);
  auto headers = RewriteTarHeaders(raw, ".jpg", ".npy", 42);
  ASSERT_TRUE(headers.ok()) << headers.status().message();
  std::vector<TarMember> back = ReadAll(*headers + std::string(512, 'p') + TarEnd());
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].name, "a/long.npy");
  EXPECT_EQ(back[0].size, 42u);  // the pax record's, rewritten
  EXPECT_NE(headers->find("11 size=42\n"), std::string::npos);
  // An extension header alone is no member.
  EXPECT_EQ(
      RewriteTarHeaders(std::string_view(raw).substr(0, 1024), ".jpg", ".npy", 1).status().code(),
      EBADMSG);
}

TEST(TarFormat, RewriteRefusesAMemberWithAnotherSuffix) {
  const std::string member = TarMemberBytes("k.png", "abc");
  EXPECT_EQ(
      RewriteTarHeaders(std::string_view(member).substr(0, 512), ".jpg", ".npy", 1).status().code(),
      EINVAL);
}

TEST(TarFormat, LinksAndDirectoriesCarryNoData) {
  // Claims 512 bytes of data: readers ignore it for a directory.
  const std::string archive =
      Retyped(TarMemberBytes("d/", ""), '5', 512) + TarMemberBytes("d/a.cls", "1") + TarEnd();
  std::vector<TarMember> m = ReadAll(archive);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].size, 0u);
  EXPECT_FALSE(m[0].is_regular());
  EXPECT_EQ(m[1].name, "d/a.cls");
}

}  // namespace
}  // namespace stoker
