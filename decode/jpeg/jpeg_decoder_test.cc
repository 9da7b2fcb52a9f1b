#include "decode/jpeg/jpeg_decoder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "decode/gpu/gpu_jpeg_decoder.h"
#include "decode/jpeg/batching_jpeg_decoder.h"
#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/fallback_jpeg_decoder.h"
#include "decode/testing/batch_backends.h"
#include "decode/testing/gpu_under_test.h"
#include "decode/testing/test_jpegs.h"

namespace stoker {
namespace {

using testing::DecodeTjScaled;
using testing::EncodeLibjpeg;
using testing::EncodeTj;
using testing::JpegColor;
using testing::LibjpegOptions;
using testing::MakeImage;

struct Sample {
  std::string name;
  std::string jpeg;
  std::vector<uint8_t> source;  // what was encoded
  int channels;                 // of the source
};

std::vector<Sample> Samples() {
  std::vector<Sample> v;
  const int w = 97, h = 61;  // not multiples of the MCU size
  auto rgb = MakeImage(w, h, 3, 5), gray = MakeImage(w, h, 1, 6);
  v.push_back({"444", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_444, 95), rgb, 3});
  v.push_back({"422", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_422, 95), rgb, 3});
  v.push_back({"420", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_420, 95), rgb, 3});
  v.push_back({"440", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_440, 95), rgb, 3});
  v.push_back({"411", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_411, 95), rgb, 3});
  v.push_back({"gray", EncodeTj(gray, w, h, TJPF_GRAY, TJSAMP_GRAY, 95), gray, 1});
  LibjpegOptions o;
  o.quality = 95;
  o.progressive = true;
  v.push_back({"progressive", EncodeLibjpeg(rgb, w, h, o), rgb, 3});
  o = {};
  o.quality = 95;
  o.restart_interval = 2;
  v.push_back({"restart", EncodeLibjpeg(rgb, w, h, o), rgb, 3});
  o = {};
  o.quality = 95;
  o.arithmetic = true;
  v.push_back({"arithmetic", EncodeLibjpeg(rgb, w, h, o), rgb, 3});
  o = {};
  o.quality = 95;
  o.color = JpegColor::kRgb;
  o.h_samp = o.v_samp = 1;
  v.push_back({"rgb", EncodeLibjpeg(rgb, w, h, o), rgb, 3});
  o = {};
  o.quality = 95;
  o.color = JpegColor::kGray;
  o.progressive = true;
  v.push_back({"gray-progressive", EncodeLibjpeg(gray, w, h, o), gray, 1});
  return v;
}

JpegInfo ProbeOk(const std::string& jpeg) {
  auto info = ProbeJpeg(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size());
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  return info.ok() ? *info : JpegInfo{};
}

Result<std::vector<uint8_t>> DecodeWith(JpegDecoder& d, const std::string& jpeg,
                                        const DecodeParams& p) {
  JpegInfo info = ProbeOk(jpeg);
  STOKER_ASSIGN_OR_RETURN(uint64_t size, OutputSize(info, p));
  std::vector<uint8_t> out(size);
  STOKER_RETURN_IF_ERROR(d.Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), p,
                                  out.data(), out.size()));
  return out;
}

double MeanAbsDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int(a[i]) - int(b[i]));
  return sum / a.size();
}

// The rows in reverse order: an image as different as a wrong decode.
std::vector<uint8_t> Flipped(const std::vector<uint8_t>& img, int height) {
  const size_t stride = img.size() / height;
  std::vector<uint8_t> out(img.size());
  for (int y = 0; y < height; ++y) {
    std::copy(img.begin() + y * stride, img.begin() + (y + 1) * stride,
              out.begin() + (height - 1 - y) * stride);
  }
  return out;
}

// --- Conformance: what every JpegDecoder must do ---------------------------

