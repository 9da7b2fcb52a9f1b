// Tar views (WebDataset shards) through ViewOrigin over a real ObjectCache:
// a *.tar file is listed under its name, reads in any pieces give what the
// producer makes of it, a read decodes only the image members it covers,
// and an image that fails at decode reads as EIO while its neighbours stay
// readable.
#include <gtest/gtest.h>

#include <cstring>

#include "decode/tar/tar_format.h"
#include "decode/view/tar_view.h"
#include "decode/view/view_origin.h"
#include "decode/view/view_origin_test_util.h"

namespace stoker {
namespace view_test {
namespace {

// What the tar view of data must read as, made without the cache.
std::string ExpectedTar(const std::string& data, const ViewOptions& o) {
  auto decoder = NewCpuJpegDecoder();
  MemoryByteSource src(data);
  ViewLayout l = *LayoutTarView(src, o, decoder->name());
  std::string out(l.size, '\0');
  for (const ViewRecord& r : l.records) {
    auto* to = reinterpret_cast<uint8_t*>(out.data() + r.out_offset);
    if (r.kind == ViewRecordKind::kCopy) std::memcpy(to, data.data() + r.in_offset, r.in_size);
    if (r.kind != ViewRecordKind::kImage) continue;
    EXPECT_TRUE(ProduceTarViewMember(r, std::string_view(data).substr(r.in_offset, r.in_size), o,
                                     *decoder, to, r.out_size)
                    .ok());
  }
  return out;
}

class ViewOriginTarTest : public ViewOriginTest {
 protected:
  void SetUp() override {
    ViewOriginTest::SetUp();
    for (int i = 0; i < 6; ++i) {
      const std::string key = "s" + std::to_string(i);
      tar_ += TarMemberBytes(key + ".jpg", Jpeg(60 + 13 * i, 40 + 7 * i, 10 + i, i == 2));
      tar_ += TarMemberBytes(key + ".cls", std::to_string(i));
    }
    tar_ += TarEnd();
    WriteFile(dir_.Sub("origin/train/shard-0.tar"), tar_);
    WriteFile(dir_.Sub("origin/train/notes.tar"), "a text file named like a tar");
  }
  std::string tar_;
};

TEST_F(ViewOriginTarTest, ListedUnderItsNameAndReadInAnyPieces) {
  Mount({"decoded"});
  std::set<std::string> names;
  for (const OriginDirEntry& e : List(*views_.origin, ".decoded/train")) names.insert(e.name);
  EXPECT_EQ(names, (std::set<std::string>{"a.jpg.npy", "shard-0", "shard-0.tar"}));
  const std::string want = ExpectedTar(tar_, ViewOptions{});
  auto st = views_.origin->Stat(".decoded/train/shard-0.tar");
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(static_cast<uint64_t>(st->st_size), want.size());
  for (size_t piece : {size_t{777}, size_t{5000}, size_t{70000}}) {
    Mount({"decoded"});  // nothing cached of the view yet but the layout
    auto got = ReadAll(".decoded/train/shard-0.tar", piece);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(*got == want) << "piece " << piece;
  }
}

TEST_F(ViewOriginTarTest, AReadDecodesOnlyTheMembersItCovers) {
  prefetch_bytes_ = 0;
  Mount({"decoded"});
  const std::string path = ".decoded/train/shard-0.tar";
  MemoryByteSource src(tar_);
  ViewLayout l = *LayoutTarView(src, ViewOptions{}, "cpu");
  // Record 4 is the third image (s2.jpg); read a few bytes of its pixels.
  ASSERT_EQ(l.records[4].kind, ViewRecordKind::kImage);
  auto o = cache_->Open(path, false);
  ASSERT_TRUE(o.ok()) << o.status().message();
  ReadReply r;
  ASSERT_TRUE(cache_->Read(*o->file, l.records[4].out_offset + 1000, 10, &r).ok());
  const std::string want = ExpectedTar(tar_, ViewOptions{});
  EXPECT_EQ(Materialize(r), want.substr(l.records[4].out_offset + 1000, 10));
  // The cache reads whole 16 KiB chunks: those of the members the chunk
  // holds are decoded, no others.
  const uint64_t chunk = 16 << 10;
  const uint64_t a = (l.records[4].out_offset + 1000) / chunk * chunk;
  auto [first, last] = l.RecordsOverlapping(a, chunk);
  uint64_t images = 0;
  for (size_t i = first; i < last; ++i) images += l.records[i].kind == ViewRecordKind::kImage;
  EXPECT_LT(images, 6u);
  EXPECT_EQ(counters().records_decoded.load(), images);
}

TEST_F(ViewOriginTarTest, AnImageThatFailsAtDecodeReadsAsEio) {
  // Its header probes, its scan is cut short: laid out under fail, then
  // failing when produced.
  const std::string whole = Jpeg(200, 150, 3);
  const std::string cut = whole.substr(0, whole.size() / 2);
  const std::string good = Jpeg(30, 20, 4);
  const std::string tar = TarMemberBytes("a.jpg", good) + TarMemberBytes("b.jpg", cut) +
                          TarMemberBytes("b.cls", "1") + TarEnd();
  WriteFile(dir_.Sub("origin/train/shard-0.tar"), tar);
  Mount({"decoded"});
  std::set<uint64_t> eio;
  auto got = ReadAll(".decoded/train/shard-0.tar", 512, &eio);
  ASSERT_TRUE(got.ok()) << got.status().message();
  MemoryByteSource src(tar);
  ViewLayout l = *LayoutTarView(src, ViewOptions{}, "cpu");
  ASSERT_EQ(l.records[1].kind, ViewRecordKind::kImage);
  ASSERT_FALSE(eio.empty());
  EXPECT_EQ(*eio.begin(), l.records[1].out_offset);
  EXPECT_EQ(*eio.rbegin(), l.records[1].out_end() - 1);
  EXPECT_EQ(eio.size(), l.records[1].out_size);
  // Its neighbours read as they should.
  const std::string want = ExpectedTar(TarMemberBytes("a.jpg", good), ViewOptions{});
  EXPECT_EQ(got->substr(0, l.records[0].out_size), want.substr(0, l.records[0].out_size));
  EXPECT_EQ(got->substr(l.records[2].out_offset), tar.substr(l.records[2].in_offset));
  EXPECT_EQ(counters().errors.load(), 1u);
}

}  // namespace
}  // namespace view_test
}  // namespace stoker
