// NvjpegBatchBackend set up on a device (nvjpeg_batch_backend.h): the device,
// nvJPEG's allocation budget, the engines, the lanes and what it describes;
// and OpenGpuJpegDecoder (gpu_jpeg_decoder.h).
#include <algorithm>
#include <unordered_map>

#include "decode/gpu/nvjpeg_batch_backend.h"
#include "util/log.h"
#include "util/mutex.h"

namespace stoker {
namespace {

// nvJPEG's own allocations, bounded. Its allocator ABI has no context
// pointer, so the budget is per process (one GPU decoder per mount).
struct AllocationBudget {
  Mutex mu;
  const GpuLibraries* libs = nullptr;  // GUARDED_BY(mu) for writes; set before use
  std::unordered_map<void*, size_t> live GUARDED_BY(mu);
  uint64_t used GUARDED_BY(mu) = 0;
  uint64_t peak GUARDED_BY(mu) = 0;
  uint64_t refused GUARDED_BY(mu) = 0;
  uint64_t cap GUARDED_BY(mu) = 0;

  bool Reserve(size_t n) {
    MutexLock l(mu);
    if (used + n > cap) {
      refused++;
      return false;
    }
    used += n;
    peak = std::max(peak, used);
    return true;
  }
  void Unreserve(size_t n) {
    MutexLock l(mu);
    used -= n;
  }
  void Track(void* p, size_t n) {
    MutexLock l(mu);
    live[p] = n;
  }
  void Release(void* p) {
    MutexLock l(mu);
    auto it = live.find(p);
    if (it == live.end()) return;
    used -= it->second;
    live.erase(it);
  }
};
AllocationBudget g_device_budget;
AllocationBudget g_pinned_budget;

// Allocates n bytes with alloc within the budget b.
template <typename Alloc>
int Allocate(AllocationBudget& b, void** p, size_t n, Alloc alloc) {
  if (!b.Reserve(n)) return cudaErrorMemoryAllocation;
  cudaError_t e = alloc();
  if (e != cudaSuccess) {
    b.Unreserve(n);
    return e;
  }
  b.Track(*p, n);
  return 0;
}
int DeviceMalloc(void** p, size_t n) {
  return Allocate(g_device_budget, p, n, [&] { return g_device_budget.libs->cuda.Malloc(p, n); });
}
int DeviceFree(void* p) {
  g_device_budget.Release(p);
  return g_device_budget.libs->cuda.Free(p);
}
int PinnedMalloc(void** p, size_t n, unsigned int flags) {
  return Allocate(g_pinned_budget, p, n,
                  [&] { return g_pinned_budget.libs->cuda.HostAlloc(p, n, flags); });
}
int PinnedFree(void* p) {
  g_pinned_budget.Release(p);
  return g_pinned_budget.libs->cuda.FreeHost(p);
}

}  // namespace

NvjpegBatchBackend::NvjpegBatchBackend(std::shared_ptr<const GpuLibraries> libs,
                                       const GpuDecoderOptions& o)
    : libs_(std::move(libs)), o_(o), lanes_(static_cast<size_t>(std::max(1, o.lanes))) {}

NvjpegBatchBackend::~NvjpegBatchBackend() {
  const CudaApi& c = libs_->cuda;
  const NvjpegApi& n = libs_->nvjpeg;
  c.SetDevice(o_.device);
  for (Lane& l : lanes_) {
    if (l.stream) c.StreamSynchronize(l.stream);
    for (auto& per_engine : l.state) {
      for (nvj::State s : per_engine) {
        if (s) n.JpegStateDestroy(s);
      }
    }
    if (l.stream) c.StreamDestroy(l.stream);
    if (l.dev) c.Free(l.dev);
    if (l.host) c.FreeHost(l.host);
  }
  for (nvj::Handle h : handle_) {
    if (h) n.Destroy(h);
  }
}

Status NvjpegBatchBackend::Init() {
  STOKER_RETURN_IF_ERROR(SelectDevice());
  {
    MutexLock l(g_device_budget.mu);
    g_device_budget.libs = libs_.get();
    g_device_budget.cap = o_.device_memory_bytes;
  }
  {
    MutexLock l(g_pinned_budget.mu);
    g_pinned_budget.libs = libs_.get();
    g_pinned_budget.cap = o_.device_memory_bytes;
  }
  STOKER_RETURN_IF_ERROR(CreateEngines());
  return CreateLanes();
}

Status NvjpegBatchBackend::SelectDevice() {
  const CudaApi& c = libs_->cuda;
  if (cudaError_t e = c.SetDevice(o_.device); e != cudaSuccess) {
    return libs_->CudaError(e, "cudaSetDevice(" + std::to_string(o_.device) + ")");
  }
  char prop[16384] = {};  // cudaDeviceProp, name first; larger than any version's
  if (c.GetDeviceProperties(prop, o_.device) == cudaSuccess) device_name_ = prop;
  int major = 0, minor = 0;
  c.DeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, o_.device);
  c.DeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, o_.device);
  capability_ = std::to_string(major) + "." + std::to_string(minor);
  return Status::OK();
}

