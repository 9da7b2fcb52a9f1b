// NumPy .npy format, version 1.0, for uint8 arrays: the header that makes a
// block of HWC pixels something np.load reads.
//
// Layout: "\x93NUMPY" 01 00, uint16 little-endian header length, then the
// header dict "{'descr': '|u1', 'fortran_order': False, 'shape': (H, W, C), }"
// padded with spaces and ended by '\n' so the data starts at a multiple of
// 64 bytes (numpy's own alignment rule), then the data, C order.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace stoker {

// The header for a uint8 array of this shape (1 to 3 dimensions are what
// stoker writes; any count works). Its size is a multiple of 64.
std::string NpyHeader(const std::vector<uint64_t>& shape);

struct NpyArrayInfo {
  std::vector<uint64_t> shape;
  size_t data_offset = 0;
};
// Parses a header NpyHeader wrote (uint8, C order, v1.0); EBADMSG otherwise.
// For tests and fsck.
Result<NpyArrayInfo> ParseNpyHeader(std::string_view file);

}  // namespace stoker
