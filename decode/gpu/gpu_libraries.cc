#include "decode/gpu/gpu_libraries.h"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <mutex>
#include <set>

namespace stoker {
namespace {

void AddSplit(const char* colon_separated, std::vector<std::string>* out) {
  if (colon_separated == nullptr) return;
  std::string s(colon_separated);
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out->push_back(s.substr(start, end - start));
    start = end + 1;
  }
}

void AddGlob(const std::string& pattern, std::vector<std::string>* out) {
  glob_t g{};
  if (glob(pattern.c_str(), GLOB_ONLYDIR | GLOB_NOSORT, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out->push_back(g.gl_pathv[i]);
  }
  globfree(&g);
}

// Where pip puts the nvidia-* wheels: system, user, virtualenv, pyenv and
// conda site-packages, each holding nvidia/<component>/lib.
std::vector<std::string> WheelLibDirs() {
  std::vector<std::string> roots;
  if (const char* v = std::getenv("VIRTUAL_ENV"))
    roots.push_back(std::string(v) + "/lib/python3*/site-packages");
  if (const char* v = std::getenv("CONDA_PREFIX"))
    roots.push_back(std::string(v) + "/lib/python3*/site-packages");
  if (const char* h = std::getenv("HOME")) {
    roots.push_back(std::string(h) + "/.local/lib/python3*/site-packages");
    roots.push_back(std::string(h) + "/.pyenv/versions/*/lib/python3*/site-packages");
  }
  for (const char* r :
       {"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
        "/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages",
        "/opt/*/.venv/lib/python3*/site-packages", "/opt/conda/lib/python3*/site-packages"}) {
    roots.push_back(r);
  }
  std::vector<std::string> out;
  for (const std::string& r : roots) {
    for (const char* sub : {"/nvidia/nvjpeg/lib", "/nvidia/cuda_runtime/lib", "/nvidia/cu1*/lib"}) {
      AddGlob(r + sub, &out);
    }
  }
  return out;
}

std::string DlError() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// Opens the first of names found in dirs, else through the loader's path.
void* OpenFirst(const std::vector<std::string>& dirs, const std::vector<std::string>& names,
                std::string* path, std::string* errors) {
  for (const std::string& d : dirs) {
    for (const std::string& n : names) {
      const std::string p = d + "/" + n;
      if (void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        *path = p;
        return h;
      }
    }
  }
  for (const std::string& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *path = n;
      return h;
    }
    *errors = DlError();
  }
  return nullptr;
}

template <typename Fn>
Status Sym(void* lib, const char* name, const std::string& path, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr) return Status::Error(ENOSYS, path + " has no " + name);
  return Status::OK();
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ":") + x;
  return s.empty() ? "(none)" : s;
}

