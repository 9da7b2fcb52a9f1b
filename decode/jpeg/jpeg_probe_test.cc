#include "decode/jpeg/jpeg_probe.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "decode/testing/test_jpegs.h"

namespace stoker {
namespace {

using testing::EncodeLibjpeg;
using testing::EncodeTj;
using testing::JpegColor;
using testing::LibjpegOptions;
using testing::MakeImage;

Result<JpegInfo> Probe(const std::string& s, const JpegProbeOptions& o = {}) {
  return ProbeJpeg(reinterpret_cast<const uint8_t*>(s.data()), s.size(), o);
}

struct TjCase {
  int subsamp;
  ChromaSubsampling want;
};

TEST(JpegProbeTest, TurboJpegSubsamplings) {
  for (TjCase c : std::vector<TjCase>{{TJSAMP_444, ChromaSubsampling::k444},
                                      {TJSAMP_422, ChromaSubsampling::k422},
                                      {TJSAMP_420, ChromaSubsampling::k420},
                                      {TJSAMP_440, ChromaSubsampling::k440},
                                      {TJSAMP_411, ChromaSubsampling::k411},
                                      {TJSAMP_GRAY, ChromaSubsampling::kGray}}) {
    const bool gray = c.subsamp == TJSAMP_GRAY;
    auto img = MakeImage(123, 77, gray ? 1 : 3);
    std::string jpeg = EncodeTj(img, 123, 77, gray ? TJPF_GRAY : TJPF_RGB, c.subsamp);
    auto info = Probe(jpeg);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(123u, info->width);
    EXPECT_EQ(77u, info->height);
    EXPECT_EQ(gray ? 1 : 3, info->components);
    EXPECT_EQ(8, info->precision);
    EXPECT_EQ(JpegProcess::kBaseline, info->process);
    EXPECT_FALSE(info->arithmetic);
    EXPECT_EQ(c.want, info->subsampling) << ToString(info->subsampling);
    EXPECT_EQ(gray ? JpegColorSpace::kGrayscale : JpegColorSpace::kYCbCr, info->color_space);
    EXPECT_TRUE(info->jfif);
    EXPECT_FALSE(info->adobe);
    EXPECT_EQ(0u, info->restart_interval);
    EXPECT_GT(info->header_size, 100u);
    EXPECT_LT(info->header_size, jpeg.size());
    EXPECT_EQ(gray ? 1 : 3, *OutputChannels(*info, 0));
    EXPECT_EQ(1, *OutputChannels(*info, 1));
    EXPECT_EQ(3, *OutputChannels(*info, 3));
    EXPECT_EQ(EINVAL, OutputChannels(*info, 4).status().code());
    EXPECT_TRUE(LooksLikeJpeg(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size()));
  }
}

TEST(JpegProbeTest, ProgressiveRestartArithmetic) {
  auto img = MakeImage(64, 40, 3);
  LibjpegOptions o;
  o.progressive = true;
  auto info = Probe(EncodeLibjpeg(img, 64, 40, o));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(JpegProcess::kProgressive, info->process);
  EXPECT_EQ(ChromaSubsampling::k420, info->subsampling);

  o = {};
  o.restart_interval = 3;
  info = Probe(EncodeLibjpeg(img, 64, 40, o));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(3u, info->restart_interval);
  EXPECT_EQ(JpegProcess::kBaseline, info->process);

  o = {};
  o.restart_in_rows = 1;  // one MCU row: 64 / 16 = 4 MCUs
  info = Probe(EncodeLibjpeg(img, 64, 40, o));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(4u, info->restart_interval);

  o = {};
  o.arithmetic = true;
  info = Probe(EncodeLibjpeg(img, 64, 40, o));
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->arithmetic);
  EXPECT_EQ(JpegProcess::kExtendedSequential, info->process);
  JpegProbeOptions no_arith;
  no_arith.allow_arithmetic = false;
  EXPECT_EQ(ENOTSUP, Probe(EncodeLibjpeg(img, 64, 40, o), no_arith).status().code());

  o.progressive = true;
  info = Probe(EncodeLibjpeg(img, 64, 40, o));
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->arithmetic);
  EXPECT_EQ(JpegProcess::kProgressive, info->process);
}

