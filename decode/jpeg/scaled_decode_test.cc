// Reduced-resolution decoding (DecodeParams::ratio, max_side): the sizes
// OutputShape gives are libjpeg's own (jpeg_calc_output_dimensions), and the
// CPU decoder's pixels are TurboJPEG's scaled decode (tjDecompress2 asked for
// the scaled size) bit for bit at odd sizes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/jpeg_decoder.h"
#include "decode/testing/test_jpegs.h"

namespace stoker {
namespace {

using testing::AbortOnJpegError;
using testing::EncodeLibjpeg;
using testing::EncodeTj;
using testing::JpegColor;
using testing::LibjpegOptions;
using testing::MakeImage;

constexpr int kRatios[] = {1, 2, 4, 8};

JpegInfo Probe(const std::string& jpeg) {
  auto info = ProbeJpeg(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size());
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  return info.ok() ? *info : JpegInfo{};
}

// What libjpeg itself makes of scale_num = 1, scale_denom = ratio.
void LibjpegScaledSize(const std::string& jpeg, int ratio, uint32_t* width, uint32_t* height) {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jerr.error_exit = AbortOnJpegError;
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size());
  jpeg_read_header(&cinfo, TRUE);
  cinfo.scale_num = 1;
  cinfo.scale_denom = ratio;
  jpeg_calc_output_dimensions(&cinfo);
  *width = cinfo.output_width;
  *height = cinfo.output_height;
  jpeg_destroy_decompress(&cinfo);
}

Result<std::vector<uint8_t>> Decode(const std::string& jpeg, const DecodeParams& p) {
  STOKER_ASSIGN_OR_RETURN(ImageShape shape, OutputShape(Probe(jpeg), p));
  std::vector<uint8_t> out(shape.pixel_bytes());
  STOKER_RETURN_IF_ERROR(NewCpuJpegDecoder()->Decode(reinterpret_cast<const uint8_t*>(jpeg.data()),
                                                     jpeg.size(), p, out.data(), out.size()));
  return out;
}

struct Sample {
  std::string name;
  std::string jpeg;
  int channels;
};

// Sizes that are not multiples of 8 or of the MCU; every sampling the views
// meet, progressive and arithmetic-coded files.
std::vector<Sample> Samples(int w, int h) {
  auto rgb = MakeImage(w, h, 3, 11), gray = MakeImage(w, h, 1, 12);
  std::vector<Sample> v = {
      {"444", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_444, 92), 3},
      {"422", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_422, 92), 3},
      {"420", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_420, 92), 3},
      {"440", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_440, 92), 3},
      {"411", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_411, 92), 3},
      {"gray", EncodeTj(gray, w, h, TJPF_GRAY, TJSAMP_GRAY, 92), 1},
  };
  LibjpegOptions o;
  o.progressive = true;
  v.push_back({"progressive-420", EncodeLibjpeg(rgb, w, h, o), 3});
  o.h_samp = o.v_samp = 1;
  v.push_back({"progressive-444", EncodeLibjpeg(rgb, w, h, o), 3});
  o.color = JpegColor::kGray;
  v.push_back({"progressive-gray", EncodeLibjpeg(gray, w, h, o), 1});
  o = {};
  o.arithmetic = true;
  v.push_back({"arithmetic", EncodeLibjpeg(rgb, w, h, o), 3});
  return v;
}

TEST(ScaledSideTest, IsLibjpegsOutputSize) {
  for (int w : {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 65, 97}) {
    for (int h : {1, 5, 8, 13, 24, 61}) {
      auto rgb = MakeImage(w, h, 3);
      for (int samp : {TJSAMP_444, TJSAMP_422, TJSAMP_420}) {
        const std::string jpeg = EncodeTj(rgb, w, h, TJPF_RGB, samp);
        const JpegInfo info = Probe(jpeg);
        for (int ratio : kRatios) {
          DecodeParams p;
          p.ratio = ratio;
          auto shape = OutputShape(info, p);
          ASSERT_TRUE(shape.ok()) << shape.status().ToString();
          uint32_t lw = 0, lh = 0;
          LibjpegScaledSize(jpeg, ratio, &lw, &lh);
          EXPECT_EQ(lw, shape->width) << w << "x" << h << " ratio " << ratio;
          EXPECT_EQ(lh, shape->height) << w << "x" << h << " ratio " << ratio;
          EXPECT_EQ(3u, shape->channels);
        }
      }
    }
  }
}