// The first engine on the list that nvJPEG opens, with interpolated
// upsampling where it takes it; beside the hardware, the next one that opens.
Status NvjpegBatchBackend::CreateEngines() {
  const NvjpegApi& n = libs_->nvjpeg;
  nvj::DevAllocator dev{&DeviceMalloc, &DeviceFree};
  nvj::PinnedAllocator pinned{&PinnedMalloc, &PinnedFree};
  struct Choice {
    nvj::Backend backend;
    const char* name;
  };
  std::vector<Choice> choices;
  if (o_.hardware) choices.push_back({nvj::kBackendHardware, "hardware"});
  choices.push_back({nvj::kBackendGpuHybrid, "gpu-hybrid"});
  choices.push_back({nvj::kBackendDefault, "hybrid"});
  int last = nvj::kSuccess;
  for (size_t i = 0; i < choices.size() && !handle_[kMain]; ++i) {
    for (unsigned flags : {nvj::kFlagUpsamplingWithInterpolation, nvj::kFlagsDefault}) {
      last = n.CreateEx(choices[i].backend, &dev, &pinned, flags, &handle_[kMain]);
      if (last == nvj::kSuccess) {
        engine_ = choices[i].name;
        interpolated_ = flags != nvj::kFlagsDefault;
        // The hardware engines take only baseline JPEGs in one interleaved
        // scan: the rest go to the next engine on the list, beside it.
        for (size_t k = i + 1; i == 0 && o_.hardware && k < choices.size(); ++k) {
          if (n.CreateEx(choices[k].backend, &dev, &pinned, flags, &handle_[kRest]) ==
              nvj::kSuccess) {
            rest_engine_ = choices[k].name;
            break;
          }
          handle_[kRest] = nullptr;
        }
        break;
      }
      handle_[kMain] = nullptr;
    }
  }
  if (!handle_[kMain]) return FromNvjpeg(last, "nvjpegCreateEx");
  if (engine_ == std::string("hardware") && n.GetHardwareDecoderInfo) {
    unsigned engines = 0, cores = 0;
    if (n.GetHardwareDecoderInfo(handle_[kMain], &engines, &cores) == nvj::kSuccess) {
      hardware_engines_ = engines;
    }
  }
  return Status::OK();
}

Status NvjpegBatchBackend::CreateLanes() {
  const CudaApi& c = libs_->cuda;
  const NvjpegApi& n = libs_->nvjpeg;
  for (Lane& l : lanes_) {
    if (cudaError_t e = c.StreamCreateWithFlags(&l.stream, cudaStreamNonBlocking);
        e != cudaSuccess) {
      return libs_->CudaError(e, "cudaStreamCreateWithFlags");
    }
    for (nvj::State& s : l.state[kMain]) {
      if (int st = n.JpegStateCreate(handle_[kMain], &s); st != nvj::kSuccess) {
        return FromNvjpeg(st, "nvjpegJpegStateCreate");
      }
    }
    for (nvj::State& s : l.state[kRest]) {
      if (handle_[kRest] && n.JpegStateCreate(handle_[kRest], &s) != nvj::kSuccess) {
        s = nullptr;
        DropRestEngine();  // the hardware alone, as without one
      }
    }
    void* p = nullptr;
    if (cudaError_t e = c.Malloc(&p, o_.batch_bytes); e != cudaSuccess) {
      return libs_->CudaError(e, "cudaMalloc of a lane's output buffer");
    }
    l.dev = static_cast<uint8_t*>(p);
    if (cudaError_t e = c.HostAlloc(&p, o_.batch_bytes, cudaHostAllocDefault); e != cudaSuccess) {
      return libs_->CudaError(e, "cudaHostAlloc of a lane's pinned buffer");
    }
    l.host = static_cast<uint8_t*>(p);
  }
  return Status::OK();
}