TEST(JpegProbeTest, ColorSpaces) {
  auto rgb = MakeImage(32, 32, 3), cmyk = MakeImage(32, 32, 4);
  LibjpegOptions o;
  o.color = JpegColor::kRgb;
  o.h_samp = o.v_samp = 1;
  auto info = Probe(EncodeLibjpeg(rgb, 32, 32, o));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(JpegColorSpace::kRGB, info->color_space);
  EXPECT_TRUE(info->adobe);
  EXPECT_EQ(0, info->adobe_transform);
  EXPECT_EQ(1, *OutputChannels(*info, 1));

  o.color = JpegColor::kCmyk;
  info = Probe(EncodeLibjpeg(cmyk, 32, 32, o));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(4, info->components);
  EXPECT_EQ(JpegColorSpace::kCMYK, info->color_space);
  EXPECT_EQ(ChromaSubsampling::k444, info->subsampling);
  EXPECT_EQ(3, *OutputChannels(*info, 0));  // TensorFlow converts CMYK to RGB
  EXPECT_EQ(3, *OutputChannels(*info, 3));
  EXPECT_EQ(ENOTSUP, OutputChannels(*info, 1).status().code());

  o.color = JpegColor::kYcck;
  o.h_samp = o.v_samp = 2;
  info = Probe(EncodeLibjpeg(cmyk, 32, 32, o));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(JpegColorSpace::kYCCK, info->color_space);
  EXPECT_EQ(2, info->adobe_transform);
  EXPECT_EQ(ChromaSubsampling::k420, info->subsampling);

  o = {};
  o.color = JpegColor::kGray;
  info = Probe(EncodeLibjpeg(MakeImage(32, 32, 1), 32, 32, o));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(ChromaSubsampling::kGray, info->subsampling);
  EXPECT_EQ(1, *OutputChannels(*info, 0));
  EXPECT_EQ(3, *OutputChannels(*info, 3));
}

TEST(JpegProbeTest, EveryPrefixIsSafeAndShortOnesFail) {
  std::vector<std::string> jpegs = {EncodeTj(MakeImage(40, 30, 3), 40, 30, TJPF_RGB, TJSAMP_420),
                                    EncodeTj(MakeImage(40, 30, 1), 40, 30, TJPF_GRAY, TJSAMP_GRAY)};
  LibjpegOptions o;
  o.progressive = true;
  o.restart_interval = 2;
  jpegs.push_back(EncodeLibjpeg(MakeImage(40, 30, 3), 40, 30, o));
  for (const std::string& jpeg : jpegs) {
    auto full = Probe(jpeg);
    ASSERT_TRUE(full.ok());
    for (size_t n = 0; n <= jpeg.size(); ++n) {
      // A copy of exactly n bytes, so ASan sees any read past the end.
      std::vector<uint8_t> prefix(jpeg.begin(), jpeg.begin() + n);
      auto info = ProbeJpeg(prefix.data(), n);
      if (n < full->header_size) {
        ASSERT_FALSE(info.ok()) << n;
        if (n >= 2) {
          EXPECT_EQ(ENODATA, info.status().code()) << n << info.status().ToString();
        }
      } else {
        ASSERT_TRUE(info.ok()) << n;
        EXPECT_EQ(full->width, info->width);
        EXPECT_EQ(full->header_size, info->header_size);
      }
    }
  }
}

// A minimal header: SOI, DQT(0), SOF, SOS (no entropy data).
std::string Header(uint8_t sof, int precision, int h, int w, int ncomp, int samp = 0x11,
                   int samp1 = 0x11) {
  std::string s = "\xff\xd8";
  s += std::string("\xff\xdb\x00\x43\x00", 5) + std::string(64, '\x01');
  s += "\xff";
  s += static_cast<char>(sof);
  const int len = 8 + 3 * ncomp;
  s += static_cast<char>(len >> 8);
  s += static_cast<char>(len);
  s += static_cast<char>(precision);
  s += static_cast<char>(h >> 8);
  s += static_cast<char>(h);
  s += static_cast<char>(w >> 8);
  s += static_cast<char>(w);
  s += static_cast<char>(ncomp);
  for (int i = 0; i < ncomp; ++i) {
    s += static_cast<char>(i + 1);
    s += static_cast<char>(i == 0 ? samp : i == 1 ? samp1 : 0x11);
    s += '\0';
  }
  const int slen = 6 + 2 * ncomp;
  s += "\xff\xda";
  s += static_cast<char>(slen >> 8);
  s += static_cast<char>(slen);
  s += static_cast<char>(ncomp);
  for (int i = 0; i < ncomp; ++i) {
    s += static_cast<char>(i + 1);
    s += '\0';
  }
  s += std::string("\x00\x3f\x00", 3);
  return s;
}

