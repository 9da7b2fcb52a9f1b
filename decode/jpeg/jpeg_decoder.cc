#include "decode/jpeg/jpeg_decoder.h"

namespace stoker {

Result<ImageShape> OutputShape(const JpegInfo& info, const DecodeParams& params) {
  STOKER_ASSIGN_OR_RETURN(int channels, OutputChannels(info, params.channels));
  return ImageShape{info.height, info.width, static_cast<uint32_t>(channels)};
}

}  // namespace stoker
