// The CUDA runtime's part of the host stand-in (standin.h): devices, tracked
// memory, and streams that run their work when synchronised.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "decode/gpu/standin/standin.h"

struct CUstream_st {
  struct Work {
    void (*run)(void*, int);
    void* arg;
  };
  std::mutex mu;
  std::deque<Work> work;  // GUARDED_BY(mu)
};

namespace {

struct Knob {
  const char* name;
  long long initial;
  std::atomic<long long> value{0};
};

Knob g_knobs[] = {
    {"DEVICES", 1},
    {"DEVICE_MEMORY", 8LL << 30},
    {"HARDWARE", 0},
    {"REJECT_WIDTH", 0},
    {"FAIL_SYNC", 0},
    {"LIVE_DEVICE_BYTES", 0},
    {"LIVE_PINNED_BYTES", 0},
    {"LIVE_STREAMS", 0},
    {"SYNCS", 0},
    {"DECODE_BATCHED", 0},
    {"DECODED", 0},
    {"HOLD_SYNC", 0},
    {"DECODED_HARDWARE", 0},
    {"HARDWARE_REJECT_WIDTH", 0},
    {"HARDWARE_REFUSED", 0},
    {"STICKY", 0},
    {"BROKEN", 0},
};

Knob* Find(const char* name) {
  for (Knob& k : g_knobs) {
    if (std::strcmp(k.name, name) == 0) return &k;
  }
  return nullptr;
}

__attribute__((constructor)) void LoadKnobs() {
  for (Knob& k : g_knobs) {
    const std::string env = std::string("STOKER_STANDIN_") + k.name;
    const char* v = std::getenv(env.c_str());
    k.value = v ? std::atoll(v) : k.initial;
  }
}

long long Get(const char* name) { return Find(name)->value.load(); }
void Add(const char* name, long long d) { Find(name)->value += d; }

// Live allocations of one kind: start -> size.
struct Allocations {
  std::mutex mu;
  std::map<const char*, size_t> live;  // GUARDED_BY(mu)

  bool Contains(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    std::lock_guard<std::mutex> l(mu);
    auto it = live.upper_bound(c);
    if (it == live.begin()) return false;
    --it;
    return c >= it->first && c + n <= it->first + it->second;
  }
};
Allocations g_device, g_pinned;

cudaError_t Allocate(Allocations& a, const char* reading, void** p, size_t n, long long limit) {
  if (p == nullptr) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> l(a.mu);
  if (limit >= 0 && Get(reading) + static_cast<long long>(n) > limit) {
    return cudaErrorMemoryAllocation;
  }
  *p = std::malloc(n == 0 ? 1 : n);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  a.live[static_cast<const char*>(*p)] = n;
  Add(reading, static_cast<long long>(n));
  return cudaSuccess;
}

cudaError_t Release(Allocations& a, const char* reading, void* p) {
  if (p == nullptr) return cudaSuccess;
  std::lock_guard<std::mutex> l(a.mu);
  auto it = a.live.find(static_cast<const char*>(p));
  if (it == a.live.end()) return cudaErrorInvalidValue;
  Add(reading, -static_cast<long long>(it->second));
  a.live.erase(it);
  std::free(p);
  return cudaSuccess;
}

thread_local int t_device = 0;

struct Copy {
  void* dst;
  const void* src;
  size_t n;
};

}  // namespace

extern "C" {

int stoker_standin_set(const char* name, long long value) {
  Knob* k = Find(name);
  if (k == nullptr) return -1;
  k->value = value;
  return 0;
}

long long stoker_standin_get(const char* name) {
  Knob* k = Find(name);
  return k ? k->value.load() : -1;
}

int stoker_standin_device_range(const void* p, size_t n) { return g_device.Contains(p, n); }

cudaError_t stoker_standin_enqueue(cudaStream_t stream, void (*run)(void*, int), void* arg) {
  if (stream == nullptr) {
    run(arg, 1);
    return cudaSuccess;
  }
  std::lock_guard<std::mutex> l(stream->mu);
  stream->work.push_back({run, arg});
  return cudaSuccess;
}

void stoker_standin_count(const char* name, long long delta) { Add(name, delta); }

}  // extern "C"

