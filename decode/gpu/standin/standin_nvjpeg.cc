// nvJPEG's part of the host stand-in (standin.h): the batched decoder the
// backend calls, decoding with libjpeg-turbo into tracked "device" memory
// when the stream is synchronised.
#include <turbojpeg.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "decode/gpu/nvjpeg_abi.h"
#include "decode/gpu/standin/standin.h"

namespace nvj = stoker::nvj;

struct stoker::nvj::HandleOpaque {
  nvj::Backend backend;
  nvj::DevAllocator dev;
  nvj::PinnedAllocator pinned;
  unsigned flags;
};

struct stoker::nvj::StateOpaque {
  nvj::HandleOpaque* handle;
  int batch = 0;
  nvj::OutputFormat format = nvj::kOutputRGBI;
  // Scratch as nvJPEG keeps per state (the bitstreams, staged and on the
  // device), grown through the handle's allocators and never shrunk.
  void* dev_scratch = nullptr;
  size_t dev_bytes = 0;
  void* pinned_scratch = nullptr;
  size_t pinned_bytes = 0;
};

namespace {

constexpr unsigned kKnownFlags = 0x3f;

struct Decoded {
  std::vector<uint8_t> pixels;  // rows of row_bytes
  size_t row_bytes = 0;
  int height = 0;
  nvj::Image dest{};
};

void Store(void* arg, int ok) {
  auto* batch = static_cast<std::vector<Decoded>*>(arg);
  if (ok) {
    for (const Decoded& d : *batch) {
      for (int y = 0; y < d.height; ++y) {
        std::memcpy(d.dest.channel[0] + y * d.dest.pitch[0], d.pixels.data() + y * d.row_bytes,
                    d.row_bytes);
      }
    }
  }
  delete batch;
}

// What nvJPEG's hardware backend takes: a baseline (SOF0) JPEG whose first
// scan interleaves every component (nvjpeg.h: "baseline JPEG bitstream with
// single scan"). The markers are walked up to the first SOS.
bool HardwareTakes(const unsigned char* p, size_t n) {
  int sof = -1, components = 0;
  for (size_t i = 2; i + 4 <= n && p[i] == 0xFF;) {
    if (p[i + 1] == 0xFF) {  // a fill byte before a marker
      ++i;
      continue;
    }
    const int m = p[i + 1];
    const size_t len = (size_t{p[i + 2]} << 8) | p[i + 3];
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC && i + 10 <= n) {
      sof = m;
      components = p[i + 9];
    }
    if (m == 0xDA) return sof == 0xC0 && i + 5 <= n && p[i + 4] == components;
    i += 2 + len;
  }
  return false;
}

// Grows one scratch buffer to at least n bytes through an allocator.
template <typename Malloc, typename Free>
bool Grow(void** p, size_t* have, size_t n, Malloc m, Free f) {
  if (*have >= n) return true;
  if (*p) f(*p);
  *p = nullptr;
  *have = 0;
  if (m(p) != 0) {
    *p = nullptr;
    return false;
  }
  *have = n;
  return true;
}

}  // namespace

