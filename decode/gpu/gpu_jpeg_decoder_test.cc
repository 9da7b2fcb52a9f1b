#include "decode/gpu/gpu_jpeg_decoder.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>
#include <tuple>

#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/decode_pool.h"
#include "decode/jpeg/fallback_jpeg_decoder.h"
#include "decode/testing/gpu_under_test.h"
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

// Where the stand-in libraries are: CMake names the folder where it builds
// the GPU backend; without it, every test that would load them skips.
#ifdef STOKER_GPU_STANDIN_DIR
constexpr const char* kStandinDir = STOKER_GPU_STANDIN_DIR;
#else
constexpr const char* kStandinDir = "";
#endif

// On a GPU host, the real device; elsewhere the host stand-in, so the
// backend's own code runs everywhere the build has it.
class GpuDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = testing::OpenGpuUnderTest();
    if (!d.ok()) GTEST_SKIP() << "no GPU decoder here: " << d.status().ToString();
    gpu_ = *d;
  }
  static Result<std::vector<uint8_t>> Decode(JpegDecoder& d, const std::string& jpeg, int channels,
                                             DctMethod dct = DctMethod::kFast) {
    auto info = ProbeJpeg(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size());
    STOKER_RETURN_IF_ERROR(info.status());
    DecodeParams p;
    p.channels = channels;
    p.dct = dct;
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

// nvJPEG has no DCT scaling: a scaled decode is refused before the device
// (a view with a ratio decodes on the CPU), one that max_side leaves whole is not.
TEST_F(GpuDevice, ScaledDecodeIsENOTSUP) {
  const int w = 64, h = 48;
  const std::string jpeg = EncodeTj(MakeImage(w, h, 3, 2), w, h, TJPF_RGB, TJSAMP_420, 90);
  const auto* data = reinterpret_cast<const uint8_t*>(jpeg.data());
  for (auto [ratio, max_side, want] : {std::tuple{2, 0u, ENOTSUP}, std::tuple{8, 0u, ENOTSUP},
                                       std::tuple{1, 24u, ENOTSUP}, std::tuple{1, 49u, 0}}) {
    DecodeParams p;
    p.ratio = ratio;
    p.max_side = max_side;
    auto info = ProbeJpeg(data, jpeg.size());
    ASSERT_TRUE(info.ok());
    auto n = OutputSize(*info, p);
    ASSERT_TRUE(n.ok());
    std::vector<uint8_t> out(*n);
    Status st = gpu_->Decode(data, jpeg.size(), p, out.data(), out.size());
    EXPECT_EQ(want, st.code()) << ratio << " " << max_side << ": " << st.ToString();
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

// --- On the host stand-in: the backend's side of the device ABI ------------
// These set the stand-in's knobs (standin.h) to make the device refuse,
// fail or run out, which a real device cannot be made to do on demand.

class GpuStandin : public GpuDevice {
 protected:
  void SetUp() override {
    GpuDevice::SetUp();
    if (IsSkipped()) return;
    standin_ = testing::Standin();  // now that the decoder has loaded it
    if (!testing::OnStandin(*gpu_) || !standin_.loaded()) GTEST_SKIP() << "a real GPU is here";
  }
  void TearDown() override {
    if (standin_.loaded()) {
      for (const char* k : {"REJECT_WIDTH", "FAIL_SYNC", "HARDWARE", "HOLD_SYNC",
                            "HARDWARE_REJECT_WIDTH", "STICKY", "BROKEN"}) {
        standin_.Set(k, 0);
      }
    }
  }
  // Decodes every JPEG of jpegs at once, from as many threads, so that they
  // queue and share batches.
  static std::vector<Status> DecodeAll(JpegDecoder& d, const std::vector<std::string>& jpegs,
                                       std::vector<std::vector<uint8_t>>* out) {
    std::vector<Status> st(jpegs.size());
    out->assign(jpegs.size(), {});
    std::vector<std::thread> threads;
    for (size_t i = 0; i < jpegs.size(); ++i) {
      threads.emplace_back([&, i] {
        auto r = Decode(d, jpegs[i], 3, DctMethod::kAccurate);
        st[i] = r.status();
        if (r.ok()) (*out)[i] = std::move(*r);
      });
    }
    for (auto& t : threads) t.join();
    return st;
  }
  testing::Standin standin_;
};

// Its pixels are libjpeg-turbo's with the accurate DCT, so every byte the
// backend places, copies back and widens is checked exactly: each
// subsampling, gray as 1 and 3 channels, colour as Y (channels=1).
TEST_F(GpuStandin, EveryByteLandsWhereTheCpuPutsIt) {
  auto cpu = NewCpuJpegDecoder();
  const int w = 97, h = 61;
  auto rgb = MakeImage(w, h, 3, 7), gray = MakeImage(w, h, 1, 8);
  std::vector<std::string> jpegs = {
      EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_444, 90), EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_422, 90),
      EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_420, 90), EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_440, 90),
      EncodeTj(gray, w, h, TJPF_GRAY, TJSAMP_GRAY, 90)};
  for (size_t c = 0; c < jpegs.size(); ++c) {
    for (int ch : {0, 1, 3}) {
      auto want = Decode(*cpu, jpegs[c], ch, DctMethod::kAccurate);
      auto got = Decode(*gpu_, jpegs[c], ch, DctMethod::kAccurate);
      ASSERT_TRUE(got.ok()) << c << " " << ch << ": " << got.status().ToString();
      EXPECT_TRUE(*want == *got) << "case " << c << " channels " << ch;
    }
  }
  // Many at once, RGB and gray mixed in one batch at different offsets.
  std::vector<std::string> many;
  for (int i = 0; i < 48; ++i) {
    const int wi = 40 + i, hi = 30 + (i % 7);
    many.push_back(i % 3 ? EncodeTj(MakeImage(wi, hi, 3, i), wi, hi, TJPF_RGB, TJSAMP_420, 85)
                         : EncodeTj(MakeImage(wi, hi, 1, i), wi, hi, TJPF_GRAY, TJSAMP_GRAY, 85));
  }
  std::vector<std::vector<uint8_t>> out;
  auto st = DecodeAll(*gpu_, many, &out);
  for (size_t i = 0; i < many.size(); ++i) {
    ASSERT_TRUE(st[i].ok()) << i << ": " << st[i].ToString();
    EXPECT_TRUE(*Decode(*cpu, many[i], 3, DctMethod::kAccurate) == out[i]) << i;
  }
}

