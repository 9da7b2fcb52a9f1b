// JpegProbe: what a JPEG is, read from its markers without decoding any
// pixels: enough to know the exact size of its decoded form and whether the
// CPU decoder (libjpeg-turbo, as TensorFlow uses it) will take it.
//
// Parses SOI, then segments up to and including the first SOS header, with
// the checks libjpeg makes on them (segment lengths, SOF fields, sampling
// factors, table indices, scan components), so an image the probe accepts
// is one libjpeg starts decoding; the entropy-coded data is not looked at,
// so a corrupt scan is found only by the decoder.
//
// Errors: ENODATA the input ends before the first scan (a caller that gave
// a prefix of a file may retry with more bytes); EBADMSG not a JPEG, or a
// malformed marker segment; ENOTSUP a JPEG libjpeg-turbo 2.1 does not decode
// (lossless, hierarchical, precision other than 8 bits, fractional sampling
// ratios, arithmetic coding where disallowed, 2 or more than 4 components);
// EFBIG more pixels than the configured limit. Never reads outside
// [data, data + len), whatever the input.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/status.h"

namespace stoker {

enum class JpegProcess { kBaseline, kExtendedSequential, kProgressive, kLossless, kHierarchical };
// How libjpeg will interpret the components (from JFIF/Adobe markers and
// component ids, as libjpeg's default_decompress_parms decides).
enum class JpegColorSpace { kGrayscale, kYCbCr, kRGB, kCMYK, kYCCK, kUnknown };
enum class ChromaSubsampling { kGray, k444, k422, k420, k440, k411, k441, kOther };

const char* ToString(JpegProcess p);
const char* ToString(JpegColorSpace c);
const char* ToString(ChromaSubsampling s);

inline constexpr int kJpegMaxComponents = 4;

struct JpegComponentInfo {
  uint8_t id = 0;
  uint8_t h_samp = 0;
  uint8_t v_samp = 0;
  uint8_t quant_table = 0;
};

struct JpegInfo {
  uint32_t width = 0;
  uint32_t height = 0;
  int components = 0;
  int precision = 0;
  JpegProcess process = JpegProcess::kBaseline;
  bool arithmetic = false;
  JpegColorSpace color_space = JpegColorSpace::kUnknown;
  ChromaSubsampling subsampling = ChromaSubsampling::kOther;
  JpegComponentInfo comp[kJpegMaxComponents];
  bool jfif = false;
  bool adobe = false;
  int adobe_transform = -1;       // -1: no Adobe marker
  uint32_t restart_interval = 0;  // from a DRI before the first scan; 0: none
  size_t header_size = 0;         // bytes up to the end of the first SOS header
};

struct JpegProbeOptions {
  // width * height above this is refused (EFBIG) before anything is
  // allocated for the image. Keep it below TensorFlow's own limit (2^29
  // samples) to refuse no less than tf.io.decode_jpeg does.
  // Default: 100M pixels.
  uint64_t max_pixels = 100'000'000;
  // Accept arithmetic-coded JPEGs (SOF9/SOF10). Debian's libjpeg-turbo
  // decodes them. Default: true.
  bool allow_arithmetic = true;
};

// The first three bytes are FF D8 FF, as tf.io.decode_image sniffs JPEG.
bool LooksLikeJpeg(const uint8_t* data, size_t len);

Result<JpegInfo> ProbeJpeg(const uint8_t* data, size_t len, const JpegProbeOptions& options = {});

// Channels of the decoded image for tf.io.decode_jpeg's channels argument:
// 0 = min(components, 3) (so CMYK gives RGB, as TensorFlow converts it),
// 1 = grayscale, 3 = RGB. EINVAL for other requests; ENOTSUP where libjpeg
// has no conversion (grayscale from CMYK/YCCK, 2-component images).
Result<int> OutputChannels(const JpegInfo& info, int requested_channels);

}  // namespace stoker
