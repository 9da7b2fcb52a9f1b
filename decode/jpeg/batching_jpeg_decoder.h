// BatchingJpegDecoder: a JpegDecoder whose Decode calls, made by many
// threads at once (the DecodePool's), are collected into batches for a
// BatchJpegBackend that decodes many images per call (nvJPEG's batched API
// on a GPU). Each caller blocks until its own image is done, so it plugs in
// wherever a JpegDecoder does.
//
// Batching is greedy and needs no timer: each of the backend's lanes takes
// whatever is queued (up to max_batch jobs and batch_bytes of output) as
// soon as it is free. An idle decoder decodes a lone image at once; under
// load, images queue while the lanes are busy and batches fill up.
//
// Decode checks out_len against the probed shape (EINVAL) before queueing;
// the backend's per-image status is returned as it is (no fallback here:
// FallbackJpegDecoder does that, per view). Stop (or the destructor) fails
// what is still queued with ECANCELED and joins the lanes.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "decode/jpeg/jpeg_decoder.h"
#include "util/mutex.h"

namespace stoker {

// One image of a batch: the probed JPEG and where its pixels go.
struct JpegJob {
  const uint8_t* jpeg = nullptr;
  size_t len = 0;
  JpegInfo info;
  DecodeParams params;
  ImageShape shape;  // OutputShape(info, params); out_len == shape.pixel_bytes()
  uint8_t* out = nullptr;
};

// Decodes batches of images. REQUIRES of callers: DecodeBatch is called
// concurrently only with distinct lanes; jobs.size() <= max_batch().
class BatchJpegBackend {
 public:
  virtual ~BatchJpegBackend() = default;
  virtual std::string name() const = 0;
  // Independent pipelines (a GPU: a stream, decoder state and buffers each),
  // so one lane's transfers overlap another's decode.
  virtual int lanes() const = 0;
  virtual size_t max_batch() const = 0;
  // Output bytes one batch may hold; a single larger image fails ENOMEM.
  virtual uint64_t batch_bytes() const = 0;
  // Fills results[i] for jobs[i] (results.size() == jobs.size()); on
  // success the pixels are in jobs[i].out. Errors as JpegDecoder's, plus EIO
  // for a failure of the device.
  virtual void DecodeBatch(int lane, std::span<const JpegJob> jobs, std::span<Status> results) = 0;
  // What the backend runs on, for stats (device, library, engine).
  virtual nlohmann::json Describe() const { return nlohmann::json::object(); }
};

class BatchingJpegDecoder final : public JpegDecoder {
 public:
  explicit BatchingJpegDecoder(std::unique_ptr<BatchJpegBackend> backend);
  ~BatchingJpegDecoder() override;

  std::string name() const override { return backend_->name(); }
  [[nodiscard]] Status Decode(const uint8_t* jpeg, size_t len, const DecodeParams& params,
                              uint8_t* out, size_t out_len) override;
  void Stop();

  // gpu_batches, gpu_images, gpu_failed, gpu_largest_batch and the
  // backend's Describe().
  nlohmann::json Stats() const;
  uint64_t batches() const { return batches_.load(); }
  uint64_t largest_batch() const { return largest_batch_.load(); }
  // Images waiting for a lane.
  size_t queued() const;

 private:
  struct Pending;
  void RunLane(int lane);

  const std::unique_ptr<BatchJpegBackend> backend_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Pending*> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> lanes_;
  std::atomic<uint64_t> batches_{0};
  std::atomic<uint64_t> images_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> largest_batch_{0};
};

}  // namespace stoker
