// GpuLibraries: the CUDA runtime and nvJPEG, loaded with dlopen so that one
// stoker binary runs on hosts with and without them (it has no DT_NEEDED
// on either). Load searches, in order: the configured directories, the
// directories in $STOKER_GPU_LIBRARY_PATH (colon-separated), $CUDA_HOME and
// $CUDA_PATH's lib64, /usr/local/cuda/lib64, the nvidia-* wheels' lib
// directories in the usual Python site-packages (nvidia/nvjpeg/lib,
// nvidia/cuda_runtime/lib, nvidia/cu13/lib, ...), and last the dynamic
// loader's own path. nvJPEG is loaded first; a CUDA runtime of its major
// version is preferred.
//
// Errors: ENOENT naming what was searched when a library is missing;
// ENOSYS when one lacks a symbol the backend needs; ENODEV when no CUDA
// device is usable (no driver, no device, or the device index is out of
// range), with the runtime's message.
//
// Thread-safety: Load is thread-safe; a loaded GpuLibraries is immutable
// and its libraries stay loaded for the life of the process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "decode/gpu/nvjpeg_abi.h"
#include "util/status.h"

namespace stoker {

struct CudaApi {
  decltype(&::cudaGetDeviceCount) GetDeviceCount;
  decltype(&::cudaSetDevice) SetDevice;
  decltype(&::cudaGetErrorString) GetErrorString;
  decltype(&::cudaRuntimeGetVersion) RuntimeGetVersion;
  decltype(&::cudaDriverGetVersion) DriverGetVersion;
  decltype(&::cudaDeviceGetAttribute) DeviceGetAttribute;
  decltype(&::cudaMalloc) Malloc;
  decltype(&::cudaFree) Free;
  decltype(&::cudaHostAlloc) HostAlloc;
  decltype(&::cudaFreeHost) FreeHost;
  decltype(&::cudaStreamCreateWithFlags) StreamCreateWithFlags;
  decltype(&::cudaStreamDestroy) StreamDestroy;
  decltype(&::cudaStreamSynchronize) StreamSynchronize;
  decltype(&::cudaMemcpyAsync) MemcpyAsync;
  decltype(&::cudaMemGetInfo) MemGetInfo;
  // cudaGetDeviceProperties (or its _v2): only the name, at offset 0 in
  // every version of cudaDeviceProp, is read.
  cudaError_t (*GetDeviceProperties)(void* prop, int device);
};

struct NvjpegApi {
  nvj::GetPropertyFn GetProperty;
  nvj::CreateExFn CreateEx;
  nvj::DestroyFn Destroy;
  nvj::JpegStateCreateFn JpegStateCreate;
  nvj::JpegStateDestroyFn JpegStateDestroy;
  nvj::DecodeBatchedInitializeFn DecodeBatchedInitialize;
  nvj::DecodeBatchedFn DecodeBatched;
  nvj::GetHardwareDecoderInfoFn GetHardwareDecoderInfo;  // null before nvJPEG 11
};

struct GpuLibraries {
  CudaApi cuda{};
  NvjpegApi nvjpeg{};
  std::string cudart_path;
  std::string nvjpeg_path;
  int nvjpeg_version[3] = {0, 0, 0};
  int runtime_version = 0;  // 12040 = 12.4
  int driver_version = 0;
  int device_count = 0;

  // "cudart: error text" for a failed runtime call.
  Status CudaError(cudaError_t e, const std::string& what) const;
};

// The directories Load searches, in order, for configured ones.
std::vector<std::string> GpuLibrarySearchPath(const std::vector<std::string>& configured);

// Loads both libraries and checks that a device is usable. The result is
// cached per process (the first successful load is kept).
Result<std::shared_ptr<const GpuLibraries>> LoadGpuLibraries(
    const std::vector<std::string>& configured);

}  // namespace stoker
