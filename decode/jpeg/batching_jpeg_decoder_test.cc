#include "decode/jpeg/batching_jpeg_decoder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/decode_pool.h"
#include "decode/jpeg/fallback_jpeg_decoder.h"
#include "decode/testing/batch_backends.h"
#include "decode/testing/test_jpegs.h"

namespace stoker {
namespace {

using testing::EncodeLibjpeg;
using testing::EncodeTj;
using testing::LibjpegOptions;
using testing::MakeImage;
using testing::SerialBatchBackend;

struct Image {
  std::string jpeg;
  std::vector<uint8_t> want;  // the CPU decoder's pixels
};

// Widths 40, 41, ...: a fault can pick images by width.
std::vector<Image> Images(int n, int h = 24) {
  auto cpu = NewCpuJpegDecoder();
  std::vector<Image> v;
  for (int i = 0; i < n; ++i) {
    const int w = 40 + i;
    Image img;
    img.jpeg = EncodeTj(MakeImage(w, h, 3, i + 1), w, h, TJPF_RGB, TJSAMP_420, 90);
    img.want.resize(size_t(w) * h * 3);
    EXPECT_TRUE(cpu->Decode(reinterpret_cast<const uint8_t*>(img.jpeg.data()), img.jpeg.size(), {},
                            img.want.data(), img.want.size())
                    .ok());
    v.push_back(std::move(img));
  }
  return v;
}

Status DecodeInto(JpegDecoder& d, const Image& img, std::vector<uint8_t>* out) {
  out->assign(img.want.size(), 0);
  return d.Decode(reinterpret_cast<const uint8_t*>(img.jpeg.data()), img.jpeg.size(), {},
                  out->data(), out->size());
}

// Runs every image through the decoder from a pool of threads; statuses in order.
std::vector<Status> DecodeAll(JpegDecoder& d, const std::vector<Image>& images,
                              std::vector<std::vector<uint8_t>>* outs, int threads = 16) {
  DecodePool pool(std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), {threads});
  outs->assign(images.size(), {});
  std::vector<DecodePool::Job> jobs;
  for (size_t i = 0; i < images.size(); ++i) {
    jobs.push_back([&, i] { return DecodeInto(d, images[i], &(*outs)[i]); });
  }
  return pool.RunAll(DecodePriority::kReader, std::move(jobs));
}

template <typename T>
T Sum(const std::vector<T>& v) {
  return std::accumulate(v.begin(), v.end(), T{0});
}

// Waits (polling, no deadline: the test's own timeout bounds it) for cond.
template <typename F>
void AwaitTrue(F cond) {
  while (!cond()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(BatchingJpegDecoderTest, ManyThreadsGetTheCpuPixelsInBoundedBatches) {
  auto images = Images(60);
  auto* backend = new SerialBatchBackend(NewCpuJpegDecoder(), 2, 8);
  BatchingJpegDecoder d{std::unique_ptr<BatchJpegBackend>(backend)};
  std::vector<std::vector<uint8_t>> outs;
  auto st = DecodeAll(d, images, &outs);
  for (size_t i = 0; i < images.size(); ++i) {
    ASSERT_TRUE(st[i].ok()) << i << ": " << st[i].ToString();
    EXPECT_TRUE(outs[i] == images[i].want) << i;
  }
  auto sizes = backend->batch_sizes();
  EXPECT_EQ(images.size(), Sum(sizes));
  for (size_t s : sizes) EXPECT_LE(s, 8u);
  EXPECT_EQ(sizes.size(), d.batches());
  EXPECT_EQ(images.size(), d.Stats()["gpu_images"].get<uint64_t>());
}

// Holds the one lane in its first batch (images[0] alone) until every
// other image waits in the queue, so a test knows what the next batches find.
class FirstBatchHeld {
 public:
  explicit FirstBatchHeld(SerialBatchBackend* backend) {
    backend->set_before_return([this] {
      if (calls_++ == 0) {
        in_ = true;
        AwaitTrue([this] { return release_.load(); });
      }
    });
  }
  ~FirstBatchHeld() {
    Release();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  void Start(BatchingJpegDecoder& d, const std::vector<Image>& images) {
    outs.assign(images.size(), {});
    status.assign(images.size(), Status::OK());
    auto decode = [&, this](size_t i) { status[i] = DecodeInto(d, images[i], &outs[i]); };
    threads_.emplace_back(decode, 0);
    AwaitTrue([this] { return in_.load(); });
    for (size_t i = 1; i < images.size(); ++i) threads_.emplace_back(decode, i);
    AwaitTrue([&] { return d.queued() == images.size() - 1; });
  }
  // Joins the callers of the queued images (not the held one).
  void JoinQueued() {
    for (size_t i = 1; i < threads_.size(); ++i) threads_[i].join();
  }
  void Release() { release_ = true; }
  void JoinAll() {
    Release();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  std::vector<std::vector<uint8_t>> outs;
  std::vector<Status> status;

 private:
  std::atomic<int> calls_{0};
  std::atomic<bool> in_{false}, release_{false};
  std::vector<std::thread> threads_;
};

// While the lane is busy, images queue; the next batches take them, up to
// max_batch each.
TEST(BatchingJpegDecoderTest, QueuedImagesFormFullBatches) {
  auto images = Images(7);
  auto* backend = new SerialBatchBackend(NewCpuJpegDecoder(), 1, 4);
  FirstBatchHeld held(backend);
  BatchingJpegDecoder d{std::unique_ptr<BatchJpegBackend>(backend)};
  held.Start(d, images);
  held.JoinAll();
  for (size_t i = 0; i < images.size(); ++i) {
    ASSERT_TRUE(held.status[i].ok()) << held.status[i].ToString();
    EXPECT_TRUE(held.outs[i] == images[i].want);
  }
  EXPECT_EQ((std::vector<size_t>{1, 4, 2}), backend->batch_sizes());
  EXPECT_EQ(4u, d.largest_batch());
}

TEST(BatchingJpegDecoderTest, BatchBytesBoundTheBatch) {
  auto images = Images(5, 30);  // about 40x30x3 = 3.6K each
  auto* backend = new SerialBatchBackend(NewCpuJpegDecoder(), 1, 64, 9000);
  FirstBatchHeld held(backend);
  BatchingJpegDecoder d{std::unique_ptr<BatchJpegBackend>(backend)};
  held.Start(d, images);
  held.JoinAll();
  for (const Status& s : held.status) EXPECT_TRUE(s.ok()) << s.ToString();
  for (uint64_t b : backend->batch_bytes_seen()) EXPECT_LE(b, 9000u);
  EXPECT_EQ((std::vector<size_t>{1, 2, 2}), backend->batch_sizes());
}

TEST(BatchingJpegDecoderTest, WrongOutputSizeIsRefusedBeforeQueueing) {
  auto images = Images(1);
  auto* backend = new SerialBatchBackend(NewCpuJpegDecoder(), 1, 4);
  BatchingJpegDecoder d{std::unique_ptr<BatchJpegBackend>(backend)};
  std::vector<uint8_t> out(images[0].want.size() + 1);
  Status s = d.Decode(reinterpret_cast<const uint8_t*>(images[0].jpeg.data()),
                      images[0].jpeg.size(), {}, out.data(), out.size());
  EXPECT_EQ(EINVAL, s.code()) << s.ToString();
  EXPECT_TRUE(backend->batch_sizes().empty());
}

TEST(BatchingJpegDecoderTest, StopCancelsQueuedImagesAndFinishesTheRunningBatch) {
  auto images = Images(3);
  auto* backend = new SerialBatchBackend(NewCpuJpegDecoder(), 1, 4);
  FirstBatchHeld held(backend);
  BatchingJpegDecoder d{std::unique_ptr<BatchJpegBackend>(backend)};
  held.Start(d, images);
  std::thread stopper([&] { d.Stop(); });
  held.JoinQueued();
  EXPECT_EQ(ECANCELED, held.status[1].code());
  EXPECT_EQ(ECANCELED, held.status[2].code());
  held.Release();
  stopper.join();
  held.JoinAll();
  EXPECT_TRUE(held.status[0].ok()) << held.status[0].ToString();
  EXPECT_TRUE(held.outs[0] == images[0].want);
  std::vector<uint8_t> out;
  EXPECT_EQ(ECANCELED, DecodeInto(d, images[0], &out).code());
}

// --- Fallback: images the batch backend fails go to the CPU ----------------

// Fails images by width: 41 ENOTSUP, 42 ENOMEM, 43 EIO, 44 EBADMSG.
Status FaultByWidth(const JpegJob& j) {
  switch (j.info.width) {
    case 41:
      return Status::Error(ENOTSUP, "injected: not supported");
    case 42:
      return Status::Error(ENOMEM, "injected: out of memory");
    case 43:
      return Status::IOError("injected: device error");
    case 44:
      return Status::Corruption("injected: rejected");
  }
  return Status::OK();
}

TEST(FallbackJpegDecoderTest, FailedImagesAreDecodedByTheCpuAndCounted) {
  auto images = Images(12);
  auto batching = std::make_shared<BatchingJpegDecoder>(std::make_unique<SerialBatchBackend>(
      NewCpuJpegDecoder(), 2, 4, uint64_t{1} << 30, FaultByWidth));
  auto counters = std::make_shared<FallbackCounters>();
  FallbackJpegDecoder d(batching, std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), counters);
  std::vector<std::vector<uint8_t>> outs;
  auto st = DecodeAll(d, images, &outs);
  for (size_t i = 0; i < images.size(); ++i) {
    ASSERT_TRUE(st[i].ok()) << i << ": " << st[i].ToString();
    EXPECT_TRUE(outs[i] == images[i].want) << i;
  }
  EXPECT_EQ(1u, counters->unsupported.load());
  EXPECT_EQ(1u, counters->no_memory.load());
  EXPECT_EQ(1u, counters->device_errors.load());
  EXPECT_EQ(1u, counters->rejected.load());
  EXPECT_EQ(4u, counters->total());
  EXPECT_EQ(4u, batching->Stats()["gpu_failed"].get<uint64_t>());
}

TEST(FallbackJpegDecoderTest, WithoutFallbackTheErrorsReachTheCaller) {
  auto images = Images(6);
  BatchingJpegDecoder d(std::make_unique<SerialBatchBackend>(NewCpuJpegDecoder(), 1, 4,
                                                             uint64_t{1} << 30, FaultByWidth));
  std::vector<std::vector<uint8_t>> outs;
  auto st = DecodeAll(d, images, &outs);
  const int want[] = {0, ENOTSUP, ENOMEM, EIO, EBADMSG, 0};
  for (size_t i = 0; i < images.size(); ++i) EXPECT_EQ(want[i], st[i].code()) << i;
}

TEST(FallbackJpegDecoderTest, CallerMistakesAreNotRetried) {
  auto images = Images(2);
  auto counters = std::make_shared<FallbackCounters>();
  auto batching = std::make_shared<BatchingJpegDecoder>(
      std::make_unique<SerialBatchBackend>(NewCpuJpegDecoder(), 1, 4));
  FallbackJpegDecoder d(batching, std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), counters);
  std::vector<uint8_t> out(7);
  EXPECT_EQ(EINVAL, d.Decode(reinterpret_cast<const uint8_t*>(images[0].jpeg.data()),
                             images[0].jpeg.size(), {}, out.data(), out.size())
                        .code());
  batching->Stop();
  std::vector<uint8_t> full;
  EXPECT_EQ(ECANCELED, DecodeInto(d, images[1], &full).code());
  EXPECT_EQ(0u, counters->total());
}

TEST(FallbackJpegDecoderTest, CorruptForBothIsTheCpusError) {
  auto images = Images(1);
  std::string cut = images[0].jpeg.substr(0, images[0].jpeg.size() / 2);
  auto counters = std::make_shared<FallbackCounters>();
  auto faulty = std::make_shared<BatchingJpegDecoder>(std::make_unique<SerialBatchBackend>(
      NewCpuJpegDecoder(), 1, 4, uint64_t{1} << 30,
      [](const JpegJob&) { return Status::Corruption("injected: bad jpeg"); }));
  FallbackJpegDecoder d(faulty, std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), counters);
  std::vector<uint8_t> out(images[0].want.size());
  Status s = d.Decode(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(), {}, out.data(),
                      out.size());
  EXPECT_EQ(EBADMSG, s.code());
  EXPECT_EQ(std::string::npos, s.message().find("injected")) << s.ToString();
  EXPECT_EQ(1u, counters->rejected.load());
}

TEST(FallbackJpegDecoderTest, NameNamesBoth) {
  auto batching = std::make_shared<BatchingJpegDecoder>(
      std::make_unique<SerialBatchBackend>(NewCpuJpegDecoder(), 1, 4));
  FallbackJpegDecoder d(batching, std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()),
                        std::make_shared<FallbackCounters>());
  EXPECT_NE(std::string::npos, d.name().find("batched libjpeg-turbo"));
  EXPECT_NE(std::string::npos, d.name().find(", fallback libjpeg-turbo"));
  EXPECT_NE(d.name(), batching->name());
}

}  // namespace
}  // namespace stoker