extern "C" {

nvj::Status nvjpegGetProperty(libraryPropertyType type, int* value) {
  *value = type == MINOR_VERSION ? 1 : 0;  // 0.1.0: not a real nvJPEG
  return nvj::kSuccess;
}

nvj::Status nvjpegCreateEx(nvj::Backend backend, nvj::DevAllocator* dev,
                           nvj::PinnedAllocator* pinned, unsigned int flags, nvj::Handle* handle) {
  if (handle == nullptr || (flags & ~kKnownFlags) != 0) return nvj::kInvalidParameter;
  if (backend == nvj::kBackendHardware && stoker_standin_get("HARDWARE") == 0) {
    return nvj::kArchMismatch;
  }
  if (backend > nvj::kBackendHardware) return nvj::kInvalidParameter;
  auto* h = new nvj::HandleOpaque{backend, {}, {}, flags};
  h->dev = dev ? *dev : nvj::DevAllocator{nullptr, nullptr};
  h->pinned = pinned ? *pinned : nvj::PinnedAllocator{nullptr, nullptr};
  if (!h->dev.dev_malloc || !h->pinned.pinned_malloc) {
    delete h;
    return nvj::kInvalidParameter;  // the backend always brings its own
  }
  *handle = h;
  return nvj::kSuccess;
}

nvj::Status nvjpegDestroy(nvj::Handle handle) {
  delete handle;
  return nvj::kSuccess;
}

nvj::Status nvjpegJpegStateCreate(nvj::Handle handle, nvj::State* state) {
  *state = new nvj::StateOpaque{handle};
  return nvj::kSuccess;
}

nvj::Status nvjpegJpegStateDestroy(nvj::State s) {
  if (s->dev_scratch) s->handle->dev.dev_free(s->dev_scratch);
  if (s->pinned_scratch) s->handle->pinned.pinned_free(s->pinned_scratch);
  delete s;
  return nvj::kSuccess;
}

nvj::Status nvjpegDecodeBatchedInitialize(nvj::Handle h, nvj::State s, int batch_size,
                                          int max_cpu_threads, nvj::OutputFormat format) {
  // A state is its handle's (undefined in nvJPEG; refused here).
  if (s->handle != h || batch_size <= 0 || max_cpu_threads <= 0) return nvj::kInvalidParameter;
  if (format != nvj::kOutputRGBI && format != nvj::kOutputY) return nvj::kInvalidParameter;
  s->batch = batch_size;
  s->format = format;
  return nvj::kSuccess;
}

nvj::Status nvjpegGetHardwareDecoderInfo(nvj::Handle h, unsigned int* engines,
                                         unsigned int* cores) {
  if (h->backend != nvj::kBackendHardware) return nvj::kInvalidParameter;
  *engines = 7;
  *cores = 1;
  return nvj::kSuccess;
}

nvj::Status nvjpegDecodeBatched(nvj::Handle h, nvj::State s, const unsigned char* const* data,
                                const size_t* lengths, nvj::Image* dest, cudaStream_t stream) {
  stoker_standin_count("DECODE_BATCHED", 1);
  if (s->handle != h || s->batch <= 0 || data == nullptr || lengths == nullptr || dest == nullptr) {
    return nvj::kInvalidParameter;
  }
  const int channels = s->format == nvj::kOutputRGBI ? 3 : 1;
  const int pf = channels == 3 ? TJPF_RGB : TJPF_GRAY;
  const int flags = TJFLAG_ACCURATEDCT |
                    ((h->flags & nvj::kFlagUpsamplingWithInterpolation) ? 0 : TJFLAG_FASTUPSAMPLE);
  tjhandle tj = tjInitDecompress();
  auto batch = new std::vector<Decoded>(static_cast<size_t>(s->batch));
  auto fail = [&](nvj::Status st) {
    delete batch;
    tjDestroy(tj);
    return st;
  };
  size_t bitstream_bytes = 0;
  for (int i = 0; i < s->batch; ++i) {
    int w = 0, ht = 0, samp = 0, cs = 0;
    if (data[i] == nullptr || lengths[i] == 0) return fail(nvj::kInvalidParameter);
    if (tjDecompressHeader3(tj, data[i], lengths[i], &w, &ht, &samp, &cs) != 0) {
      return fail(nvj::kBadJpeg);
    }
    if (w == stoker_standin_get("REJECT_WIDTH")) return fail(nvj::kJpegNotSupported);
    if (h->backend == nvj::kBackendHardware &&
        (!HardwareTakes(data[i], lengths[i]) || w == stoker_standin_get("HARDWARE_REJECT_WIDTH"))) {
      stoker_standin_count("HARDWARE_REFUSED", 1);
      return fail(nvj::kJpegNotSupported);
    }
    Decoded& d = (*batch)[static_cast<size_t>(i)];
    d.dest = dest[i];
    d.row_bytes = static_cast<size_t>(w) * channels;
    d.height = ht;
    if (d.dest.channel[0] == nullptr || d.dest.pitch[0] < d.row_bytes ||
        !stoker_standin_device_range(d.dest.channel[0],
                                     d.dest.pitch[0] * static_cast<size_t>(ht - 1) + d.row_bytes)) {
      return fail(nvj::kInvalidParameter);
    }
    d.pixels.resize(d.row_bytes * static_cast<size_t>(ht));
    if (tjDecompress2(tj, data[i], lengths[i], d.pixels.data(), w, static_cast<int>(d.row_bytes),
                      ht, pf, flags) != 0 &&
        tjGetErrorCode(tj) != TJERR_WARNING) {
      return fail(nvj::kBadJpeg);
    }
    bitstream_bytes += lengths[i];
  }
  if (!Grow(
          &s->dev_scratch, &s->dev_bytes, bitstream_bytes,
          [&](void** p) { return h->dev.dev_malloc(p, bitstream_bytes); }, h->dev.dev_free) ||
      !Grow(
          &s->pinned_scratch, &s->pinned_bytes, bitstream_bytes,
          [&](void** p) { return h->pinned.pinned_malloc(p, bitstream_bytes, 0); },
          h->pinned.pinned_free)) {
    return fail(nvj::kAllocatorFailure);
  }
  tjDestroy(tj);
  stoker_standin_count("DECODED", s->batch);
  if (h->backend == nvj::kBackendHardware) stoker_standin_count("DECODED_HARDWARE", s->batch);
  if (stoker_standin_enqueue(stream, &Store, batch) != cudaSuccess) return nvj::kExecutionFailed;
  return nvj::kSuccess;
}

}  // extern "C"
