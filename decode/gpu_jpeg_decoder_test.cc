#include "decode/gpu_jpeg_decoder.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "decode/cpu_jpeg_decoder.h"
#include "decode/decode_pool.h"
#include "decode/testing/test_jpegs.h"

namespace stoker {
namespace {

using testing::EncodeLibjpeg;
using testing::EncodeTj;
using testing::JpegColor;
using testing::LibjpegOptions;
using testing::MakeImage;

TEST(DecoderKindTest, ParsesAndNames) {
  for (DecoderKind k : {DecoderKind::kAuto, DecoderKind::kCpu, DecoderKind::kGpu}) {
    auto parsed = ParseDecoderKind(ToString(k));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(k, *parsed);
  }
  EXPECT_EQ(EINVAL, ParseDecoderKind("cuda").status().code());
}

// Without a usable GPU (or without the backend built in), opening fails
// with one of the documented codes and a message that says why.
TEST(GpuJpegDecoderTest, OpenEitherWorksOrSaysWhy) {
  auto d = OpenGpuJpegDecoder({});
  if (d.ok()) {
    EXPECT_TRUE(GpuBackendBuilt());
    EXPECT_EQ(0u, (*d)->name().find("nvjpeg ")) << (*d)->name();
    return;
  }
  const int code = d.status().code();
  EXPECT_TRUE(code == ENOTSUP || code == ENOENT || code == ENOSYS || code == ENODEV)
      << d.status().ToString();
  EXPECT_FALSE(d.status().message().empty());
  if (!GpuBackendBuilt()) {
    EXPECT_EQ(ENOTSUP, code);
  }
}

TEST(GpuJpegDecoderTest, BadOptionsAreRefused) {
  GpuDecoderOptions o;
  o.lanes = 0;
  auto d = OpenGpuJpegDecoder(o);
  ASSERT_FALSE(d.ok());
  if (GpuBackendBuilt()) {
    EXPECT_EQ(EINVAL, d.status().code()) << d.status().ToString();
  }
}

class GpuDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = OpenGpuJpegDecoder({});
    if (!d.ok()) GTEST_SKIP() << "no GPU decoder here: " << d.status().ToString();
    gpu_ = *d;
  }
  Result<std::vector<uint8_t>> Decode(JpegDecoder& d, const std::string& jpeg, int channels) {
    auto info = ProbeJpeg(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size());
    STOKER_RETURN_IF_ERROR(info.status());
    DecodeParams p;
    p.channels = channels;
    STOKER_ASSIGN_OR_RETURN(uint64_t n, OutputSize(*info, p));
    std::vector<uint8_t> out(n);
    STOKER_RETURN_IF_ERROR(d.Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), p,
                                    out.data(), out.size()));
    return out;
  }
  std::shared_ptr<BatchingJpegDecoder> gpu_;
};

// nvJPEG's pixels are libjpeg-turbo's within a few levels on average.
TEST_F(GpuDevice, BaselineImagesDecodeCloseToTheCpu) {
  auto cpu = NewCpuJpegDecoder();
  const int w = 97, h = 61;
  auto rgb = MakeImage(w, h, 3, 5), gray = MakeImage(w, h, 1, 6);
  struct Case {
    const char* name;
    std::string jpeg;
  };
  std::vector<Case> cases = {{"444", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_444, 90)},
                             {"422", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_422, 90)},
                             {"420", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_420, 90)},
                             {"440", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_440, 90)},
                             {"gray", EncodeTj(gray, w, h, TJPF_GRAY, TJSAMP_GRAY, 90)}};
  for (const Case& c : cases) {
    for (int ch : {0, 1, 3}) {
      auto want = Decode(*cpu, c.jpeg, ch);
      auto got = Decode(*gpu_, c.jpeg, ch);
      ASSERT_TRUE(got.ok()) << c.name << " " << ch << ": " << got.status().ToString();
      ASSERT_EQ(want->size(), got->size());
      double sum = 0;
      for (size_t i = 0; i < got->size(); ++i) sum += std::abs(int((*got)[i]) - int((*want)[i]));
      EXPECT_LT(sum / got->size(), 3.0) << c.name << " channels " << ch;
    }
  }
}

TEST_F(GpuDevice, WhatItDoesNotTakeIsENOTSUP) {
  const int w = 64, h = 48;
  auto rgb = MakeImage(w, h, 3, 2);
  std::vector<std::pair<const char*, std::string>> cases;
  LibjpegOptions o;
  o.progressive = true;
  cases.emplace_back("progressive", EncodeLibjpeg(rgb, w, h, o));
  o = {};
  o.arithmetic = true;
  cases.emplace_back("arithmetic", EncodeLibjpeg(rgb, w, h, o));
  o = {};
  o.color = JpegColor::kRgb;
  o.h_samp = o.v_samp = 1;
  cases.emplace_back("rgb", EncodeLibjpeg(rgb, w, h, o));
  cases.emplace_back("411", EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_411, 90));
  for (const auto& [name, jpeg] : cases) {
    auto got = Decode(*gpu_, jpeg, 0);
    EXPECT_EQ(ENOTSUP, got.status().code()) << name << ": " << got.status().ToString();
  }
}

TEST_F(GpuDevice, ConcurrentCallersShareBatches) {
  const int w = 160, h = 120;
  std::vector<std::string> jpegs;
  for (int i = 0; i < 256; ++i) {
    jpegs.push_back(EncodeTj(MakeImage(w, h, 3, i), w, h, TJPF_RGB, TJSAMP_420, 90));
  }
  DecodePool pool(std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), {128});
  std::vector<DecodePool::Job> jobs;
  for (const auto& j : jpegs) {
    jobs.push_back([&] { return Decode(*gpu_, j, 3).status(); });
  }
  for (const Status& s : pool.RunAll(DecodePriority::kReader, std::move(jobs))) {
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_GT(gpu_->largest_batch(), 1u);
  EXPECT_LT(gpu_->batches(), jpegs.size());
}

// A batch with a corrupt image in it: the others still decode.
TEST_F(GpuDevice, ACorruptImageFailsAloneInItsBatch) {
  const int w = 64, h = 48;
  std::string good = EncodeTj(MakeImage(w, h, 3, 9), w, h, TJPF_RGB, TJSAMP_420, 90);
  std::string bad = good;
  for (size_t i = bad.size() / 2; i < bad.size() - 2; ++i) bad[i] = static_cast<char>(0xFF);
  DecodePool pool(std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), {32});
  std::vector<DecodePool::Job> jobs;
  for (int i = 0; i < 64; ++i) {
    jobs.push_back([&, i] { return Decode(*gpu_, i == 17 ? bad : good, 3).status(); });
  }
  auto st = pool.RunAll(DecodePriority::kReader, std::move(jobs));
  for (int i = 0; i < 64; ++i) {
    if (i != 17) {
      EXPECT_TRUE(st[i].ok()) << i << ": " << st[i].ToString();
    }
  }
}

}  // namespace
}  // namespace stoker
