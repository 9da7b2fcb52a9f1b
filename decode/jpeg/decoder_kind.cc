#include "decode/gpu/gpu_jpeg_decoder.h"

namespace stoker {

Result<DecoderKind> ParseDecoderKind(std::string_view s) {
  if (s == "auto") return DecoderKind::kAuto;
  if (s == "cpu") return DecoderKind::kCpu;
  if (s == "gpu") return DecoderKind::kGpu;
  return Status::Invalid("'" + std::string(s) + "' is not auto, cpu or gpu");
}

const char* ToString(DecoderKind k) {
  switch (k) {
    case DecoderKind::kAuto:
      return "auto";
    case DecoderKind::kCpu:
      return "cpu";
    case DecoderKind::kGpu:
      return "gpu";
  }
  return "?";
}

}  // namespace stoker
