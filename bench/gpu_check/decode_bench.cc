// stoker_decode_bench: the decoder measurements of bench/gpu_check/run.
//
//   stoker_decode_bench pixels [--jpegs DIR]      GPU pixels against libjpeg-turbo's
//   stoker_decode_bench throughput [--images N]   images/s, CPU pool on all cores vs the GPU
//                                                (and the CPU skip-layout check alone)
//
// Prints one JSON object. Not a test: it measures and reports; it exits
// non-zero only when it could not measure (no GPU decoder, bad input).
#include <dirent.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "decode/gpu/gpu_jpeg_decoder.h"
#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/decode_pool.h"
#include "decode/testing/test_jpegs.h"
#include "util/log.h"

namespace stoker {
namespace {

struct Jpeg {
  std::string name;
  std::string bytes;
};

std::vector<Jpeg> Generated(int count, int w, int h, int quality) {
  static const std::pair<const char*, int> kKinds[] = {
      {"420", TJSAMP_420}, {"422", TJSAMP_422}, {"444", TJSAMP_444}, {"gray", TJSAMP_GRAY}};
  std::vector<Jpeg> v;
  for (int i = 0; i < count; ++i) {
    const auto& [kind, samp] = kKinds[i % 4];
    const int ch = samp == TJSAMP_GRAY ? 1 : 3;
    v.push_back({std::string("gen-") + kind + "-" + std::to_string(i),
                 testing::EncodeTj(testing::MakeImage(w, h, ch, i + 1), w, h,
                                   ch == 1 ? TJPF_GRAY : TJPF_RGB, samp, quality)});
  }
  return v;
}

std::vector<Jpeg> FromDir(const std::string& dir) {
  std::vector<Jpeg> v;
  DIR* d = opendir(dir.c_str());
  if (!d) return v;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() < 5 || (n.substr(n.size() - 4) != ".jpg" && n.substr(n.size() - 5) != ".jpeg")) {
      continue;
    }
    std::ifstream f(dir + "/" + n, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    v.push_back({n, ss.str()});
  }
  closedir(d);
  std::sort(v.begin(), v.end(), [](const Jpeg& a, const Jpeg& b) { return a.name < b.name; });
  return v;
}

Result<std::vector<uint8_t>> Decode(JpegDecoder& d, const Jpeg& j, const DecodeParams& p) {
  const auto* data = reinterpret_cast<const uint8_t*>(j.bytes.data());
  STOKER_ASSIGN_OR_RETURN(JpegInfo info, ProbeJpeg(data, j.bytes.size()));
  STOKER_ASSIGN_OR_RETURN(uint64_t n, OutputSize(info, p));
  std::vector<uint8_t> out(n);
  STOKER_RETURN_IF_ERROR(d.Decode(data, j.bytes.size(), p, out.data(), out.size()));
  return out;
}

struct Diff {
  double sum = 0;
  int max = 0;
  uint64_t same = 0, total = 0;
  void Add(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      const int d = std::abs(int(a[i]) - int(b[i]));
      sum += d;
      max = std::max(max, d);
      same += d == 0;
    }
    total += a.size();
  }
  nlohmann::json Json() const {
    return {{"mean_abs_diff", total ? sum / total : 0.0},
            {"max_abs_diff", max},
            {"identical_share", total ? double(same) / total : 0.0},
            {"bytes", total}};
  }
};

int Pixels(const std::vector<Jpeg>& jpegs, JpegDecoder& gpu) {
  auto cpu = NewCpuJpegDecoder();
  nlohmann::json out;
  out["gpu_decoder"] = gpu.name();
  out["cpu_decoder"] = cpu->name();
  out["images"] = jpegs.size();
  Diff vs_accurate, vs_fast;
  std::map<std::string, Diff> by_kind;
  nlohmann::json failed = nlohmann::json::array();
  for (const Jpeg& j : jpegs) {
    DecodeParams p;  // channels as the JPEG has them
    auto g = Decode(gpu, j, p);
    if (!g.ok()) {
      failed.push_back(j.name + ": " + g.status().ToString());
      continue;
    }
    auto fast = Decode(*cpu, j, p);
    p.dct = DctMethod::kAccurate;
    auto accurate = Decode(*cpu, j, p);
    if (!fast.ok() || !accurate.ok()) {
      failed.push_back(j.name + ": cpu failed");
      continue;
    }
    vs_accurate.Add(*g, *accurate);
    vs_fast.Add(*g, *fast);
    const size_t dash = j.name.find('-');
    by_kind[dash == std::string::npos
                ? "file"
                : j.name.substr(dash + 1, j.name.find('-', dash + 1) - dash - 1)]
        .Add(*g, *accurate);
  }
  out["vs_libjpeg_accurate"] = vs_accurate.Json();
  out["vs_libjpeg_fast"] = vs_fast.Json();
  for (const auto& [k, d] : by_kind) out["vs_libjpeg_accurate_by_kind"][k] = d.Json();
  out["gpu_failed"] = failed;
  std::cout << out.dump(2) << std::endl;
  return vs_accurate.total ? 0 : 1;
}

