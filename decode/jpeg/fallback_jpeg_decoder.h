// FallbackJpegDecoder: a GPU view's decoder. Decodes with the primary (the
// GPU) and, where the primary cannot (a JPEG it rejects: progressive, CMYK,
// arithmetic; a device error; out of memory), with the fallback (the CPU)
// for that image, counting each such image. A view whose options say
// fallback=none uses the primary alone and sees its errors.
//
// Such a view's bytes come from both decoders, so its name() names both:
// it is part of the view's fingerprint, and a view made with fallback never
// shares cached bytes with one made without it, nor with a CPU view.
//
// Thread-safety: as the two decoders (all JpegDecoders are thread-safe).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "decode/jpeg/jpeg_decoder.h"

namespace stoker {

struct FallbackCounters {
  std::atomic<uint64_t> unsupported{0};    // ENOTSUP: the primary does not take the JPEG
  std::atomic<uint64_t> rejected{0};       // EBADMSG: the primary found it corrupt
  std::atomic<uint64_t> no_memory{0};      // ENOMEM
  std::atomic<uint64_t> device_errors{0};  // anything else (EIO: the device failed)
  uint64_t total() const {
    return unsupported.load() + rejected.load() + no_memory.load() + device_errors.load();
  }
};

class FallbackJpegDecoder final : public JpegDecoder {
 public:
  // REQUIRES: all non-null.
  FallbackJpegDecoder(std::shared_ptr<JpegDecoder> primary, std::shared_ptr<JpegDecoder> fallback,
                      std::shared_ptr<FallbackCounters> counters);

  std::string name() const override;
  // EINVAL (the caller's mistake) and ECANCELED (shutting down) are
  // returned as they are; every other failure of the primary goes to the
  // fallback, whose status is the result.
  [[nodiscard]] Status Decode(const uint8_t* jpeg, size_t len, const DecodeParams& params,
                              uint8_t* out, size_t out_len) override;

 private:
  const std::shared_ptr<JpegDecoder> primary_;
  const std::shared_ptr<JpegDecoder> fallback_;
  const std::shared_ptr<FallbackCounters> counters_;
};

}  // namespace stoker
