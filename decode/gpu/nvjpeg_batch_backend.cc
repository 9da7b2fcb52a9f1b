// NvjpegBatchBackend decoding a batch on a lane (nvjpeg_batch_backend.h):
// what nvJPEG would not take is screened out first, the rest is placed in
// the lane's buffer grouped by engine and output format, decoded as nvJPEG
// batches and copied out.
#include "decode/gpu/nvjpeg_batch_backend.h"

#include <cstring>

#include "util/log.h"

namespace stoker {
namespace {

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

// Whether an EOI marker (FF D9) stands in p[from, len): a file cut short in
// its scan has none.
bool HasEoiAfter(const uint8_t* p, size_t len, size_t from) {
  for (size_t i = len; i >= from + 2; --i) {
    if (p[i - 2] == 0xFF && p[i - 1] == 0xD9) return true;
  }
  return false;
}

bool IsRgb(const JpegJob& j) { return j.shape.channels == 3 && j.info.components == 3; }
// What nvJPEG's hardware backend takes: baseline, one interleaved scan.
bool HardwareTakes(const JpegJob& j) {
  return j.info.process == JpegProcess::kBaseline && FirstScanInterleavesAll(j);
}
// The bytes image j takes in a lane's buffer, decoded.
uint64_t DeviceBytes(const JpegJob& j) {
  return uint64_t{j.shape.width} * j.shape.height * (IsRgb(j) ? 3 : 1);
}

// What nvJPEG does not take (gpu_jpeg_decoder.h) fails here, ENOTSUP or
// EBADMSG, without reaching the device.
Status Screen(const JpegJob& j) {
  const JpegInfo& i = j.info;
  auto no = [](const std::string& why) { return Status::Error(ENOTSUP, "nvJPEG backend: " + why); };
  if (i.precision != 8) return no("precision other than 8 bits");
  if (const int r = ScaleRatio(i.width, i.height, j.params); r != 1) {
    return no("no DCT scaling (ratio " + std::to_string(r) + ")");
  }
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

// From the pinned buffer to the caller's; a grayscale decode asked for as
// RGB is widened here (libjpeg's gray->RGB repeats the sample).
void CopyOut(const JpegJob& j, const uint8_t* src) {
  const size_t pixels = size_t{j.shape.width} * j.shape.height;
  if (IsRgb(j) || j.shape.channels == 1) {
    std::memcpy(j.out, src, j.shape.pixel_bytes());
    return;
  }
  for (size_t p = 0; p < pixels; ++p) {
    j.out[3 * p] = j.out[3 * p + 1] = j.out[3 * p + 2] = src[p];
  }
}

}  // namespace

void NvjpegBatchBackend::DecodeBatch(int lane, std::span<const JpegJob> jobs,
                                     std::span<Status> results) {
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
    FailStream(l, libs_->CudaError(e, "decoding a batch on the GPU"), results);
    return;
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!results[i].ok()) continue;
    CopyOut(jobs[i], l.host + offset[i]);
    images_[engine[i]]++;
  }
}

void NvjpegBatchBackend::Decode(Lane& l, int e, int f, std::span<const JpegJob> jobs,
                                const std::vector<size_t>& offset, const std::vector<size_t>& group,
                                size_t lo, size_t hi, std::span<Status> results,
                                std::vector<int>& engine) {
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

void NvjpegBatchBackend::FailStream(Lane& l, const Status& s, std::span<Status> results) {
  for (Status& r : results) {
    if (r.ok()) r = s;
  }
  for (auto& per_engine : l.init) per_engine[0] = per_engine[1] = -1;
  // Most failures of work on a stream (a launch failure, an illegal
  // address) leave the context broken: every later call fails the same
  // way. Asked once; if so, the device is not touched again and every
  // image goes to the fallback at once, until the mount is restarted.
  size_t free_bytes = 0, total = 0;
  if (cudaError_t after = libs_->cuda.MemGetInfo(&free_bytes, &total); after != cudaSuccess) {
    std::call_once(broken_once_, [&] {
      broken_why_ = std::make_shared<const std::string>(s.message());
      broken_ = true;
      LOG_ERROR(
          "GPU decoder: the CUDA context is broken ({}); its images go to the CPU "
          "decoder where the view allows it, until the mount is restarted",
          s.message());
    });
  }
}

}  // namespace stoker