// The device rejects one image of a batch: the batch is split until that
// image is alone; it fails ENOTSUP and every other image decodes, each
// into its own place.
TEST_F(GpuStandin, AnImageTheDeviceRejectsFailsAlone) {
  std::vector<std::string> jpegs;
  for (int i = 0; i < 40; ++i) {
    const int w = i == 23 ? 77 : 64 + i % 3;
    jpegs.push_back(EncodeTj(MakeImage(w, 48, 3, i), w, 48, TJPF_RGB, TJSAMP_420, 90));
  }
  GpuDecoderOptions o;
  o.library_path = {kStandinDir};
  o.lanes = 1;
  auto d = OpenGpuJpegDecoder(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  standin_.Set("REJECT_WIDTH", 77);
  auto cpu = NewCpuJpegDecoder();
  // Image 0 holds the one lane while the 39 others queue: they are then
  // one batch, with image 23 inside it.
  standin_.Set("HOLD_SYNC", 1);
  const long long syncs = standin_.Get("SYNCS");
  std::vector<std::vector<uint8_t>> out(jpegs.size());
  std::vector<Status> st(jpegs.size());
  auto run = [&](size_t i) {
    auto r = Decode(**d, jpegs[i], 3, DctMethod::kAccurate);
    st[i] = r.status();
    if (r.ok()) out[i] = std::move(*r);
  };
  std::vector<std::thread> threads;
  // Waits (60 s at most) for what the held lane lets happen; on a timeout
  // the lane is let go, so the threads end and the test fails, not hangs.
  auto wait = [&](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    return done();
  };
  threads.emplace_back(run, 0);
  bool held = wait([&] { return standin_.Get("SYNCS") != syncs; });
  for (size_t i = 1; held && i < jpegs.size(); ++i) threads.emplace_back(run, i);
  held = held && wait([&] { return (*d)->queued() == jpegs.size() - 1; });
  const long long calls = standin_.Get("DECODE_BATCHED");
  standin_.Set("HOLD_SYNC", 0);
  for (auto& t : threads) t.join();
  ASSERT_TRUE(held) << "the 39 images never queued behind the held lane";
  EXPECT_EQ(2u, (*d)->batches());
  EXPECT_EQ(39u, (*d)->largest_batch());
  for (size_t i = 0; i < jpegs.size(); ++i) {
    if (i == 23) {
      EXPECT_EQ(ENOTSUP, st[i].code()) << st[i].ToString();
      EXPECT_NE(std::string::npos, st[i].message().find("JPEG_NOT_SUPPORTED")) << st[i].ToString();
    } else {
      ASSERT_TRUE(st[i].ok()) << i << ": " << st[i].ToString();
      EXPECT_TRUE(*Decode(*cpu, jpegs[i], 3, DctMethod::kAccurate) == out[i]) << i;
    }
  }
  // The batch of images 1-39 is halved down to image 23 and no further:
  // one call, then two for each of the 5 or 6 halvings (39 -> 20 or 19 ->
  // 10 or 9 -> ... -> 1), wherever image 23 queued in it.
  const long long n = standin_.Get("DECODE_BATCHED") - calls;
  EXPECT_TRUE(n == 11 || n == 13) << n;
}

// A device failure seen at synchronisation fails the whole batch (EIO, no
// stale pixels handed out); a view with fallback decodes it on the CPU and
// counts it; where the context is still usable, the next batch runs on the
// device again.
TEST_F(GpuStandin, AFailedStreamFallsBackAndTheLaneRecovers) {
  auto cpu = NewCpuJpegDecoder();
  const std::string jpeg = EncodeTj(MakeImage(64, 48, 3, 4), 64, 48, TJPF_RGB, TJSAMP_420, 90);
  standin_.Set("FAIL_SYNC", 1);
  auto bare = Decode(*gpu_, jpeg, 3, DctMethod::kAccurate);
  EXPECT_EQ(EIO, bare.status().code()) << bare.status().ToString();
  EXPECT_NE(std::string::npos, bare.status().message().find("launch failure"));

  auto counters = std::make_shared<FallbackCounters>();
  FallbackJpegDecoder view(gpu_, std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), counters);
  standin_.Set("FAIL_SYNC", 1);
  auto fell = Decode(view, jpeg, 3, DctMethod::kAccurate);
  ASSERT_TRUE(fell.ok()) << fell.status().ToString();
  EXPECT_EQ(1u, counters->device_errors.load());
  EXPECT_TRUE(*Decode(*cpu, jpeg, 3, DctMethod::kAccurate) == *fell);

  const uint64_t images = gpu_->Stats()["gpu_images"];
  auto again = Decode(*gpu_, jpeg, 3, DctMethod::kAccurate);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(*fell == *again);
  EXPECT_EQ(images + 1, gpu_->Stats()["gpu_images"].get<uint64_t>());
}

