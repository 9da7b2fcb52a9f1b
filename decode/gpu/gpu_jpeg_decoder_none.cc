// Built without STOKER_CUDA: no GPU backend in this binary.
#include "decode/gpu/gpu_jpeg_decoder.h"

namespace stoker {

bool GpuBackendBuilt() { return false; }

Result<std::shared_ptr<BatchingJpegDecoder>> OpenGpuJpegDecoder(const GpuDecoderOptions&) {
  return Status::Error(ENOTSUP,
                       "this stoker was built without the GPU backend (STOKER_CUDA=OFF, or AUTO "
                       "found no CUDA toolkit)");
}

}  // namespace stoker
