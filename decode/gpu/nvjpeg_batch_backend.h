// NvjpegBatchBackend: the BatchJpegBackend over nvJPEG that
// OpenGpuJpegDecoder puts behind a BatchingJpegDecoder (gpu_jpeg_decoder.h
// says what it decodes, on which engines, in how much memory). Private to
// decode/gpu/; built only with STOKER_CUDA, and every CUDA and nvJPEG call
// goes through the dlopen'ed GpuLibraries.
//
// Its two halves live in two files: setting it up on a device
// (nvjpeg_backend_init.cc: the device, nvJPEG's allocation budget, the
// engines, the lanes, what it describes) and decoding a batch on a lane
// (nvjpeg_batch_backend.cc: screening, placing, batch decode, copying out).
//
// Thread-safety: Init once, before anything else; then DecodeBatch from one
// thread per lane at a time (BatchingJpegDecoder's lane threads), and the
// rest from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "decode/gpu/gpu_jpeg_decoder.h"
#include "decode/gpu/gpu_libraries.h"
#include "util/status.h"

namespace stoker {

class NvjpegBatchBackend final : public BatchJpegBackend {
 public:
  // The alignment of each image in a lane's buffer, and the least batch_bytes.
  static constexpr size_t kAlign = 256;

  NvjpegBatchBackend(std::shared_ptr<const GpuLibraries> libs, const GpuDecoderOptions& o);
  ~NvjpegBatchBackend() override;

  // Selects the device, opens nvJPEG on the first engine that it takes (and
  // the one beside the hardware), and sets up every lane.
  // Errors: the CUDA runtime's, or nvJPEG's (FromNvjpeg).
  Status Init();

  std::string name() const override;
  int lanes() const override { return static_cast<int>(lanes_.size()); }
  size_t max_batch() const override { return o_.max_batch; }
  uint64_t batch_bytes() const override { return o_.batch_bytes; }
  nlohmann::json Describe() const override;
  void DecodeBatch(int lane, std::span<const JpegJob> jobs, std::span<Status> results) override;

 private:
  enum Engine { kMain = 0, kRest = 1 };  // the chosen engine; the one beside the hardware
  struct Lane {
    cudaStream_t stream = nullptr;
    nvj::State state[2][2] = {};            // [engine][output format]
    int init[2][2] = {{-1, -1}, {-1, -1}};  // batch size each state is initialised for
    uint8_t* dev = nullptr;
    uint8_t* host = nullptr;
  };

  // Init's steps: the device and its name; the engines; each lane's stream,
  // states and buffers.
  Status SelectDevice();
  Status CreateEngines();
  Status CreateLanes();
  // Gives up the engine beside the hardware (its states in every lane).
  void DropRestEngine();

  // Decodes group[lo, hi) as one nvJPEG batch on engine e; a batch that
  // fails is split in halves until the images that fail are alone, and an
  // image the hardware refuses alone goes to the engine beside it. Sets
  // engine[i] to the engine that took image i.
  void Decode(Lane& l, int e, int f, std::span<const JpegJob> jobs,
              const std::vector<size_t>& offset, const std::vector<size_t>& group, size_t lo,
              size_t hi, std::span<Status> results, std::vector<int>& engine);
  // A failed copy or decode on the lane's stream: every image not failed
  // yet fails with s, the lane's states are to be reset, and a broken
  // context is remembered.
  void FailStream(Lane& l, const Status& s, std::span<Status> results);

  // nvJPEG's status s of what as a Status: EBADMSG for a bad or truncated
  // JPEG, ENOTSUP for one it does not take, ENOMEM, else EIO.
  static Status FromNvjpeg(int s, const std::string& what);

  const std::shared_ptr<const GpuLibraries> libs_;
  const GpuDecoderOptions o_;
  std::vector<Lane> lanes_;  // each used by one BatchingJpegDecoder lane thread at a time
  nvj::Handle handle_[2] = {nullptr, nullptr};  // [Engine]; kRest only beside the hardware
  std::string engine_;
  std::string rest_engine_;
  std::atomic<uint64_t> images_[2] = {0, 0};
  std::once_flag broken_once_;
  std::shared_ptr<const std::string> broken_why_;  // set once, before broken_
  std::atomic<bool> broken_{false};
  bool interpolated_ = false;
  unsigned hardware_engines_ = 0;
  std::string device_name_ = "?";
  std::string capability_;
};

}  // namespace stoker