// A failure that breaks the CUDA context (a launch failure does): the
// decoder sees it once, then sends every image to the fallback without
// touching the device, and says so in its stats.
TEST_F(GpuStandin, ABrokenContextSendsEverythingToTheCpu) {
  GpuDecoderOptions o;
  o.library_path = {kStandinDir};
  auto d = OpenGpuJpegDecoder(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto counters = std::make_shared<FallbackCounters>();
  FallbackJpegDecoder view(*d, std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), counters);
  auto cpu = NewCpuJpegDecoder();
  const std::string jpeg = EncodeTj(MakeImage(64, 48, 3, 4), 64, 48, TJPF_RGB, TJSAMP_420, 90);
  standin_.Set("STICKY", 1);
  standin_.Set("FAIL_SYNC", 1);
  for (int i = 0; i < 5; ++i) {
    auto got = Decode(view, jpeg, 3, DctMethod::kAccurate);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(*Decode(*cpu, jpeg, 3, DctMethod::kAccurate) == *got);
    if (i == 0) {
      EXPECT_TRUE((*d)->Stats()["gpu_backend"]["context_broken"].get<bool>());
    }
  }
  EXPECT_EQ(5u, counters->device_errors.load());
  const long long calls = standin_.Get("DECODE_BATCHED");
  auto bare = Decode(**d, jpeg, 3);
  EXPECT_EQ(EIO, bare.status().code());
  EXPECT_NE(std::string::npos, bare.status().message().find("context is broken"))
      << bare.status().ToString();
  EXPECT_EQ(calls, standin_.Get("DECODE_BATCHED"));  // the device is not touched
}

