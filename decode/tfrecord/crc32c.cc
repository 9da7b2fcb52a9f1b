#include "decode/tfrecord/crc32c.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#endif

namespace stoker {
namespace crc32c_internal {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // reflected Castagnoli polynomial

// t[k][b]: the CRC of byte b followed by k zero bytes, for slicing-by-8.
struct Tables {
  uint32_t t[8][256];
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t len) {
  const auto& t = GetTables().t;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (len >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    lo = __builtin_bswap32(lo);
    hi = __builtin_bswap32(hi);
#endif
    lo ^= c;
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    len -= 8;
  }
  while (len--) c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

#if defined(__x86_64__)
bool HardwareAvailable() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
}

namespace {

// The register after n zero bytes is linear in the register before: a shift
// by n bytes, kept as four byte tables (t[k][b] shifts b << 8k).
class ZeroShift {
 public:
  explicit ZeroShift(size_t n) {
    const auto& t0 = GetTables().t[0];
    uint32_t bit[32];
    for (int i = 0; i < 32; ++i) {
      uint32_t c = 1u << i;
      for (size_t k = 0; k < n; ++k) c = t0[c & 0xff] ^ (c >> 8);
      bit[i] = c;
    }
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t r = 0;
        for (int j = 0; j < 8; ++j) {
          if ((b >> j) & 1) r ^= bit[8 * k + j];
        }
        t_[k][b] = r;
      }
    }
  }
  uint32_t operator()(uint32_t c) const {
    return t_[0][c & 0xff] ^ t_[1][(c >> 8) & 0xff] ^ t_[2][(c >> 16) & 0xff] ^ t_[3][c >> 24];
  }

 private:
  uint32_t t_[4][256];
};

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Three streams of `block` bytes each at p, run side by side (the crc32
// instruction's latency is three times its issue rate, so one chain leaves
// two thirds of it idle), then joined: the register after the first stream
// is shifted past the second, which started from zero, and so on.
__attribute__((target("sse4.2"))) inline uint64_t ThreeStreams(uint64_t c0, const uint8_t* p,
                                                               size_t block,
                                                               const ZeroShift& shift) {
  uint64_t c1 = 0, c2 = 0;
  for (const uint8_t* end = p + block; p < end; p += 8) {
    c0 = _mm_crc32_u64(c0, Load64(p));
    c1 = _mm_crc32_u64(c1, Load64(p + block));
    c2 = _mm_crc32_u64(c2, Load64(p + 2 * block));
  }
  c0 = shift(static_cast<uint32_t>(c0)) ^ c1;
  return shift(static_cast<uint32_t>(c0)) ^ c2;
}

}  // namespace

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const void* data,
                                                          size_t len) {
  static const ZeroShift long_shift(kLongBlock);
  static const ZeroShift short_shift(kShortBlock);
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c32 = ~crc;
  // Byte steps up to 8-byte alignment keep the 8-byte loads aligned.
  while (len > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c32 = _mm_crc32_u8(c32, *p++);
    --len;
  }
  uint64_t c = c32;
  for (; len >= 3 * kLongBlock; p += 3 * kLongBlock, len -= 3 * kLongBlock) {
    c = ThreeStreams(c, p, kLongBlock, long_shift);
  }
  for (; len >= 3 * kShortBlock; p += 3 * kShortBlock, len -= 3 * kShortBlock) {
    c = ThreeStreams(c, p, kShortBlock, short_shift);
  }
  for (; len >= 8; p += 8, len -= 8) c = _mm_crc32_u64(c, Load64(p));
  c32 = static_cast<uint32_t>(c);
  while (len--) c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}
#else
bool HardwareAvailable() { return false; }
uint32_t ExtendHardware(uint32_t, const void*, size_t) { std::abort(); }
#endif

}  // namespace crc32c_internal

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t len) {
  static const bool hw = crc32c_internal::HardwareAvailable();
  if (hw) return crc32c_internal::ExtendHardware(crc, data, len);
  return crc32c_internal::ExtendPortable(crc, data, len);
}

}  // namespace stoker