cudaError_t cudaGetDeviceCount(int* count) {
  const long long n = Get("DEVICES");
  *count = static_cast<int>(n);
  return n > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= Get("DEVICES")) return cudaErrorInvalidDevice;
  t_device = device;
  return cudaSuccess;
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error (stand-in)";
    case cudaErrorInvalidValue:
      return "invalid argument (stand-in)";
    case cudaErrorMemoryAllocation:
      return "out of memory (stand-in)";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected (stand-in)";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal (stand-in)";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure (stand-in)";
    default:
      return "unknown error (stand-in)";
  }
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 0;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) {
  *v = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device < 0 || device >= Get("DEVICES")) return cudaErrorInvalidDevice;
  *value = 0;
  if (attr == cudaDevAttrComputeCapabilityMajor) *value = 9;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= Get("DEVICES")) return cudaErrorInvalidDevice;
  std::memset(prop, 0, sizeof(*prop));
  std::strncpy(prop->name, "stoker host stand-in (libjpeg-turbo, no GPU)", sizeof(prop->name) - 1);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t n) {
  if (Get("BROKEN") != 0) return cudaErrorLaunchFailure;
  return Allocate(g_device, "LIVE_DEVICE_BYTES", p, n, Get("DEVICE_MEMORY"));
}
cudaError_t cudaFree(void* p) { return Release(g_device, "LIVE_DEVICE_BYTES", p); }
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int) {
  return Allocate(g_pinned, "LIVE_PINNED_BYTES", p, n, -1);
}
cudaError_t cudaFreeHost(void* p) { return Release(g_pinned, "LIVE_PINNED_BYTES", p); }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  if (Get("BROKEN") != 0) return cudaErrorLaunchFailure;
  *total = static_cast<size_t>(Get("DEVICE_MEMORY"));
  const size_t live = static_cast<size_t>(Get("LIVE_DEVICE_BYTES"));
  *free_bytes = live < *total ? *total - live : 0;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  *s = new CUstream_st;
  Add("LIVE_STREAMS", 1);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  {
    std::lock_guard<std::mutex> l(s->mu);
    for (auto& w : s->work) w.run(w.arg, 0);
  }
  delete s;
  Add("LIVE_STREAMS", -1);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (s == nullptr) return cudaSuccess;
  Add("SYNCS", 1);
  while (Get("HOLD_SYNC") != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  bool fail = false;
  for (long long n = Get("FAIL_SYNC"); n > 0;) {
    if (Find("FAIL_SYNC")->value.compare_exchange_weak(n, n - 1)) {
      fail = n == 1;
      break;
    }
  }
  std::deque<CUstream_st::Work> work;
  {
    std::lock_guard<std::mutex> l(s->mu);
    work.swap(s->work);
  }
  for (auto& w : work) w.run(w.arg, fail ? 0 : 1);
  if (fail && Get("STICKY") != 0) stoker_standin_set("BROKEN", 1);
  return fail || Get("BROKEN") != 0 ? cudaErrorLaunchFailure : cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s) {
  if (Get("BROKEN") != 0) return cudaErrorLaunchFailure;
  // The backend copies device -> pinned host; anything else is a mistake here.
  if (kind != cudaMemcpyDeviceToHost || !g_device.Contains(src, n) || !g_pinned.Contains(dst, n)) {
    return cudaErrorInvalidValue;
  }
  auto* c = new Copy{dst, src, n};
  return stoker_standin_enqueue(
      s,
      [](void* arg, int ok) {
        auto* c = static_cast<Copy*>(arg);
        if (ok) std::memcpy(c->dst, c->src, c->n);
        delete c;
      },
      c);
}
