// CRC-32C (Castagnoli), as TFRecord framing uses it, and TFRecord's masking.
// Uses the SSE4.2 crc32 instruction where the CPU has it (checked once, at
// first use; three interleaved streams), a slicing-by-8 table otherwise.
// Both give identical results; crc32c_test.cc checks them against each other
// and RFC 3720's vectors.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stoker {

// Extends crc (0 to start) over data. Crc32cExtend(Crc32cExtend(0, a), b)
// equals the CRC of a followed by b.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t len);
inline uint32_t Crc32c(const void* data, size_t len) { return Crc32cExtend(0, data, len); }

// TFRecord's masked CRC: rotate right by 15 and add a constant. A CRC of data
// that itself contains CRCs is weak; masking is how TFRecord avoids it.
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

// The two implementations, exposed so tests can compare them.
namespace crc32c_internal {
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t len);
bool HardwareAvailable();
// REQUIRES: HardwareAvailable().
uint32_t ExtendHardware(uint32_t crc, const void* data, size_t len);
// ExtendHardware runs three interleaved streams over blocks of 3 x these
// bytes (long blocks first, then short ones, then one stream for the rest).
constexpr size_t kLongBlock = 8192;
constexpr size_t kShortBlock = 256;
}  // namespace crc32c_internal

}  // namespace stoker
