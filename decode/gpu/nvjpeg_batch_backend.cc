// The nvJPEG BatchJpegBackend and OpenGpuJpegDecoder (gpu_jpeg_decoder.h).
// Built only with STOKER_CUDA; every CUDA and nvJPEG call goes through the
// dlopen'ed GpuLibraries.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "decode/gpu/gpu_jpeg_decoder.h"
#include "decode/gpu/gpu_libraries.h"
#include "util/log.h"
#include "util/mutex.h"

namespace stoker {
namespace {

constexpr size_t kAlign = 256;

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

Status FromNvjpeg(int s, const std::string& what) {
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

// Failures of the device, not of one image: a batch failing so is not
// split to find a culprit.
bool DeviceWide(int s) {
  return s == nvj::kExecutionFailed || s == nvj::kInternalError || s == nvj::kArchMismatch ||
         s == nvj::kNotInitialized;
}

// Whether the first scan holds every component (header_size ends its SOS
// header: FF DA, length 6 + 2 Ns, Ns, ...).
bool FirstScanInterleavesAll(const JpegJob& j) {
  const size_t end = j.info.header_size;
  if (end < 6 || end > j.len) return false;
  for (int ns = 1; ns <= 4; ++ns) {
    const size_t len = 6 + 2 * static_cast<size_t>(ns);
    if (end < len + 2) break;
    const uint8_t* sos = j.jpeg + end - len - 2;
    if (sos[0] == 0xFF && sos[1] == 0xDA && ((sos[2] << 8) | sos[3]) == len && sos[4] == ns) {
      return ns == j.info.components;
    }
  }
  return false;
}

bool HasEoiAfter(const uint8_t* p, size_t len, size_t from) {
  for (size_t i = len; i >= from + 2; --i) {
    if (p[i - 2] == 0xFF && p[i - 1] == 0xD9) return true;
  }
  return false;
}

class NvjpegBatchBackend final : public BatchJpegBackend {
 public:
  NvjpegBatchBackend(std::shared_ptr<const GpuLibraries> libs, const GpuDecoderOptions& o)
      : libs_(std::move(libs)), o_(o), lanes_(static_cast<size_t>(std::max(1, o.lanes))) {}

  ~NvjpegBatchBackend() override {
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

  Status Init() {
    const CudaApi& c = libs_->cuda;
    const NvjpegApi& n = libs_->nvjpeg;
    if (cudaError_t e = c.SetDevice(o_.device); e != cudaSuccess) {
      return libs_->CudaError(e, "cudaSetDevice(" + std::to_string(o_.device) + ")");
    }
    char prop[16384] = {};  // cudaDeviceProp, name first; larger than any version's
    if (c.GetDeviceProperties(prop, o_.device) == cudaSuccess) device_name_ = prop;
    int major = 0, minor = 0;
    c.DeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, o_.device);
    c.DeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, o_.device);
    capability_ = std::to_string(major) + "." + std::to_string(minor);
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

  std::string name() const override {
    const int* v = libs_->nvjpeg_version;
    return "nvjpeg " + std::to_string(v[0]) + "." + std::to_string(v[1]) + "." +
           std::to_string(v[2]) + " " + engine_ + (handle_[kRest] ? "+" + rest_engine_ : "") +
           (interpolated_ ? " interpolated" : "");
  }
  int lanes() const override { return static_cast<int>(lanes_.size()); }
  size_t max_batch() const override { return o_.max_batch; }
  uint64_t batch_bytes() const override { return o_.batch_bytes; }

  nlohmann::json Describe() const override {
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

  void DecodeBatch(int lane, std::span<const JpegJob> jobs, std::span<Status> results) override {
    Lane& l = lanes_[static_cast<size_t>(lane)];
    const CudaApi& c = libs_->cuda;
    if (broken_.load()) {  // what the GPU would not take anyway still says why
      for (size_t i = 0; i < jobs.size(); ++i) {
        results[i] = Screen(jobs[i]);
        if (results[i].ok()) {
          results[i] = Status::IOError("the GPU's CUDA context is broken: " + *broken_why_);
        }
      }
      return;
    }
    if (cudaError_t e = c.SetDevice(o_.device); e != cudaSuccess) {
      for (Status& r : results) r = libs_->CudaError(e, "cudaSetDevice");
      return;
    }
    // Place each image in the lane's buffer, grouped by engine and output
    // format.
    std::vector<size_t> group[2][2];  // [engine][0: RGBI, 1: Y]
    std::vector<size_t> offset(jobs.size(), 0);
    std::vector<int> engine(jobs.size(), kMain);
    uint64_t used = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      results[i] = Screen(jobs[i]);
      if (!results[i].ok()) continue;
      const uint64_t bytes = DeviceBytes(jobs[i]);
      const uint64_t at = (used + kAlign - 1) / kAlign * kAlign;
      if (at + bytes > o_.batch_bytes) {
        results[i] = Status::Error(ENOMEM, "image of " + std::to_string(bytes) +
                                               " decoded bytes does not fit the GPU batch buffer");
        continue;
      }
      offset[i] = at;
      used = at + bytes;
      const int e = handle_[kRest] && !HardwareTakes(jobs[i]) ? kRest : kMain;
      group[e][IsRgb(jobs[i]) ? 0 : 1].push_back(i);
    }
    for (int e : {kMain, kRest}) {
      for (int f = 0; f < 2; ++f) {
        const std::vector<size_t>& g = group[e][f];
        if (!g.empty()) Decode(l, e, f, jobs, offset, g, 0, g.size(), results, engine);
      }
    }
    if (used == 0) return;
    cudaError_t e = c.MemcpyAsync(l.host, l.dev, used, cudaMemcpyDeviceToHost, l.stream);
    if (e == cudaSuccess) e = c.StreamSynchronize(l.stream);
    if (e != cudaSuccess) {
      Status s = libs_->CudaError(e, "decoding a batch on the GPU");
      for (Status& r : results) {
        if (r.ok()) r = s;
      }
      for (auto& per_engine : l.init) per_engine[0] = per_engine[1] = -1;
      // Most failures of work on a stream (a launch failure, an illegal
      // address) leave the context broken: every later call fails the same
      // way. Asked once; if so, the device is not touched again and every
      // image goes to the fallback at once, until the mount is restarted.
      size_t free_bytes = 0, total = 0;
      if (cudaError_t after = c.MemGetInfo(&free_bytes, &total); after != cudaSuccess) {
        std::call_once(broken_once_, [&] {
          broken_why_ = std::make_shared<const std::string>(s.message());
          broken_ = true;
          LOG_ERROR(
              "GPU decoder: the CUDA context is broken ({}); its images go to the CPU "
              "decoder where the view allows it, until the mount is restarted",
              s.message());
        });
      }
      return;
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!results[i].ok()) continue;
      CopyOut(jobs[i], l.host + offset[i]);
      images_[engine[i]]++;
    }
  }

 private:
  enum Engine { kMain = 0, kRest = 1 };  // the chosen engine; the one beside the hardware
  struct Lane {
    cudaStream_t stream = nullptr;
    nvj::State state[2][2] = {};            // [engine][output format]
    int init[2][2] = {{-1, -1}, {-1, -1}};  // batch size each state is initialised for
    uint8_t* dev = nullptr;
    uint8_t* host = nullptr;
  };

  static bool IsRgb(const JpegJob& j) { return j.shape.channels == 3 && j.info.components == 3; }
  // What nvJPEG's hardware backend takes: baseline, one interleaved scan.
  static bool HardwareTakes(const JpegJob& j) {
    return j.info.process == JpegProcess::kBaseline && FirstScanInterleavesAll(j);
  }
  static uint64_t DeviceBytes(const JpegJob& j) {
    return uint64_t{j.shape.width} * j.shape.height * (IsRgb(j) ? 3 : 1);
  }

  static Status Screen(const JpegJob& j) {
    const JpegInfo& i = j.info;
    auto no = [](const std::string& why) {
      return Status::Error(ENOTSUP, "nvJPEG backend: " + why);
    };
    if (i.precision != 8) return no("precision other than 8 bits");
    if (i.process != JpegProcess::kBaseline && i.process != JpegProcess::kExtendedSequential) {
      return no(std::string(ToString(i.process)) + " JPEG");
    }
    if (i.arithmetic) return no("arithmetic coding");
    if (i.color_space != JpegColorSpace::kYCbCr && i.color_space != JpegColorSpace::kGrayscale) {
      return no(std::string(ToString(i.color_space)) + " colour space");
    }
    switch (i.subsampling) {
      case ChromaSubsampling::kGray:
      case ChromaSubsampling::k444:
      case ChromaSubsampling::k422:
      case ChromaSubsampling::k420:
      case ChromaSubsampling::k440:
        break;
      default:
        return no(std::string(ToString(i.subsampling)) + " subsampling");
    }
    if (!HasEoiAfter(j.jpeg, j.len, i.header_size)) {
      return Status::Corruption("jpeg: no EOI marker after the scan (truncated)");
    }
    return Status::OK();
  }

  // Gives up the engine beside the hardware (its states in every lane).
  void DropRestEngine() {
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

  // Decodes group[lo, hi) as one nvJPEG batch on engine e; a batch that
  // fails is split in halves until the images that fail are alone, and an
  // image the hardware refuses alone goes to the engine beside it. Sets
  // engine[i] to the engine that took image i.
  void Decode(Lane& l, int e, int f, std::span<const JpegJob> jobs,
              const std::vector<size_t>& offset, const std::vector<size_t>& group, size_t lo,
              size_t hi, std::span<Status> results, std::vector<int>& engine) {
    const NvjpegApi& n = libs_->nvjpeg;
    const int count = static_cast<int>(hi - lo);
    const nvj::OutputFormat fmt = f == 0 ? nvj::kOutputRGBI : nvj::kOutputY;
    auto fail_all = [&](const Status& s) {
      for (size_t k = lo; k < hi; ++k) results[group[k]] = s;
    };
    if (l.init[e][f] != count) {
      int st = n.DecodeBatchedInitialize(handle_[e], l.state[e][f], count, 1, fmt);
      if (st != nvj::kSuccess) {
        l.init[e][f] = -1;
        return fail_all(FromNvjpeg(st, "nvjpegDecodeBatchedInitialize"));
      }
      l.init[e][f] = count;
    }
    std::vector<const unsigned char*> data(count);
    std::vector<size_t> lengths(count);
    std::vector<nvj::Image> dest(count);
    for (int k = 0; k < count; ++k) {
      const JpegJob& j = jobs[group[lo + k]];
      data[k] = j.jpeg;
      lengths[k] = j.len;
      dest[k] = nvj::Image{};
      dest[k].channel[0] = l.dev + offset[group[lo + k]];
      dest[k].pitch[0] = size_t{j.shape.width} * (f == 0 ? 3 : 1);
    }
    int st = n.DecodeBatched(handle_[e], l.state[e][f], data.data(), lengths.data(), dest.data(),
                             l.stream);
    if (st == nvj::kSuccess) {
      for (size_t k = lo; k < hi; ++k) engine[group[k]] = e;
      return;
    }
    l.init[e][f] = -1;  // a failed batch leaves the state to be reset
    if (count == 1 && e == kMain && handle_[kRest] &&
        (st == nvj::kJpegNotSupported || st == nvj::kImplementationNotSupported)) {
      return Decode(l, kRest, f, jobs, offset, group, lo, hi, results, engine);
    }
    if (count == 1 || DeviceWide(st)) return fail_all(FromNvjpeg(st, "nvjpegDecodeBatched"));
    const size_t mid = lo + (hi - lo) / 2;
    Decode(l, e, f, jobs, offset, group, lo, mid, results, engine);
    Decode(l, e, f, jobs, offset, group, mid, hi, results, engine);
  }

  // From the pinned buffer to the caller's; a grayscale decode asked for as
  // RGB is widened here (libjpeg's gray->RGB repeats the sample).
  static void CopyOut(const JpegJob& j, const uint8_t* src) {
    const size_t pixels = size_t{j.shape.width} * j.shape.height;
    if (IsRgb(j) || j.shape.channels == 1) {
      std::memcpy(j.out, src, j.shape.pixel_bytes());
      return;
    }
    for (size_t p = 0; p < pixels; ++p) {
      j.out[3 * p] = j.out[3 * p + 1] = j.out[3 * p + 2] = src[p];
    }
  }

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

}  // namespace

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
  if (options.lanes < 1 || options.max_batch < 1 || options.batch_bytes < kAlign) {
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
