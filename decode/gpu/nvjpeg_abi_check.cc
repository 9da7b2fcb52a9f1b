// Compiled only where CMake found nvjpeg.h (STOKER_NVJPEG_INCLUDE_DIR): the
// declarations of nvjpeg_abi.h must match the real header's.
#include <nvjpeg.h>

#include <cstddef>
#include <type_traits>

#include "decode/gpu/nvjpeg_abi.h"

namespace stoker::nvj {

template <typename E>
constexpr int I(E e) {
  return static_cast<int>(e);
}

static_assert(I(kSuccess) == I(NVJPEG_STATUS_SUCCESS) && I(kBadJpeg) == I(NVJPEG_STATUS_BAD_JPEG) &&
              I(kJpegNotSupported) == I(NVJPEG_STATUS_JPEG_NOT_SUPPORTED) &&
              I(kAllocatorFailure) == I(NVJPEG_STATUS_ALLOCATOR_FAILURE) &&
              I(kExecutionFailed) == I(NVJPEG_STATUS_EXECUTION_FAILED) &&
              I(kArchMismatch) == I(NVJPEG_STATUS_ARCH_MISMATCH) &&
              I(kInternalError) == I(NVJPEG_STATUS_INTERNAL_ERROR) &&
              I(kImplementationNotSupported) == I(NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED) &&
              I(kIncompleteBitstream) == I(NVJPEG_STATUS_INCOMPLETE_BITSTREAM));
static_assert(I(kOutputY) == I(NVJPEG_OUTPUT_Y) && I(kOutputRGBI) == I(NVJPEG_OUTPUT_RGBI));
static_assert(I(kBackendDefault) == I(NVJPEG_BACKEND_DEFAULT) &&
              I(kBackendHybrid) == I(NVJPEG_BACKEND_HYBRID) &&
              I(kBackendGpuHybrid) == I(NVJPEG_BACKEND_GPU_HYBRID) &&
              I(kBackendHardware) == I(NVJPEG_BACKEND_HARDWARE));
static_assert(I(kMaxComponent) == I(NVJPEG_MAX_COMPONENT));
static_assert(I(kFlagUpsamplingWithInterpolation) == I(NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION));
static_assert(sizeof(Image) == sizeof(nvjpegImage_t) &&
              offsetof(Image, pitch) == offsetof(nvjpegImage_t, pitch));
static_assert(sizeof(DevAllocator) == sizeof(nvjpegDevAllocator_t) &&
              sizeof(PinnedAllocator) == sizeof(nvjpegPinnedAllocator_t));
static_assert(std::is_same_v<DevMalloc, tDevMalloc> && std::is_same_v<DevFree, tDevFree> &&
              std::is_same_v<PinnedMalloc, tPinnedMalloc> &&
              std::is_same_v<PinnedFree, tPinnedFree>);
// Same parameter lists, with our opaque types for theirs.
static_assert(
    std::is_same_v<decltype(&::nvjpegGetProperty), nvjpegStatus_t (*)(libraryPropertyType, int*)>);
static_assert(std::is_same_v<decltype(&::nvjpegDecodeBatchedInitialize),
                             nvjpegStatus_t (*)(nvjpegHandle_t, nvjpegJpegState_t, int, int,
                                                nvjpegOutputFormat_t)>);
static_assert(std::is_same_v<decltype(&::nvjpegDecodeBatched),
                             nvjpegStatus_t (*)(nvjpegHandle_t, nvjpegJpegState_t,
                                                const unsigned char* const*, const size_t*,
                                                nvjpegImage_t*, cudaStream_t)>);
static_assert(
    std::is_same_v<decltype(&::nvjpegCreateEx),
                   nvjpegStatus_t (*)(nvjpegBackend_t, nvjpegDevAllocator_t*,
                                      nvjpegPinnedAllocator_t*, unsigned int, nvjpegHandle_t*)>);
static_assert(sizeof(nvjpegStatus_t) == sizeof(Status) &&
              sizeof(nvjpegOutputFormat_t) == sizeof(OutputFormat) &&
              sizeof(nvjpegBackend_t) == sizeof(Backend));

}  // namespace stoker::nvj
