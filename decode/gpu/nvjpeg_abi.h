// The part of nvJPEG's C ABI the GPU backend uses, declared here so that the
// backend builds wherever the CUDA toolkit is (nvJPEG's header ships with
// some toolkits and only in the nvidia-nvjpeg wheels with others) and loads
// libnvjpeg with dlopen at run time. Names, values and layouts are
// nvjpeg.h's (stable since CUDA 10); nvjpeg_abi_check.cc compares them with
// the real header where one is found at configure time.
// Thread-safety: declarations only.
#pragma once

#include <cuda_runtime_api.h>
#include <library_types.h>

#include <cstddef>

namespace stoker::nvj {

enum Status : int {
  kSuccess = 0,
  kNotInitialized = 1,
  kInvalidParameter = 2,
  kBadJpeg = 3,
  kJpegNotSupported = 4,
  kAllocatorFailure = 5,
  kExecutionFailed = 6,
  kArchMismatch = 7,
  kInternalError = 8,
  kImplementationNotSupported = 9,
  kIncompleteBitstream = 10,
};

enum OutputFormat : int { kOutputY = 2, kOutputRGBI = 5 };

enum Backend : int {
  kBackendDefault = 0,
  kBackendHybrid = 1,
  kBackendGpuHybrid = 2,
  kBackendHardware = 3
};

inline constexpr unsigned kFlagsDefault = 0;
// nvJPEG 12.x: chroma upsampled by interpolation (as libjpeg's fancy
// upsampling) instead of replication; older versions refuse the flag.
inline constexpr unsigned kFlagUpsamplingWithInterpolation = 1u << 5;
inline constexpr int kMaxComponent = 4;

struct Image {
  unsigned char* channel[kMaxComponent];
  size_t pitch[kMaxComponent];
};

using DevMalloc = int (*)(void**, size_t);
using DevFree = int (*)(void*);
using PinnedMalloc = int (*)(void**, size_t, unsigned int);
using PinnedFree = int (*)(void*);
struct DevAllocator {
  DevMalloc dev_malloc;
  DevFree dev_free;
};
struct PinnedAllocator {
  PinnedMalloc pinned_malloc;
  PinnedFree pinned_free;
};

struct HandleOpaque;
using Handle = HandleOpaque*;
struct StateOpaque;
using State = StateOpaque*;

// Function types, as nvjpeg.h declares them.
using GetPropertyFn = Status (*)(libraryPropertyType, int*);
using CreateExFn = Status (*)(Backend, DevAllocator*, PinnedAllocator*, unsigned int, Handle*);
using DestroyFn = Status (*)(Handle);
using JpegStateCreateFn = Status (*)(Handle, State*);
using JpegStateDestroyFn = Status (*)(State);
using DecodeBatchedInitializeFn = Status (*)(Handle, State, int, int, OutputFormat);
using DecodeBatchedFn = Status (*)(Handle, State, const unsigned char* const*, const size_t*,
                                   Image*, cudaStream_t);
using GetHardwareDecoderInfoFn = Status (*)(Handle, unsigned int*, unsigned int*);

const char* StatusName(int s);

}  // namespace stoker::nvj