// Every implementation, as the views use them (instantiation below). make
// returns null where the implementation cannot run here (no GPU): skipped.
struct DecoderBackend {
  const char* name;
  std::function<std::unique_ptr<JpegDecoder>()> make;
};
class JpegDecoderConformance : public ::testing::TestWithParam<DecoderBackend> {
 protected:
  void SetUp() override {
    decoder_ = GetParam().make();
    if (!decoder_) GTEST_SKIP() << GetParam().name << " cannot run on this machine";
  }
  std::unique_ptr<JpegDecoder> decoder_;
};

std::unique_ptr<JpegDecoder> BatchedCpu() {
  return std::make_unique<BatchingJpegDecoder>(
      std::make_unique<testing::SerialBatchBackend>(NewCpuJpegDecoder(), 2, 8));
}

// A batch backend that fails every other image (as a GPU running out of
// memory would), behind the CPU fallback.
std::unique_ptr<JpegDecoder> FallbackOverFaulty() {
  auto n = std::make_shared<std::atomic<uint64_t>>(0);
  auto faulty = std::make_shared<BatchingJpegDecoder>(std::make_unique<testing::SerialBatchBackend>(
      NewCpuJpegDecoder(), 2, 8, uint64_t{1} << 30, [n](const JpegJob&) {
        return (*n)++ % 2 ? Status::Error(ENOMEM, "injected") : Status::OK();
      }));
  return std::make_unique<FallbackJpegDecoder>(faulty, NewCpuJpegDecoder(),
                                               std::make_shared<FallbackCounters>());
}

// The GPU as a view with fallback uses it (the host stand-in where there is
// no device); null where neither is.
std::unique_ptr<JpegDecoder> GpuWithFallback() {
  auto gpu = testing::OpenGpuUnderTest();
  if (!gpu.ok()) return nullptr;
  return std::make_unique<FallbackJpegDecoder>(*gpu, NewCpuJpegDecoder(),
                                               std::make_shared<FallbackCounters>());
}

TEST_P(JpegDecoderConformance, DecodesCloseToTheSource) {
  for (const Sample& s : Samples()) {
    for (DctMethod dct : {DctMethod::kFast, DctMethod::kAccurate}) {
      DecodeParams p;
      p.dct = dct;
      auto out = DecodeWith(*decoder_, s.jpeg, p);
      ASSERT_TRUE(out.ok()) << s.name << ": " << out.status().ToString();
      ASSERT_EQ(s.source.size(), out->size()) << s.name;
      // Sharp chroma edges and noise cost some fidelity; a wrong decode
      // (another image, shifted or scrambled pixels) is far above this.
      const double diff = MeanAbsDiff(s.source, *out);
      EXPECT_LT(diff, 16.0) << s.name;
      EXPECT_LT(3 * diff, MeanAbsDiff(Flipped(s.source, 61), *out)) << s.name;
    }
  }
}

TEST_P(JpegDecoderConformance, ChannelsRule) {
  for (const Sample& s : Samples()) {
    JpegInfo info = ProbeOk(s.jpeg);
    for (int ch : {0, 1, 3}) {
      DecodeParams p;
      p.channels = ch;
      auto out = DecodeWith(*decoder_, s.jpeg, p);
      ASSERT_TRUE(out.ok()) << s.name << " channels " << ch << ": " << out.status().ToString();
      const int want = ch == 0 ? s.channels : ch;
      EXPECT_EQ(size_t(info.width) * info.height * want, out->size()) << s.name << " " << ch;
    }
  }
}

TEST_P(JpegDecoderConformance, WrongOutputSizeIsRefused) {
  Sample s = Samples()[0];
  std::vector<uint8_t> out(s.source.size() + 1);
  Status st = decoder_->Decode(reinterpret_cast<const uint8_t*>(s.jpeg.data()), s.jpeg.size(), {},
                               out.data(), s.source.size() - 1);
  EXPECT_EQ(EINVAL, st.code()) << st.ToString();
  DecodeParams bad;
  bad.channels = 2;
  EXPECT_EQ(EINVAL, decoder_
                        ->Decode(reinterpret_cast<const uint8_t*>(s.jpeg.data()), s.jpeg.size(),
                                 bad, out.data(), s.source.size())
                        .code());
}