// nvJPEG's own allocations past device_memory_bytes are refused: the image
// fails ENOMEM, the refusal is counted, and a view with fallback decodes it
// on the CPU.
TEST_F(GpuStandin, NvjpegsMemoryIsBounded) {
  GpuDecoderOptions o;
  o.library_path = {kStandinDir};
  o.device_memory_bytes = 1000;  // less than the bitstream scratch below
  auto small = OpenGpuJpegDecoder(o);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  const std::string jpeg = EncodeTj(MakeImage(120, 90, 3, 1), 120, 90, TJPF_RGB, TJSAMP_444, 95);
  ASSERT_GT(jpeg.size(), 1000u);
  auto got = Decode(**small, jpeg, 3);
  EXPECT_EQ(ENOMEM, got.status().code()) << got.status().ToString();
  EXPECT_GT((*small)->Stats()["gpu_backend"]["nvjpeg_allocations_refused"].get<uint64_t>(), 0u);

  auto counters = std::make_shared<FallbackCounters>();
  FallbackJpegDecoder view(*small, std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), counters);
  EXPECT_TRUE(Decode(view, jpeg, 3).ok());
  EXPECT_EQ(1u, counters->no_memory.load());
}

// An image larger than a lane's buffer fails ENOMEM before the device.
TEST_F(GpuStandin, AnImageLargerThanTheLaneBufferIsENOMEM) {
  GpuDecoderOptions o;
  o.library_path = {kStandinDir};
  o.batch_bytes = 4096;
  auto small = OpenGpuJpegDecoder(o);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  auto got =
      Decode(**small, EncodeTj(MakeImage(64, 48, 3, 1), 64, 48, TJPF_RGB, TJSAMP_420, 90), 3);
  EXPECT_EQ(ENOMEM, got.status().code()) << got.status().ToString();
  EXPECT_TRUE(
      Decode(**small, EncodeTj(MakeImage(32, 24, 3, 1), 32, 24, TJPF_RGB, TJSAMP_420, 90), 3).ok());
}