void NvjpegBatchBackend::DropRestEngine() {
  const NvjpegApi& n = libs_->nvjpeg;
  for (Lane& l : lanes_) {
    for (nvj::State& s : l.state[kRest]) {
      if (s) n.JpegStateDestroy(s);
      s = nullptr;
    }
  }
  n.Destroy(handle_[kRest]);
  handle_[kRest] = nullptr;
  LOG_WARN("GPU decoder: no {} engine beside the hardware; what it does not take goes to the CPU",
           rest_engine_);
}

std::string NvjpegBatchBackend::name() const {
  const int* v = libs_->nvjpeg_version;
  return "nvjpeg " + std::to_string(v[0]) + "." + std::to_string(v[1]) + "." +
         std::to_string(v[2]) + " " + engine_ + (handle_[kRest] ? "+" + rest_engine_ : "") +
         (interpolated_ ? " interpolated" : "");
}

nlohmann::json NvjpegBatchBackend::Describe() const {
  nlohmann::json j;
  j["device"] = device_name_;
  j["device_index"] = o_.device;
  j["compute_capability"] = capability_;
  j["engine"] = engine_;
  j["hardware_engines"] = hardware_engines_;
  // Where the engine is the hardware: the engine beside it for what it
  // does not take, and the images each decoded.
  j["rest_engine"] = handle_[kRest] ? rest_engine_ : "";
  j["context_broken"] = broken_.load();
  j["engine_images"] = images_[kMain].load();
  j["rest_engine_images"] = images_[kRest].load();
  j["nvjpeg_path"] = libs_->nvjpeg_path;
  j["cudart_path"] = libs_->cudart_path;
  j["cuda_runtime_version"] = libs_->runtime_version;
  j["cuda_driver_version"] = libs_->driver_version;
  j["lanes"] = lanes_.size();
  j["max_batch"] = o_.max_batch;
  j["lane_buffer_bytes"] = o_.batch_bytes;
  MutexLock l(g_device_budget.mu);
  j["nvjpeg_device_bytes"] = g_device_budget.used;
  j["nvjpeg_device_peak_bytes"] = g_device_budget.peak;
  j["nvjpeg_device_limit_bytes"] = g_device_budget.cap;
  j["nvjpeg_allocations_refused"] = g_device_budget.refused;
  return j;
}

Status NvjpegBatchBackend::FromNvjpeg(int s, const std::string& what) {
  const std::string msg = what + ": nvJPEG " + nvj::StatusName(s);
  switch (s) {
    case nvj::kBadJpeg:
    case nvj::kIncompleteBitstream:
      return Status::Corruption(msg);
    case nvj::kJpegNotSupported:
    case nvj::kImplementationNotSupported:
      return Status::Error(ENOTSUP, msg);
    case nvj::kAllocatorFailure:
      return Status::Error(ENOMEM, msg);
    default:
      return Status::IOError(msg);
  }
}

const char* nvj::StatusName(int s) {
  static const char* kNames[] = {"SUCCESS",
                                 "NOT_INITIALIZED",
                                 "INVALID_PARAMETER",
                                 "BAD_JPEG",
                                 "JPEG_NOT_SUPPORTED",
                                 "ALLOCATOR_FAILURE",
                                 "EXECUTION_FAILED",
                                 "ARCH_MISMATCH",
                                 "INTERNAL_ERROR",
                                 "IMPLEMENTATION_NOT_SUPPORTED",
                                 "INCOMPLETE_BITSTREAM"};
  return s >= 0 && s <= 10 ? kNames[s] : "unknown status";
}

bool GpuBackendBuilt() { return true; }

Result<std::shared_ptr<BatchingJpegDecoder>> OpenGpuJpegDecoder(const GpuDecoderOptions& options) {
  if (options.lanes < 1 || options.max_batch < 1 ||
      options.batch_bytes < NvjpegBatchBackend::kAlign) {
    return Status::Invalid("GPU decoder: lanes, max_batch and batch_bytes must be positive");
  }
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const GpuLibraries> libs,
                          LoadGpuLibraries(options.library_path));
  if (options.device < 0 || options.device >= libs->device_count) {
    return Status::Error(ENODEV, "no CUDA device " + std::to_string(options.device) + " (" +
                                     std::to_string(libs->device_count) + " found)");
  }
  auto backend = std::make_unique<NvjpegBatchBackend>(libs, options);
  STOKER_RETURN_IF_ERROR(backend->Init());
  LOG_INFO("GPU decoder: {} on {} ({}, {})", backend->name(),
           backend->Describe()["device"].get<std::string>(), libs->nvjpeg_path, libs->cudart_path);
  return std::make_shared<BatchingJpegDecoder>(std::move(backend));
}

}  // namespace stoker