TEST_P(JpegDecoderConformance, EveryTruncationFailsCleanly) {
  const int w = 40, h = 24;
  std::vector<std::string> jpegs = {EncodeTj(MakeImage(w, h, 3), w, h, TJPF_RGB, TJSAMP_420)};
  LibjpegOptions o;
  o.progressive = true;
  jpegs.push_back(EncodeLibjpeg(MakeImage(w, h, 3), w, h, o));
  for (const std::string& jpeg : jpegs) {
    std::vector<uint8_t> out(w * h * 3);
    for (size_t n = 0; n < jpeg.size(); ++n) {
      std::vector<uint8_t> prefix(jpeg.begin(), jpeg.begin() + n);
      Status st = decoder_->Decode(prefix.data(), n, {}, out.data(), out.size());
      EXPECT_FALSE(st.ok()) << "prefix " << n << " of " << jpeg.size();
    }
    EXPECT_TRUE(decoder_
                    ->Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), {},
                             out.data(), out.size())
                    .ok());
  }
}

TEST_P(JpegDecoderConformance, CorruptDataNeverCrashes) {
  const int w = 48, h = 32;
  std::string jpeg = EncodeTj(MakeImage(w, h, 3), w, h, TJPF_RGB, TJSAMP_422);
  std::mt19937 rng(23);
  std::vector<uint8_t> out(w * h * 3);
  int failures = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> bad(jpeg.begin(), jpeg.end());
    for (int k = 0; k < 1 + i % 3; ++k) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    failures += !decoder_->Decode(bad.data(), bad.size(), {}, out.data(), out.size()).ok();
  }
  EXPECT_GT(failures, 0);
}

TEST_P(JpegDecoderConformance, ConcurrentDecodesAgree) {
  auto samples = Samples();
  std::vector<std::vector<uint8_t>> want;
  for (const Sample& s : samples) want.push_back(*DecodeWith(*decoder_, s.jpeg, {}));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < samples.size(); ++i) {
          auto got = DecodeWith(*decoder_, samples[i].jpeg, {});
          mismatches[t] += !got.ok() || *got != want[i];
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int m : mismatches) EXPECT_EQ(0, m);
}

