#include "decode/view/tar_view.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/testing/test_jpegs.h"
#include "decode/view/npy.h"

namespace stoker {
namespace {

using testing::DecodeTj;
using testing::DecodeTjScaled;
using testing::EncodeTj;
using testing::MakeImage;

std::string Rgb(int w, int h, uint32_t seed) {
  return EncodeTj(MakeImage(w, h, 3, seed), w, h, TJPF_RGB, TJSAMP_420, 90);
}
std::string Grey(int w, int h, uint32_t seed) {
  return EncodeTj(MakeImage(w, h, 1, seed), w, h, TJPF_GRAY, TJSAMP_GRAY, 90);
}

ViewOptions Accurate(OnError on_error = OnError::kFail) {
  ViewOptions o;
  o.decode.dct = DctMethod::kAccurate;
  o.on_error = on_error;
  return o;
}

ViewLayout Layout(const std::string& raw, const ViewOptions& options, JpegCheck check = nullptr) {
  MemoryByteSource src(raw);
  auto l = LayoutTarView(src, options, "cpu", check);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return *l;
}

// The whole view file, as reads of it give it (a failed entry as zeros).
std::string Render(const ViewLayout& l, const std::string& raw, const ViewOptions& options) {
  auto decoder = NewCpuJpegDecoder();
  std::string out(l.size, '\0');
  for (const ViewRecord& r : l.records) {
    auto* to = reinterpret_cast<uint8_t*>(out.data() + r.out_offset);
    if (r.kind == ViewRecordKind::kCopy) {
      std::memcpy(to, raw.data() + r.in_offset, r.in_size);
    } else if (r.kind == ViewRecordKind::kImage) {
      Status s = ProduceTarViewMember(r, std::string_view(raw).substr(r.in_offset, r.in_size),
                                      options, *decoder, to, r.out_size);
      EXPECT_TRUE(s.ok()) << s.message();
    }
  }
  return out;
}

struct Member {
  std::string name;
  std::string data;
};
std::vector<Member> Members(const std::string& archive) {
  MemoryByteSource src(archive);
  TarReader reader(&src);
  std::vector<Member> out;
  TarMember m;
  while (true) {
    auto got = reader.Next(&m);
    EXPECT_TRUE(got.ok()) << got.status().message();
    if (!got.ok() || !*got) break;
    out.push_back({m.name, archive.substr(m.data_offset, m.size)});
  }
  return out;
}

// An .npy member's array: shape and data.
std::pair<std::vector<uint64_t>, std::string> Array(const std::string& npy) {
  auto info = ParseNpyHeader(npy);
  EXPECT_TRUE(info.ok()) << info.status().message();
  return {info->shape, npy.substr(info->data_offset)};
}

std::string AsString(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

TEST(TarView, ImagesBecomeNpyAndTheRestIsCopied) {
  const std::string a = Rgb(67, 45, 1), b = Grey(33, 20, 2), c = Rgb(40, 41, 3);
  const std::string long_key = std::string(130, 'k');
  std::string raw = TarMemberBytes("s0.jpg", a) + TarMemberBytes("s0.cls", "3") +
                    TarMemberBytes("s0.json", "{\"x\": 1}") + TarMemberBytes("s1.JPEG", b) +
                    TarMemberBytes("s1.cls", "4") +
                    TarMemberBytes(long_key + ".jpg", c, TarFormat::kGnu) +
                    TarMemberBytes("d/" + long_key + ".jpeg", c, TarFormat::kPax) + TarEnd();
  raw.append(10240 - raw.size() % 10240, '\0');  // a record's padding, as tar writes it
  const ViewOptions o = Accurate();
  ViewLayout l = Layout(raw, o);
  std::vector<ViewRecordKind> kinds;
  for (const ViewRecord& r : l.records) kinds.push_back(r.kind);
  using K = ViewRecordKind;
  EXPECT_EQ(kinds, (std::vector<K>{K::kImage, K::kCopy, K::kImage, K::kCopy, K::kImage, K::kImage,
                                   K::kCopy}));
  EXPECT_TRUE(l.errors.empty());
  EXPECT_EQ(l.records.back().out_end(), l.size);
  EXPECT_EQ(l.records.back().in_offset + l.records.back().in_size, raw.size());

  const std::string view = Render(l, raw, o);
  std::vector<Member> got = Members(view), want = Members(raw);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string& n = want[i].name;
    const bool image =
        n.size() > 4 && (n.ends_with(".jpg") || n.ends_with(".JPEG") || n.ends_with(".jpeg"));
    if (!image) {
      EXPECT_EQ(got[i].name, n);
      EXPECT_EQ(got[i].data, want[i].data) << n;
      continue;
    }
    EXPECT_EQ(got[i].name, n.substr(0, n.rfind('.')) + ".npy");
    auto [shape, pixels] = Array(got[i].data);
    int w = 0, h = 0;
    const bool grey = i == 3;
    std::vector<uint8_t> ref =
        DecodeTj(want[i].data, grey ? TJPF_GRAY : TJPF_RGB, TJFLAG_ACCURATEDCT, &w, &h);
    EXPECT_EQ(shape, (std::vector<uint64_t>{uint64_t(h), uint64_t(w), grey ? 1u : 3u})) << n;
    EXPECT_TRUE(pixels == AsString(ref)) << n;
  }
  // The end-of-archive blocks and the record's padding are the raw file's.
  EXPECT_EQ(view.substr(view.size() - 1024), std::string(1024, '\0'));
}

TEST(TarView, ARatioDecodesSmaller) {
  const std::string a = Rgb(67, 45, 1);
  const std::string raw = TarMemberBytes("s0.jpg", a) + TarEnd();
  ViewOptions o = Accurate();
  o.decode.ratio = 2;
  ViewLayout l = Layout(raw, o);
  ASSERT_EQ(l.records.size(), 2u);
  EXPECT_EQ(l.records[0].shape, (ImageShape{23, 34, 3}));
  std::vector<Member> got = Members(Render(l, raw, o));
  auto [shape, pixels] = Array(got[0].data);
  int w = 0, h = 0;
  EXPECT_TRUE(pixels == AsString(DecodeTjScaled(a, TJPF_RGB, TJFLAG_ACCURATEDCT, 2, &w, &h)));
  EXPECT_EQ(shape, (std::vector<uint64_t>{23, 34, 3}));
}

TEST(TarView, ABadImageFailsOrIsLeftOut) {
  const std::string good = Rgb(30, 20, 1);
  const std::string bad = "\xff\xd8 not a jpeg at all";
  const std::string raw = TarMemberBytes("a.jpg", good) + TarMemberBytes("b.jpg", bad) +
                          TarMemberBytes("b.cls", "1") + TarEnd();
  ViewLayout fail = Layout(raw, Accurate(OnError::kFail));
  ASSERT_EQ(fail.records.size(), 3u);
  EXPECT_EQ(fail.records[1].kind, ViewRecordKind::kFailed);
  EXPECT_EQ(fail.records[1].in_size, TarMemberBytes("b.jpg", bad).size());
  EXPECT_EQ(fail.records[1].out_size, fail.records[1].in_size);
  ASSERT_EQ(fail.errors.size(), 1u);
  EXPECT_NE(fail.errors[0].message.find("member 'b.jpg'"), std::string::npos);

  const ViewOptions skip = Accurate(OnError::kSkip);
  ViewLayout l = Layout(raw, skip);
  ASSERT_EQ(l.errors.size(), 1u);
  std::vector<Member> got = Members(Render(l, raw, skip));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "a.npy");
  EXPECT_EQ(got[1].name, "b.cls");
}

TEST(TarView, UnderSkipACheckLeavesOutWhatProbesButDoesNotDecode) {
  const std::string good = Rgb(30, 20, 1);
  const std::string whole = Rgb(200, 150, 2);
  const std::string cut = whole.substr(0, whole.size() / 2);  // header intact, scan cut short
  const std::string raw = TarMemberBytes("a.jpg", cut) + TarMemberBytes("b.jpg", good) + TarEnd();
  JpegCheck check = [](const std::vector<std::string_view>& jpegs) {
    std::vector<Status> out;
    for (std::string_view j : jpegs) {
      out.push_back(CheckJpegDecodes(reinterpret_cast<const uint8_t*>(j.data()), j.size()));
    }
    return out;
  };
  const ViewOptions skip = Accurate(OnError::kSkip);
  EXPECT_EQ(Layout(raw, skip).records.size(), 3u);  // without the check: it probes
  ViewLayout l = Layout(raw, skip, check);
  std::vector<Member> got = Members(Render(l, raw, skip));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].name, "b.npy");
  EXPECT_EQ(l.errors.size(), 1u);
}