// Closing a decoder gives back every stream, device and pinned byte, its
// own buffers and nvJPEG's.
TEST_F(GpuStandin, ADecoderLeavesNothingBehind) {
  const long long dev = standin_.Get("LIVE_DEVICE_BYTES");
  const long long pinned = standin_.Get("LIVE_PINNED_BYTES");
  const long long streams = standin_.Get("LIVE_STREAMS");
  {
    GpuDecoderOptions o;
    o.library_path = {kStandinDir};
    o.lanes = 3;
    o.batch_bytes = 1 << 20;
    auto d = OpenGpuJpegDecoder(o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(streams + 3, standin_.Get("LIVE_STREAMS"));
    EXPECT_EQ(dev + 3 * (1 << 20), standin_.Get("LIVE_DEVICE_BYTES"));
    std::vector<std::string> jpegs;
    for (int i = 0; i < 16; ++i) {
      jpegs.push_back(EncodeTj(MakeImage(64, 48, 3, i), 64, 48, TJPF_RGB, TJSAMP_420, 90));
    }
    std::vector<std::vector<uint8_t>> out;
    for (const Status& s : DecodeAll(**d, jpegs, &out)) EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_GT(standin_.Get("LIVE_DEVICE_BYTES"), dev + 3 * (1 << 20));  // nvJPEG's scratch
  }
  EXPECT_EQ(dev, standin_.Get("LIVE_DEVICE_BYTES"));
  EXPECT_EQ(pinned, standin_.Get("LIVE_PINNED_BYTES"));
  EXPECT_EQ(streams, standin_.Get("LIVE_STREAMS"));
}

// The hardware engines are taken where the device has them, and the
// hybrid decoder where it refuses (ARCH_MISMATCH, as a device without).
TEST_F(GpuStandin, TheHardwareEngineIsPreferred) {
  GpuDecoderOptions o;
  o.library_path = {kStandinDir};
  auto hybrid = OpenGpuJpegDecoder(o);
  ASSERT_TRUE(hybrid.ok());
  EXPECT_EQ("gpu-hybrid", (*hybrid)->Stats()["gpu_backend"]["engine"].get<std::string>());
  standin_.Set("HARDWARE", 1);
  auto hw = OpenGpuJpegDecoder(o);
  ASSERT_TRUE(hw.ok());
  auto b = (*hw)->Stats()["gpu_backend"];
  EXPECT_EQ("hardware", b["engine"].get<std::string>());
  EXPECT_EQ("gpu-hybrid", b["rest_engine"].get<std::string>());
  EXPECT_EQ(7u, b["hardware_engines"].get<unsigned>());
  EXPECT_NE(std::string::npos, (*hw)->name().find(" hardware+gpu-hybrid interpolated"))
      << (*hw)->name();
  o.hardware = false;
  auto refused = OpenGpuJpegDecoder(o);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ("gpu-hybrid", (*refused)->Stats()["gpu_backend"]["engine"].get<std::string>());
}

// Beside the hardware engine, a GPU-hybrid handle takes what the hardware
// does not: extended-sequential JPEGs and scans that do not interleave every
// component by their headers, and an image the hardware refuses alone. All
// of them decode on the device, to the right bytes, each counted once.
TEST_F(GpuStandin, WhatTheHardwareDoesNotTakeGoesToTheEngineBesideIt) {
  standin_.Set("HARDWARE", 1);
  standin_.Set("HARDWARE_REJECT_WIDTH", 71);
  GpuDecoderOptions o;
  o.library_path = {kStandinDir};
  auto d = OpenGpuJpegDecoder(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ("gpu-hybrid", (*d)->Stats()["gpu_backend"]["rest_engine"].get<std::string>());
  auto cpu = NewCpuJpegDecoder();
  std::vector<std::string> jpegs;
  int hardware = 0;
  for (int i = 0; i < 24; ++i) {
    const int w = i == 4 ? 71 : 60 + i % 4, h = 40;
    auto rgb = MakeImage(w, h, 3, i);
    switch (i % 4) {
      case 0:  // baseline, interleaved: the hardware's (but for image 4's width)
        jpegs.push_back(EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_420, 90));
        hardware += i != 4;
        break;
      case 1: {  // the same as extended sequential (SOF1): the hybrid's
        std::string j = EncodeTj(rgb, w, h, TJPF_RGB, TJSAMP_422, 90);
        const size_t sof = j.find("\xFF\xC0");
        ASSERT_NE(std::string::npos, sof);
        j[sof + 1] = static_cast<char>(0xC1);
        jpegs.push_back(j);
        break;
      }
      case 2: {  // one scan per component: the hybrid's
        LibjpegOptions lo;
        lo.non_interleaved = true;
        jpegs.push_back(EncodeLibjpeg(rgb, w, h, lo));
        break;
      }
      default:  // gray: one component in its one scan, the hardware's
        jpegs.push_back(EncodeTj(MakeImage(w, h, 1, i), w, h, TJPF_GRAY, TJSAMP_GRAY, 90));
        hardware++;
    }
  }
  const long long hw_before = standin_.Get("DECODED_HARDWARE");
  const long long refused = standin_.Get("HARDWARE_REFUSED");
  // By their headers: the hardware is never handed what it does not take.
  const std::string odd = jpegs[4];
  jpegs.erase(jpegs.begin() + 4);
  std::vector<std::vector<uint8_t>> out;
  auto st = DecodeAll(**d, jpegs, &out);
  for (size_t i = 0; i < jpegs.size(); ++i) {
    ASSERT_TRUE(st[i].ok()) << i << ": " << st[i].ToString();
    EXPECT_TRUE(*Decode(*cpu, jpegs[i], 3, DctMethod::kAccurate) == out[i]) << i;
  }
  EXPECT_EQ(refused, standin_.Get("HARDWARE_REFUSED"));
  // Refused by the hardware for no reason its header shows: retried beside it.
  auto alone = Decode(**d, odd, 3, DctMethod::kAccurate);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_TRUE(*Decode(*cpu, odd, 3, DctMethod::kAccurate) == *alone);
  EXPECT_EQ(refused + 1, standin_.Get("HARDWARE_REFUSED"));
  auto b = (*d)->Stats()["gpu_backend"];
  EXPECT_EQ(hardware, b["engine_images"].get<int>());
  EXPECT_EQ(24 - hardware, b["rest_engine_images"].get<int>());
  EXPECT_EQ(hardware, standin_.Get("DECODED_HARDWARE") - hw_before);
}

}  // namespace
}  // namespace stoker
