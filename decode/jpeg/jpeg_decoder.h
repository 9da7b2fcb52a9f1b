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
  // Decode at 1/ratio of the size in each dimension (1, 2, 4 or 8), by
  // libjpeg's DCT-domain scaling, as tf.io.decode_jpeg's ratio. Default: 1.
  int ratio = 1;
  // When not 0, ratio is chosen per image instead: the largest of 1, 2, 4, 8
  // that keeps its shorter decoded side at least max_side (1 for an image
  // already shorter). REQUIRES: ratio == 1 then. Default: 0 (off).
  uint32_t max_side = 0;
  bool operator==(const DecodeParams&) const = default;
};

// EINVAL unless ratio is 1, 2, 4 or 8, and 1 where max_side is set.
Status CheckScaleParams(const DecodeParams& params);

// The ratio an image of width x height decodes at under params: params.ratio,
// or what max_side picks for it. The layout (through OutputShape) and the CPU
// decoder both ask this, so sizes and pixels agree.
int ScaleRatio(uint32_t width, uint32_t height, const DecodeParams& params);

// A side of `size` samples decoded at 1/ratio: ceil(size / ratio), what
// libjpeg's jpeg_calc_output_dimensions gives for scale_num = 1,
// scale_denom = ratio (and what tf.io.decode_jpeg returns).
inline uint32_t ScaledSide(uint32_t size, int ratio) {
  return static_cast<uint32_t>((uint64_t{size} + ratio - 1) / ratio);
}

// The decoded shape of a probed JPEG under params (TensorFlow's channels
// rule, see OutputChannels; the size scaled by ScaleRatio). EINVAL where
// CheckScaleParams fails.
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
