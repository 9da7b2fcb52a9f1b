// The GPU decode backend: nvJPEG's batched decoder (the device's hardware
// JPEG engines where it has them, the CUDA hybrid decoder otherwise) behind
// a BatchingJpegDecoder, so it plugs in wherever a JpegDecoder does.
//
// Built only with STOKER_CUDA (CMakeLists.txt); the CUDA runtime and nvJPEG
// are loaded at run time (decode/gpu/gpu_libraries.h), so the same binary
// runs without them and OpenGpuJpegDecoder then fails with the reason.
//
// Engines: the device's hardware JPEG decoder where it has one (and
// options.hardware), with a GPU-hybrid handle beside it for the JPEGs the
// hardware does not take (extended-sequential, or scans that do not
// interleave every component; one it refuses for another reason is retried
// there alone); else the GPU-hybrid decoder, else the hybrid one.
//
// What it decodes: 8-bit baseline and extended-sequential Huffman JPEGs,
// YCbCr or grayscale, sampled 4:4:4, 4:2:2, 4:2:0 or 4:4:0, ending in an EOI
// marker. Anything else (progressive, arithmetic, CMYK/YCCK, RGB without
// colour transform, 4:1:1, a truncated file, a ratio other than 1: nvJPEG
// has no DCT scaling) fails ENOTSUP or EBADMSG without reaching the device;
// FallbackJpegDecoder sends those to the CPU.
// Its pixels differ slightly from libjpeg-turbo's (its own IDCT, upsampling
// and colour conversion): dct and fancy_upsampling in DecodeParams are not
// honoured, and its name() (nvJPEG version and engine) is part of a view's
// fingerprint, so GPU and CPU bytes never mix in one view.
//
// Memory: each lane holds one device output buffer and one pinned host
// buffer of batch_bytes, allocated once with cudaMalloc/cudaHostAlloc;
// nvJPEG's own allocations go through an allocator that refuses them past
// device_memory_bytes (the image then fails ENOMEM). No managed memory.
//
// Thread-safety: the decoder is thread-safe (BatchingJpegDecoder).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "decode/jpeg/batching_jpeg_decoder.h"
#include "util/status.h"

namespace stoker {

// --decoder: which decoder the views of a mount use.
enum class DecoderKind {
  kAuto,  // the GPU when a device and nvJPEG are found, else the CPU
  kCpu,
  kGpu,  // the GPU, or the mount fails
};
Result<DecoderKind> ParseDecoderKind(std::string_view s);
const char* ToString(DecoderKind k);

struct GpuDecoderOptions {
  // Directories searched first for libnvjpeg and libcudart (--gpu-library-path).
  // Default: none (then the search path of gpu_libraries.h).
  std::vector<std::string> library_path;
  // CUDA device index. Default: 0.
  int device = 0;
  // Independent pipelines (stream, nvJPEG state, buffers), so one batch's
  // copies overlap another's decode. Default: 2.
  int lanes = 2;
  // Images per nvJPEG batch at most. Default: 64.
  size_t max_batch = 64;
  // Decoded bytes per batch at most: the size of each lane's device output
  // buffer and of its pinned host buffer. Default: 128 MiB.
  uint64_t batch_bytes = uint64_t{128} << 20;
  // Device memory nvJPEG may allocate for its own work, beyond the lanes'
  // buffers. Default: 2 GiB.
  uint64_t device_memory_bytes = uint64_t{2} << 30;
  // Use the hardware JPEG engines when the device has them. Default: true.
  bool hardware = true;
};

// Whether this binary was built with the GPU backend (STOKER_CUDA).
bool GpuBackendBuilt();

// Loads the libraries, checks the device and sets up the lanes.
// Errors: ENOTSUP built without STOKER_CUDA; ENOENT/ENOSYS/ENODEV from
// gpu_libraries.h; ENOMEM/EIO when the device cannot be set up.
Result<std::shared_ptr<BatchingJpegDecoder>> OpenGpuJpegDecoder(const GpuDecoderOptions& options);

}  // namespace stoker
