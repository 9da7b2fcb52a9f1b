// Fuzzes ProbeJpeg on arbitrary bytes and, when it accepts a small image,
// the CPU decoder on the same bytes (libjpeg's error paths through our
// setjmp error manager and memory source). Invariants: the probe never
// reads outside the input (ASan), its header_size lies within the input,
// and an accepted image decodes to exactly the predicted size or fails with
// a Status.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/jpeg_probe.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stoker;
  static const auto decoder = NewCpuJpegDecoder({size_t{64} << 20});
  JpegProbeOptions options;
  options.max_pixels = 1 << 20;
  auto info = ProbeJpeg(data, size, options);
  if (!info.ok()) return 0;
  Check(info->header_size > 0 && info->header_size <= size);
  Check(info->width > 0 && info->height > 0);
  Check(uint64_t{info->width} * info->height <= options.max_pixels);
  for (int channels : {0, 1, 3}) {
    DecodeParams params;
    params.channels = channels;
    auto shape = OutputShape(*info, params);
    if (!shape.ok()) continue;
    // Keep each run fast: decode only small images, once.
    if (shape->pixel_bytes() > (256u << 10) || channels == 1) continue;
    std::vector<uint8_t> out(shape->pixel_bytes());
    (void)decoder->Decode(data, size, params, out.data(), out.size());
  }
  return 0;
}