// Odd and tiny sizes (down to 1x1 at ratio 8), each sampling, progressive
// and arithmetic files, both DCT methods (jpeg_decoder_test.cc covers the
// upsampling and channel choices at every ratio). Not a 1x1 image: TurboJPEG
// takes the largest scaling factor that fits the size asked for, which is
// 1/1 there at every ratio (tests/integration/test_views_ratio.py has one).
TEST(ScaledDecodeTest, OddSizesBitExactWithTurboJpeg) {
  const DecodeParams fast, accurate{.dct = DctMethod::kAccurate};
  for (auto [w, h] : {std::pair{97, 61}, std::pair{13, 7}, std::pair{5, 3}}) {
    for (const Sample& s : Samples(w, h)) {
      const int tjpf = s.channels == 1 ? TJPF_GRAY : TJPF_RGB;
      for (int ratio : kRatios) {
        for (DecodeParams p : {fast, accurate}) {
          p.ratio = ratio;
          const bool acc = p.dct == DctMethod::kAccurate;
          auto want = testing::DecodeTjScaled(s.jpeg, tjpf,
                                              acc ? TJFLAG_ACCURATEDCT : TJFLAG_FASTDCT, ratio);
          auto got = Decode(s.jpeg, p);
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          EXPECT_TRUE(!want.empty() && want == *got)
              << s.name << " " << w << "x" << h << " ratio " << ratio << " accurate " << acc;
        }
      }
    }
  }
}

// A scaled decode is the image, smaller: close to the source averaged over
// ratio x ratio blocks, and unlike the same averaged upside down.
TEST(ScaledDecodeTest, LooksLikeTheSourceShrunk) {
  const int w = 160, h = 96;
  auto rgb = MakeImage(w, h, 3, 3);
  const std::string jpeg = EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_420, 95);
  for (int ratio : kRatios) {
    DecodeParams p;
    p.ratio = ratio;
    auto got = Decode(jpeg, p);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const int sw = w / ratio, sh = h / ratio;
    ASSERT_EQ(size_t(sw) * sh * 3, got->size());
    double diff = 0, flipped = 0;
    for (int y = 0; y < sh; ++y) {
      for (int x = 0; x < sw; ++x) {
        for (int c = 0; c < 3; ++c) {
          auto mean = [&](int yy) {
            int sum = 0;
            for (int dy = 0; dy < ratio; ++dy) {
              for (int dx = 0; dx < ratio; ++dx) {
                sum += rgb[(size_t(yy * ratio + dy) * w + x * ratio + dx) * 3 + c];
              }
            }
            return double(sum) / (ratio * ratio);
          };
          const int v = (*got)[(size_t(y) * sw + x) * 3 + c];
          diff += std::abs(v - mean(y));
          flipped += std::abs(v - mean(sh - 1 - y));
        }
      }
    }
    diff /= sw * sh * 3;
    flipped /= sw * sh * 3;
    EXPECT_LT(diff, 24.0) << "ratio " << ratio;
    EXPECT_LT(2 * diff, flipped) << "ratio " << ratio;
  }
}

TEST(ScaledDecodeTest, MaxSidePicksTheLargestRatioPerImage) {
  DecodeParams p;
  p.max_side = 16;
  EXPECT_EQ(4, ScaleRatio(97, 61, p));  // 61 / 4 -> 16; 61 / 8 -> 8
  EXPECT_EQ(4, ScaleRatio(61, 97, p));
  EXPECT_EQ(8, ScaleRatio(1000, 128, p));
  EXPECT_EQ(8, ScaleRatio(5000, 5000, p));  // 8 at most
  EXPECT_EQ(1, ScaleRatio(200, 16, p));
  EXPECT_EQ(1, ScaleRatio(200, 9, p));   // already shorter: whole
  EXPECT_EQ(2, ScaleRatio(200, 31, p));  // ceil(31 / 2) = 16
  p.max_side = 0;
  p.ratio = 2;
  EXPECT_EQ(2, ScaleRatio(5, 5, p));

  // The decoder sizes and decodes the image as OutputShape says.
  const int w = 97, h = 61;
  const std::string jpeg = EncodeTj(MakeImage(w, h, 3), w, h, TJPF_RGB, TJSAMP_420);
  DecodeParams side, four;
  side.max_side = 16;
  four.ratio = 4;
  auto shape = OutputShape(Probe(jpeg), side);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ((ImageShape{16, 25, 3}), *shape);
  auto a = Decode(jpeg, side), b = Decode(jpeg, four);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*b, *a);
}

TEST(ScaledDecodeTest, BadRatiosAreEinval) {
  const std::string jpeg = EncodeTj(MakeImage(16, 16, 3), 16, 16, TJPF_RGB, TJSAMP_444);
  const JpegInfo info = Probe(jpeg);
  std::vector<uint8_t> out(16 * 16 * 3);
  auto decoder = NewCpuJpegDecoder();
  for (auto [ratio, max_side] : {std::pair{0, 0u}, std::pair{3, 0u}, std::pair{16, 0u},
                                 std::pair{-2, 0u}, std::pair{2, 8u}}) {
    DecodeParams p;
    p.ratio = ratio;
    p.max_side = max_side;
    EXPECT_EQ(EINVAL, OutputShape(info, p).status().code()) << ratio;
    Status st = decoder->Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), p,
                                out.data(), out.size());
    EXPECT_EQ(EINVAL, st.code()) << ratio << ": " << st.ToString();
  }
  // A buffer for the whole image is refused for a scaled decode.
  DecodeParams half;
  half.ratio = 2;
  EXPECT_EQ(EINVAL, decoder
                        ->Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), half,
                                 out.data(), out.size())
                        .code());
}

}  // namespace
}  // namespace stoker
