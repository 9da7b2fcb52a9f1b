// CRC-32C (Castagnoli), as TFRecord framing uses it, and TFRecord's masking.
// Uses the SSE4.2 crc32 instruction where the CPU has it, a table otherwise.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stoker {

// Extends crc (0 to start) over data.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t len);
inline uint32_t Crc32c(const void* data, size_t len) { return Crc32cExtend(0, data, len); }

// TFRecord's masked CRC: rotate right by 15 and add a constant.
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace stoker
