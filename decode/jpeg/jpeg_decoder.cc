#include "decode/jpeg/jpeg_decoder.h"

#include <algorithm>
#include <string>

namespace stoker {

int ScaleRatio(uint32_t width, uint32_t height, const DecodeParams& params) {
  if (params.max_side == 0) return params.ratio;
  const uint32_t shorter = std::min(width, height);
  int ratio = 1;
  while (ratio < 8 && ScaledSide(shorter, ratio * 2) >= params.max_side) {
    ratio *= 2;
  }
  return ratio;
}

Status CheckScaleParams(const DecodeParams& params) {
  const int r = params.ratio;
  if (r != 1 && r != 2 && r != 4 && r != 8) {
    return Status::Invalid("ratio must be 1, 2, 4 or 8, not " + std::to_string(r));
  }
  if (params.max_side != 0 && r != 1) {
    return Status::Invalid("ratio and max_side exclude each other");
  }
  return Status::OK();
}

Result<ImageShape> OutputShape(const JpegInfo& info, const DecodeParams& params) {
  STOKER_RETURN_IF_ERROR(CheckScaleParams(params));
  STOKER_ASSIGN_OR_RETURN(int channels, OutputChannels(info, params.channels));
  const int ratio = ScaleRatio(info.width, info.height, params);
  return ImageShape{ScaledSide(info.height, ratio), ScaledSide(info.width, ratio),
                    static_cast<uint32_t>(channels)};
}

}  // namespace stoker
