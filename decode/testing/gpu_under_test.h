// The GPU decoder the unit tests run: the real one where a device and nvJPEG
// are found, else the host stand-in (decode/gpu/standin/standin.h) where
// the build made it, else none. The stand-in's knobs and readings are
// reached through the library the process already loaded.
// Thread-safety: as OpenGpuJpegDecoder; the knobs are atomics.
#pragma once

#include <dlfcn.h>

#include <string>

#include "decode/gpu/gpu_jpeg_decoder.h"

namespace stoker::testing {

inline Result<std::shared_ptr<BatchingJpegDecoder>> OpenGpuUnderTest(GpuDecoderOptions o = {}) {
  auto d = OpenGpuJpegDecoder(o);
#ifdef STOKER_GPU_STANDIN_DIR
  if (!d.ok() && d.status().code() != EINVAL) {
    o.library_path.insert(o.library_path.begin(), STOKER_GPU_STANDIN_DIR);
    d = OpenGpuJpegDecoder(o);
  }
#endif
  return d;
}

class Standin {
 public:
  // Null functions where the stand-in is not what this process loaded.
  Standin() {
#ifdef STOKER_GPU_STANDIN_DIR
    void* lib = dlopen(STOKER_GPU_STANDIN_DIR "/libcudart.so", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) return;
    set_ = reinterpret_cast<int (*)(const char*, long long)>(dlsym(lib, "stoker_standin_set"));
    get_ = reinterpret_cast<long long (*)(const char*)>(dlsym(lib, "stoker_standin_get"));
    dlclose(lib);  // NOLOAD took a reference; the decoder holds its own
#endif
  }
  bool loaded() const { return set_ != nullptr && get_ != nullptr; }
  void Set(const char* name, long long v) const { set_(name, v); }
  long long Get(const char* name) const { return get_(name); }

 private:
  int (*set_)(const char*, long long) = nullptr;
  long long (*get_)(const char*) = nullptr;
};

// Whether d runs on the stand-in (its device says so).
inline bool OnStandin(const BatchingJpegDecoder& d) {
  const auto b = d.Stats()["gpu_backend"];
  return b.contains("device") &&
         b["device"].get<std::string>().find("stand-in") != std::string::npos;
}

}  // namespace stoker::testing