Result<std::shared_ptr<const GpuLibraries>> Load(const std::vector<std::string>& configured) {
  auto libs = std::make_shared<GpuLibraries>();
  const std::vector<std::string> dirs = GpuLibrarySearchPath(configured);
  std::string err;
  void* nvjpeg =
      OpenFirst(dirs, {"libnvjpeg.so", "libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so.11"},
                &libs->nvjpeg_path, &err);
  if (nvjpeg == nullptr) {
    return Status::Error(
        ENOENT, "nvJPEG (libnvjpeg.so) not found in " + Joined(dirs) + " or the loader's path (" +
                    err + "); install the nvidia-nvjpeg wheel or pass --gpu-library-path");
  }
  NvjpegApi& n = libs->nvjpeg;
  const std::string& np = libs->nvjpeg_path;
  STOKER_RETURN_IF_ERROR(Sym(nvjpeg, "nvjpegGetProperty", np, &n.GetProperty));
  STOKER_RETURN_IF_ERROR(Sym(nvjpeg, "nvjpegCreateEx", np, &n.CreateEx));
  STOKER_RETURN_IF_ERROR(Sym(nvjpeg, "nvjpegDestroy", np, &n.Destroy));
  STOKER_RETURN_IF_ERROR(Sym(nvjpeg, "nvjpegJpegStateCreate", np, &n.JpegStateCreate));
  STOKER_RETURN_IF_ERROR(Sym(nvjpeg, "nvjpegJpegStateDestroy", np, &n.JpegStateDestroy));
  STOKER_RETURN_IF_ERROR(
      Sym(nvjpeg, "nvjpegDecodeBatchedInitialize", np, &n.DecodeBatchedInitialize));
  STOKER_RETURN_IF_ERROR(Sym(nvjpeg, "nvjpegDecodeBatched", np, &n.DecodeBatched));
  n.GetHardwareDecoderInfo = reinterpret_cast<nvj::GetHardwareDecoderInfoFn>(
      dlsym(nvjpeg, "nvjpegGetHardwareDecoderInfo"));
  n.GetProperty(MAJOR_VERSION, &libs->nvjpeg_version[0]);
  n.GetProperty(MINOR_VERSION, &libs->nvjpeg_version[1]);
  n.GetProperty(PATCH_LEVEL, &libs->nvjpeg_version[2]);

  const std::string major = std::to_string(libs->nvjpeg_version[0]);
  std::vector<std::string> cudart_names = {"libcudart.so." + major};
  for (const char* v :
       {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
    if (cudart_names[0] != v) cudart_names.push_back(v);
  }
  void* cudart = OpenFirst(dirs, cudart_names, &libs->cudart_path, &err);
  if (cudart == nullptr) {
    return Status::Error(ENOENT, "the CUDA runtime (libcudart.so) not found in " + Joined(dirs) +
                                     " or the loader's path (" + err + ")");
  }
  CudaApi& c = libs->cuda;
  const std::string& cp = libs->cudart_path;
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaGetDeviceCount", cp, &c.GetDeviceCount));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaSetDevice", cp, &c.SetDevice));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaGetErrorString", cp, &c.GetErrorString));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaRuntimeGetVersion", cp, &c.RuntimeGetVersion));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaDriverGetVersion", cp, &c.DriverGetVersion));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaDeviceGetAttribute", cp, &c.DeviceGetAttribute));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaMalloc", cp, &c.Malloc));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaFree", cp, &c.Free));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaHostAlloc", cp, &c.HostAlloc));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaFreeHost", cp, &c.FreeHost));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaStreamCreateWithFlags", cp, &c.StreamCreateWithFlags));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaStreamDestroy", cp, &c.StreamDestroy));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaStreamSynchronize", cp, &c.StreamSynchronize));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaMemcpyAsync", cp, &c.MemcpyAsync));
  STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaMemGetInfo", cp, &c.MemGetInfo));
  c.GetDeviceProperties = reinterpret_cast<decltype(c.GetDeviceProperties)>(
      dlsym(cudart, "cudaGetDeviceProperties_v2"));
  if (c.GetDeviceProperties == nullptr) {
    STOKER_RETURN_IF_ERROR(Sym(cudart, "cudaGetDeviceProperties", cp, &c.GetDeviceProperties));
  }
  c.RuntimeGetVersion(&libs->runtime_version);
  c.DriverGetVersion(&libs->driver_version);
  cudaError_t e = c.GetDeviceCount(&libs->device_count);
  // Without a driver the runtime says its version is "insufficient": the
  // host has no NVIDIA GPU set up at all, which is what a person needs to hear.
  if (e == cudaErrorInsufficientDriver && libs->driver_version == 0) {
    return Status::Error(ENODEV, "no NVIDIA driver");
  }
  if (e != cudaSuccess) {
    return Status::Error(ENODEV, "no CUDA device: " + std::string(c.GetErrorString(e)) +
                                     " (driver " + std::to_string(libs->driver_version) + ")");
  }
  if (libs->device_count <= 0) return Status::Error(ENODEV, "no CUDA device");
  return std::shared_ptr<const GpuLibraries>(std::move(libs));
}

}  // namespace

Status GpuLibraries::CudaError(cudaError_t e, const std::string& what) const {
  const std::string msg = what + ": " + cuda.GetErrorString(e);
  return Status::Error(e == cudaErrorMemoryAllocation ? ENOMEM : EIO, msg);
}

std::vector<std::string> GpuLibrarySearchPath(const std::vector<std::string>& configured) {
  std::vector<std::string> dirs = configured;
  AddSplit(std::getenv("STOKER_GPU_LIBRARY_PATH"), &dirs);
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* v = std::getenv(var)) dirs.push_back(std::string(v) + "/lib64");
  }
  dirs.push_back("/usr/local/cuda/lib64");
  for (auto& d : WheelLibDirs()) dirs.push_back(std::move(d));
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto& d : dirs) {
    if (seen.insert(d).second) out.push_back(std::move(d));
  }
  return out;
}

Result<std::shared_ptr<const GpuLibraries>> LoadGpuLibraries(
    const std::vector<std::string>& configured) {
  static std::mutex mu;
  static std::shared_ptr<const GpuLibraries> loaded;
  std::lock_guard<std::mutex> l(mu);
  if (loaded) return loaded;
  STOKER_ASSIGN_OR_RETURN(loaded, Load(configured));
  return loaded;
}

}  // namespace stoker
