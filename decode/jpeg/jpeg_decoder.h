// JpegDecoder: turns one JPEG into uint8 HWC pixels, the seam a GPU backend
// (nvJPEG) plugs into beside the CPU one. Every implementation must pass
// jpeg_decoder_test.cc's conformance checks.
//
// Contract: Decode writes exactly OutputShape(probe, params).pixel_bytes()
// bytes to out; out_len must be that size, or Decode fails with EINVAL
// before decoding (a shape mismatch means the caller's layout is stale).
// Results are deterministic for one implementation and version: a view that
// is produced in pieces must name its decoder (name()) in its layout so
// pieces from different decoders never mix.
// Errors: EINVAL bad params or out_len; EBADMSG corrupt or truncated JPEG;
// ENOTSUP a JPEG this decoder cannot handle; ENOMEM over the memory limit.
// Warnings (libjpeg's "corrupt data" kind, which tf.io.decode_jpeg ignores
// too) are not errors.
//
// Thread-safety: Decode may be called from many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "decode/jpeg/image_shape.h"
#include "decode/jpeg/jpeg_probe.h"
#include "util/status.h"

namespace stoker {

enum class DctMethod {
  kFast,      // JDCT_IFAST: tf.io.decode_jpeg's default ('' / 'INTEGER_FAST')
  kAccurate,  // JDCT_ISLOW: dct_method='INTEGER_ACCURATE'
};

struct DecodeParams {
  // 0 = as the JPEG has it (1 or 3; CMYK gives 3), 1 = grayscale, 3 = RGB.
  // Default: 0.
  int channels = 0;
  // Default: kFast, as tf.io.decode_jpeg.
  DctMethod dct = DctMethod::kFast;
  // Default: true, as tf.io.decode_jpeg (fancy_upscaling=True).
  bool fancy_upsampling = true;
  bool operator==(const DecodeParams&) const = default;
};

// The decoded shape of a probed JPEG under params (TensorFlow's channels
// rule, see OutputChannels).
Result<ImageShape> OutputShape(const JpegInfo& info, const DecodeParams& params);
inline Result<uint64_t> OutputSize(const JpegInfo& info, const DecodeParams& params) {
  STOKER_ASSIGN_OR_RETURN(ImageShape shape, OutputShape(info, params));
  return shape.pixel_bytes();
}

class JpegDecoder {
 public:
  virtual ~JpegDecoder() = default;
  // Names the implementation and version, e.g. "libjpeg-turbo 2.1.5".
  virtual std::string name() const = 0;
  [[nodiscard]] virtual Status Decode(const uint8_t* jpeg, size_t len, const DecodeParams& params,
                                      uint8_t* out, size_t out_len) = 0;
};

}  // namespace stoker