// A scaled decode (ratio) is the CPU's, from every decoder: the GPU has no
// DCT scaling and refuses it (ENOTSUP), for a fallback to do it on the CPU.
TEST_P(JpegDecoderConformance, ScaledDecodesAreTheCpus) {
  auto cpu = NewCpuJpegDecoder();
  for (const Sample& s : Samples()) {
    for (int ratio : {2, 4, 8}) {
      DecodeParams p;
      p.ratio = ratio;
      auto want = DecodeWith(*cpu, s.jpeg, p);
      ASSERT_TRUE(want.ok()) << s.name << ": " << want.status().ToString();
      auto got = DecodeWith(*decoder_, s.jpeg, p);
      if (!got.ok()) {
        EXPECT_EQ(ENOTSUP, got.status().code()) << s.name << ": " << got.status().ToString();
        continue;
      }
      EXPECT_TRUE(*want == *got) << s.name << " ratio " << ratio;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Backends, JpegDecoderConformance,
    ::testing::Values(DecoderBackend{"cpu", [] { return NewCpuJpegDecoder(); }},
                      DecoderBackend{"batched_cpu", BatchedCpu},
                      DecoderBackend{"fallback_over_faulty", FallbackOverFaulty},
                      DecoderBackend{"gpu_with_fallback", GpuWithFallback}),
    [](const auto& info) { return std::string(info.param.name); });

// --- The CPU decoder is libjpeg-turbo as TensorFlow runs it ----------------

// At every ratio too: TurboJPEG's scaled decode is an independent way to the
// same libjpeg-turbo scaling (scaled_decode_test.cc checks the sizes).
TEST(CpuJpegDecoderTest, BitExactWithTurboJpeg) {
  auto d = NewCpuJpegDecoder();
  for (const Sample& s : Samples()) {
    for (int ratio : {1, 2, 4, 8}) {
      for (DctMethod dct : {DctMethod::kAccurate, DctMethod::kFast}) {
        for (bool fancy : {true, false}) {
          for (int ch : {0, 1, 3}) {
            DecodeParams p;
            p.dct = dct;
            p.fancy_upsampling = fancy;
            p.channels = ch;
            p.ratio = ratio;
            int flags = dct == DctMethod::kAccurate ? TJFLAG_ACCURATEDCT : TJFLAG_FASTDCT;
            if (!fancy) flags |= TJFLAG_FASTUPSAMPLE;
            const int out_ch = ch == 0 ? s.channels : ch;
            auto want = DecodeTjScaled(s.jpeg, out_ch == 1 ? TJPF_GRAY : TJPF_RGB, flags, ratio);
            ASSERT_FALSE(want.empty()) << s.name;
            auto got = DecodeWith(*d, s.jpeg, p);
            ASSERT_TRUE(got.ok()) << got.status().ToString();
            EXPECT_TRUE(want == *got) << s.name << " ratio " << ratio << " dct " << int(dct)
                                      << " fancy " << fancy << " channels " << ch;
          }
        }
      }
    }
  }
}

TEST(CpuJpegDecoderTest, FastAndAccurateDiffer) {
  auto d = NewCpuJpegDecoder();
  Sample s = Samples()[2];
  DecodeParams fast, accurate;
  accurate.dct = DctMethod::kAccurate;
  EXPECT_NE(*DecodeWith(*d, s.jpeg, fast), *DecodeWith(*d, s.jpeg, accurate));
}

TEST(CpuJpegDecoderTest, CmykConvertedToRgbAsTensorFlowDoes) {
  // Uniform CMYK patches; Adobe files hold inverted CMYK, so the decoded
  // sample x becomes k * x / 255 per channel.
  const int w = 16, h = 16;
  std::vector<uint8_t> cmyk(w * h * 4);
  for (int i = 0; i < w * h; ++i) {
    cmyk[4 * i] = 200;
    cmyk[4 * i + 1] = 100;
    cmyk[4 * i + 2] = 50;
    cmyk[4 * i + 3] = 240;
  }
  auto d = NewCpuJpegDecoder();
  for (JpegColor color : {JpegColor::kCmyk, JpegColor::kYcck}) {
    LibjpegOptions o;
    o.quality = 100;
    o.color = color;
    o.h_samp = o.v_samp = 1;
    std::string jpeg = EncodeLibjpeg(cmyk, w, h, o);
    for (int ch : {0, 3}) {
      DecodeParams p;
      p.channels = ch;
      p.dct = DctMethod::kAccurate;
      auto got = DecodeWith(*d, jpeg, p);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(size_t(w * h * 3), got->size());
      EXPECT_NEAR(240 * 200 / 255, (*got)[0], 3);
      EXPECT_NEAR(240 * 100 / 255, (*got)[1], 3);
      EXPECT_NEAR(240 * 50 / 255, (*got)[2], 3);
    }
    DecodeParams gray;
    gray.channels = 1;
    JpegInfo info = ProbeOk(jpeg);
    EXPECT_FALSE(OutputSize(info, gray).ok());
    std::vector<uint8_t> out(w * h);
    Status st = d->Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), gray,
                          out.data(), out.size());
    EXPECT_EQ(ENOTSUP, st.code()) << st.ToString();
  }
}

