// ImageShape: the dimensions of a decoded image, uint8 samples in HWC
// (row-major, channels interleaved) order, as tf.io.decode_jpeg returns it.
// Thread-safety: a value.
#pragma once

#include <cstdint>

namespace stoker {

struct ImageShape {
  uint32_t height = 0;
  uint32_t width = 0;
  uint32_t channels = 0;
  uint64_t pixel_bytes() const { return uint64_t{height} * width * channels; }
  bool operator==(const ImageShape&) const = default;
};

}  // namespace stoker