TEST(JpegProbeTest, HandMadeHeaders) {
  auto ok = Probe(Header(0xC0, 8, 480, 640, 3, 0x22));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(640u, ok->width);
  EXPECT_EQ(ChromaSubsampling::k420, ok->subsampling);
  EXPECT_EQ(Header(0xC0, 8, 480, 640, 3, 0x22).size(), ok->header_size);

  EXPECT_EQ(EFBIG, Probe(Header(0xC0, 8, 65535, 65535, 3)).status().code());
  EXPECT_EQ(EFBIG, Probe(Header(0xC0, 8, 20000, 20000, 1)).status().code());  // > 100M
  JpegProbeOptions small;
  small.max_pixels = 999'999;
  EXPECT_EQ(EFBIG, Probe(Header(0xC0, 8, 1000, 1000, 1), small).status().code());
  small.max_pixels = 1'000'000;
  EXPECT_TRUE(Probe(Header(0xC0, 8, 1000, 1000, 1), small).ok());

  EXPECT_EQ(ENOTSUP, Probe(Header(0xC1, 16, 10, 10, 3)).status().code());
  EXPECT_EQ(ENOTSUP, Probe(Header(0xC1, 12, 10, 10, 3)).status().code());
  EXPECT_EQ(ENOTSUP, Probe(Header(0xC3, 8, 10, 10, 3)).status().code());  // lossless
  EXPECT_EQ(ENOTSUP, Probe(Header(0xC5, 8, 10, 10, 3)).status().code());  // hierarchical
  EXPECT_EQ(ENOTSUP, Probe(Header(0xC0, 8, 10, 10, 2)).status().code());  // 2 components
  EXPECT_TRUE(Probe(Header(0xC0, 8, 10, 10, 3, 0x31)).ok());              // 3:1, integral
  EXPECT_EQ(ENOTSUP, Probe(Header(0xC0, 8, 10, 10, 3, 0x31, 0x21)).status().code());  // 3:2
  EXPECT_EQ(EBADMSG, Probe(Header(0xC0, 8, 0, 10, 3)).status().code());
  EXPECT_EQ(EBADMSG, Probe(Header(0xC0, 8, 10, 0, 3)).status().code());
  EXPECT_EQ(EBADMSG, Probe(Header(0xC0, 8, 10, 10, 3, 0x51)).status().code());  // factor 5

  std::string no_sof("\xff\xd8\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00", 12);
  EXPECT_EQ(EBADMSG, Probe(no_sof).status().code());
  std::string eoi = "\xff\xd8\xff\xd9";
  EXPECT_EQ(EBADMSG, Probe(eoi).status().code());
  std::string unknown = "\xff\xd8\xff\x02";
  EXPECT_EQ(EBADMSG, Probe(unknown).status().code());
  EXPECT_EQ(EBADMSG, Probe("GIF89a").status().code());
  EXPECT_EQ(EBADMSG, Probe("").status().code());

  std::string two_sof = Header(0xC0, 8, 10, 10, 1);
  two_sof.insert(2 + 69, two_sof.substr(2 + 69, 13));  // repeat the SOF segment
  EXPECT_EQ(EBADMSG, Probe(two_sof).status().code());

  std::string no_dqt = Header(0xC0, 8, 10, 10, 1);
  no_dqt.erase(2, 69);
  EXPECT_EQ(EBADMSG, Probe(no_dqt).status().code());
}

TEST(JpegProbeTest, RandomCorruptionNeverCrashes) {
  std::mt19937 rng(17);
  std::vector<std::string> seeds = {EncodeTj(MakeImage(50, 50, 3), 50, 50, TJPF_RGB, TJSAMP_422),
                                    Header(0xC2, 8, 100, 100, 3, 0x21)};
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[i % seeds.size()];
    s.resize(std::min<size_t>(s.size(), 700));
    for (int k = 0; k < 1 + i % 5; ++k) s[rng() % s.size()] = static_cast<char>(rng());
    std::vector<uint8_t> buf(s.begin(), s.begin() + rng() % (s.size() + 1));
    auto info = ProbeJpeg(buf.data(), buf.size());
    if (info.ok()) {
      ++accepted;
      EXPECT_LE(info->header_size, buf.size());
      EXPECT_GT(info->width, 0u);
      EXPECT_GT(info->height, 0u);
    }
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace stoker