TEST(CpuJpegDecoderTest, MissingEoiFailsAsInTensorFlow) {
  std::string jpeg = EncodeTj(MakeImage(16, 16, 3), 16, 16, TJPF_RGB, TJSAMP_444);
  ASSERT_EQ("\xff\xd9", jpeg.substr(jpeg.size() - 2));
  std::string cut = jpeg.substr(0, jpeg.size() - 2);
  auto d = NewCpuJpegDecoder();
  std::vector<uint8_t> out(16 * 16 * 3);
  Status st = d->Decode(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(), {}, out.data(),
                        out.size());
  EXPECT_EQ(EBADMSG, st.code());
  EXPECT_NE(std::string::npos, st.message().find("jpeg: ")) << st.ToString();
}

// CheckJpegDecodes (the on_error=skip layout's check) says ok exactly where
// Decode succeeds: every sample, every prefix of baseline, progressive,
// restart-marked and grayscale files, and randomly corrupted ones.
TEST(CpuJpegDecoderTest, CheckAgreesWithDecode) {
  auto d = NewCpuJpegDecoder();
  auto agree = [&](const std::string& jpeg, const std::string& what) {
    const auto* p = reinterpret_cast<const uint8_t*>(jpeg.data());
    Status check = CheckJpegDecodes(p, jpeg.size());
    auto info = ProbeJpeg(p, jpeg.size());
    auto size = info.ok() ? OutputSize(*info, {}) : info.status();
    if (!size.ok()) {
      EXPECT_FALSE(check.ok() && !info.ok()) << what;  // a bad header never checks ok
      return;
    }
    std::vector<uint8_t> out(*size);
    Status decode = d->Decode(p, jpeg.size(), {}, out.data(), out.size());
    EXPECT_EQ(decode.code(), check.code())
        << what << ": " << decode.ToString() << " vs " << check.ToString();
  };
  for (const Sample& s : Samples()) agree(s.jpeg, "sample " + s.name);
  const int w = 40, h = 24;
  LibjpegOptions o;
  o.progressive = true;
  LibjpegOptions restarts;  // the single-scan fast path with restart markers
  restarts.restart_interval = 2;
  for (const std::string& jpeg : {EncodeTj(MakeImage(w, h, 3), w, h, TJPF_RGB, TJSAMP_420),
                                  EncodeLibjpeg(MakeImage(w, h, 3), w, h, o),
                                  EncodeLibjpeg(MakeImage(w, h, 3), w, h, restarts),
                                  EncodeTj(MakeImage(w, h, 1), w, h, TJPF_GRAY, TJSAMP_GRAY)}) {
    for (size_t n = 1; n <= jpeg.size(); ++n)
      agree(jpeg.substr(0, n), "prefix " + std::to_string(n));
    std::mt19937 rng(7);
    for (int i = 0; i < 1500; ++i) {
      std::string bad = jpeg;
      for (int k = 0; k < 1 + i % 3; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
      agree(bad, "corrupt " + std::to_string(i));
    }
  }
  EXPECT_EQ(EBADMSG, CheckJpegDecodes(nullptr, 0).code());
}

TEST(CpuJpegDecoderTest, MemoryLimit) {
  CpuJpegDecoderOptions small;
  small.max_memory_bytes = 64 << 10;
  auto d = NewCpuJpegDecoder(small);
  LibjpegOptions o;
  o.progressive = true;  // buffers all coefficients: 512x512x3 x 2 bytes
  std::string jpeg = EncodeLibjpeg(MakeImage(512, 512, 3), 512, 512, o);
  std::vector<uint8_t> out(512 * 512 * 3);
  Status st = d->Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), {}, out.data(),
                        out.size());
  EXPECT_EQ(ENOMEM, st.code()) << st.ToString();
  EXPECT_TRUE(NewCpuJpegDecoder()
                  ->Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), {},
                           out.data(), out.size())
                  .ok());
}

TEST(CpuJpegDecoderTest, Name) {
  EXPECT_EQ(0u, NewCpuJpegDecoder()->name().find("libjpeg-turbo 2."));
}

}  // namespace
}  // namespace stoker