// check: CheckJpegDecodes (an on_error=skip view's layout check) instead of d.
// CPU seconds of this process so far: on a shared machine images per CPU
// second move much less with the load than images per wall second.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Images per wall second; per_cpu_second (if set): images per CPU second.
double Run(JpegDecoder& d, const std::vector<Jpeg>& jpegs, int threads, bool check = false,
           double* per_cpu_second = nullptr) {
  DecodePool pool(std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), {threads});
  std::vector<DecodePool::Job> jobs;
  std::atomic<int> failures{0};
  for (const Jpeg& j : jpegs) {
    jobs.push_back([&d, &j, &failures, check] {
      thread_local std::vector<uint8_t> out;
      const auto* data = reinterpret_cast<const uint8_t*>(j.bytes.data());
      if (check) {
        Status s = CheckJpegDecodes(data, j.bytes.size());
        if (!s.ok()) failures++;
        return s;
      }
      auto info = ProbeJpeg(data, j.bytes.size());
      if (!info.ok()) return info.status();
      out.resize(*OutputSize(*info, {}));
      Status s = d.Decode(data, j.bytes.size(), {}, out.data(), out.size());
      if (!s.ok()) failures++;
      return s;
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = ProcessCpuSeconds();
  pool.RunAll(DecodePriority::kReader, std::move(jobs));
  const double cpu = ProcessCpuSeconds() - cpu0;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (failures.load() > 0) std::cerr << failures.load() << " images failed on " << d.name() << "\n";
  if (per_cpu_second) *per_cpu_second = cpu > 0 ? jpegs.size() / cpu : 0;
  return jpegs.size() / s;
}

int Throughput(const std::vector<Jpeg>& jpegs, std::shared_ptr<BatchingJpegDecoder> gpu,
               const GpuDecoderOptions& o, int repeat, int cpu_threads) {
  auto cpu = NewCpuJpegDecoder();
  const int cores =
      cpu_threads > 0 ? cpu_threads : static_cast<int>(std::thread::hardware_concurrency());
  nlohmann::json out;
  out["images"] = jpegs.size();
  out["cpu_threads"] = cores;
  double best_cpu = 0, best_gpu = 0, best_per_cpu_s = 0;
  for (int r = 0; r < repeat; ++r) {
    double per_cpu_s = 0;
    best_cpu = std::max(best_cpu, Run(*cpu, jpegs, cores, false, &per_cpu_s));
    best_per_cpu_s = std::max(best_per_cpu_s, per_cpu_s);
  }
  out["cpu_images_per_s"] = best_cpu;
  out["cpu_images_per_cpu_s"] = best_per_cpu_s;
  out["cpu_decoder"] = cpu->name();
  double best_check = 0;
  for (int r = 0; r < repeat; ++r) best_check = std::max(best_check, Run(*cpu, jpegs, cores, true));
  out["cpu_check_images_per_s"] = best_check;  // the skip layout's decode check alone
  if (gpu) {
    const int gpu_threads = std::max(cores, o.lanes * static_cast<int>(o.max_batch));
    Run(*gpu, std::vector<Jpeg>(jpegs.begin(), jpegs.begin() + std::min<size_t>(jpegs.size(), 512)),
        gpu_threads);  // warm-up: nvJPEG sizes its buffers
    for (int r = 0; r < repeat; ++r) best_gpu = std::max(best_gpu, Run(*gpu, jpegs, gpu_threads));
    out["gpu_images_per_s"] = best_gpu;
    out["gpu_over_cpu"] = best_cpu > 0 ? best_gpu / best_cpu : 0.0;
    out["gpu_decoder"] = gpu->name();
    out["gpu_pool_threads"] = gpu_threads;
    out["gpu_stats"] = gpu->Stats();
  }
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  using namespace stoker;
  InitLogging("", "info");  // to stderr: stdout is the JSON that bench/gpu_check/run parses
  CLI::App app("stoker decoder measurements (bench/gpu_check)");
  GpuDecoderOptions o;
  std::string jpeg_dir;
  int images = 2000, width = 500, height = 375, quality = 90, repeat = 3, cpu_threads = 0;
  bool cpu_only = false;
  app.add_option("--gpu-library-path", o.library_path);
  app.add_option("--lanes", o.lanes)->capture_default_str();
  app.add_option("--max-batch", o.max_batch)->capture_default_str();
  app.add_option("--jpegs", jpeg_dir, "decode these JPEGs instead of generated ones");
  app.add_option("--images", images)->capture_default_str();
  app.add_option("--width", width)->capture_default_str();
  app.add_option("--height", height)->capture_default_str();
  app.add_option("--quality", quality)->capture_default_str();
  app.add_option("--repeat", repeat)->capture_default_str();
  app.add_option("--cpu-threads", cpu_threads, "default: all cores");
  app.add_flag("--cpu-only", cpu_only, "throughput: measure the CPU pool alone (no GPU here)");
  std::string mode;
  app.add_option("mode", mode, "pixels or throughput")->required();
  CLI11_PARSE(app, argc, argv);
  std::vector<Jpeg> jpegs =
      jpeg_dir.empty() ? Generated(images, width, height, quality) : FromDir(jpeg_dir);
  if (jpegs.empty()) {
    std::cerr << "no JPEGs\n";
    return 1;
  }
  std::shared_ptr<BatchingJpegDecoder> gpu;
  if (!cpu_only) {
    auto d = OpenGpuJpegDecoder(o);
    if (!d.ok()) {
      std::cerr << "GPU decoder: " << d.status().ToString() << "\n";
      return 1;
    }
    gpu = *d;
  }
  if (mode == "pixels") {
    if (!gpu) return 1;
    return Pixels(jpegs, *gpu);
  }
  if (mode == "throughput") return Throughput(jpegs, gpu, o, repeat, cpu_threads);
  std::cerr << "mode: pixels or throughput\n";
  return 2;
}
