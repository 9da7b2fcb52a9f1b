// Test backends for BatchingJpegDecoder that run anywhere: a JpegDecoder
// (the CPU one) behind the batch interface, which records the batches it
// is given and fails the images a fault predicate picks, as a GPU would
// fail an image it rejects or a batch it runs out of memory on.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "decode/jpeg/batching_jpeg_decoder.h"
#include "decode/jpeg/cpu_jpeg_decoder.h"

namespace stoker::testing {

class SerialBatchBackend final : public BatchJpegBackend {
 public:
  // A non-OK status from fault fails that image without decoding it.
  using Fault = std::function<Status(const JpegJob&)>;
  SerialBatchBackend(std::shared_ptr<JpegDecoder> decoder, int lanes, size_t max_batch,
                     uint64_t batch_bytes = uint64_t{1} << 30, Fault fault = nullptr)
      : decoder_(std::move(decoder)),
        lanes_(lanes),
        max_batch_(max_batch),
        batch_bytes_(batch_bytes),
        fault_(std::move(fault)) {}

  std::string name() const override { return "batched " + decoder_->name(); }
  int lanes() const override { return lanes_; }
  size_t max_batch() const override { return max_batch_; }
  uint64_t batch_bytes() const override { return batch_bytes_; }
  void DecodeBatch(int lane, std::span<const JpegJob> jobs, std::span<Status> results) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      sizes_.push_back(jobs.size());
      uint64_t bytes = 0;
      for (const JpegJob& j : jobs) bytes += j.shape.pixel_bytes();
      bytes_.push_back(bytes);
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JpegJob& j = jobs[i];
      if (fault_) results[i] = fault_(j);
      if (results[i].ok()) {
        results[i] = decoder_->Decode(j.jpeg, j.len, j.params, j.out, j.shape.pixel_bytes());
      }
    }
    if (before_return_) before_return_();
  }
  std::vector<size_t> batch_sizes() const {
    std::lock_guard<std::mutex> l(mu_);
    return sizes_;
  }
  std::vector<uint64_t> batch_bytes_seen() const {
    std::lock_guard<std::mutex> l(mu_);
    return bytes_;
  }
  // Called at the end of every batch (tests hold a lane busy with it).
  void set_before_return(std::function<void()> f) { before_return_ = std::move(f); }

 private:
  const std::shared_ptr<JpegDecoder> decoder_;
  const int lanes_;
  const size_t max_batch_;
  const uint64_t batch_bytes_;
  const Fault fault_;
  std::function<void()> before_return_;
  mutable std::mutex mu_;
  std::vector<size_t> sizes_;
  std::vector<uint64_t> bytes_;
};

}  // namespace stoker::testing