TEST(TarView, BrokenHeadersEndTheView) {
  const std::string good = Rgb(30, 20, 1);
  const std::string first = TarMemberBytes("a.jpg", good) + TarMemberBytes("a.cls", "1");
  std::string raw = first + TarMemberBytes("b.jpg", good) + TarEnd();
  raw[first.size() + 10] ^= 0x5a;  // b's header no longer checks out

  ViewLayout fail = Layout(raw, Accurate(OnError::kFail));
  ASSERT_EQ(fail.records.size(), 3u);
  EXPECT_EQ(fail.records[2].kind, ViewRecordKind::kFailed);
  EXPECT_EQ(fail.records[2].in_offset, first.size());
  EXPECT_EQ(fail.records[2].in_size, raw.size() - first.size());

  const ViewOptions skip = Accurate(OnError::kSkip);
  ViewLayout l = Layout(raw, skip);
  EXPECT_EQ(l.records.back().kind, ViewRecordKind::kZeros);
  std::vector<Member> got = Members(Render(l, raw, skip));
  ASSERT_EQ(got.size(), 2u);  // a.npy, a.cls, and the archive's end
  EXPECT_EQ(got[1].name, "a.cls");
}

TEST(TarView, ProductionRefusesRawBytesThatChanged) {
  const std::string raw = TarMemberBytes("a.jpg", Rgb(30, 20, 1)) + TarEnd();
  ViewLayout l = Layout(raw, Accurate());
  const std::string other = TarMemberBytes("a.jpg", Rgb(31, 20, 1));
  std::string out(l.records[0].out_size, '\0');
  auto decoder = NewCpuJpegDecoder();
  Status s = ProduceTarViewMember(l.records[0], other, Accurate(), *decoder,
                                  reinterpret_cast<uint8_t*>(out.data()), out.size());
  EXPECT_EQ(s.code(), EBADMSG);
  EXPECT_NE(s.message().find("does not match its layout"), std::string::npos);
}

TEST(TarView, LayoutsRoundTripAndBadOnesAreRefused) {
  std::string raw = TarMemberBytes("a.jpg", Rgb(30, 20, 1)) + TarMemberBytes("a.cls", "1");
  raw += TarMemberBytes("b.jpg", "junk") + TarEnd();
  ViewLayout l = Layout(raw, Accurate(OnError::kSkip));
  l.records.push_back({ViewRecordKind::kZeros, raw.size(), 0, l.size, 1024});
  l.size += 1024;
  auto back = DecodeViewLayout(EncodeViewLayout(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, l);

  ViewLayout copy_differs = l;
  copy_differs.records[1].out_size += 1;
  copy_differs.size += 1;
  for (size_t i = 2; i < copy_differs.records.size(); ++i) copy_differs.records[i].out_offset += 1;
  EXPECT_EQ(DecodeViewLayout(EncodeViewLayout(copy_differs)).status().code(), EBADMSG);

  ViewLayout not_tar = l;
  not_tar.kind = ViewKind::kTfRecord;  // copied entries belong to tar views only
  EXPECT_EQ(DecodeViewLayout(EncodeViewLayout(not_tar)).status().code(), EBADMSG);
}

}  // namespace
}  // namespace stoker
