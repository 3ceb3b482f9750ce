// CRC-32C implementation. See crc32c.h.
#include "engine/util/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#endif

namespace tracedb::engine {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;

struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
  }
};

uint32_t SoftwareCrc(const unsigned char* p, size_t n, uint32_t crc) {
  static const Tables tables;
  const auto& t = tables.t;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= crc;
    crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^
          t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__)
uint32_t MulModP(uint32_t a, uint32_t b);
uint32_t XPow8N(uint64_t n);

// The crc32 instruction takes 3 cycles and can start every cycle: one chain of them runs at a
// third of the unit's speed. Long inputs go as three interleaved chains over three stripes of
// kStripe bytes, joined by multiplying the first two by x^(8 * 2 kStripe) and x^(8 kStripe)
// (the CRC register is linear: crc(A B) = crc(A) x^(8|B|) + crc_from_0(B)).
constexpr size_t kStripe = 4096;

__attribute__((target("sse4.2"))) uint32_t HardwareCrc(const unsigned char* p, size_t n,
                                                       uint32_t crc) {
  uint64_t c = crc;
  if (n >= 3 * kStripe) {
    static const uint32_t k1 = XPow8N(kStripe), k2 = XPow8N(2 * kStripe);
    do {
      uint64_t c1 = 0, c2 = 0;
      for (size_t i = 0; i < kStripe; i += 8) {
        uint64_t w0, w1, w2;
        std::memcpy(&w0, p + i, 8);
        std::memcpy(&w1, p + kStripe + i, 8);
        std::memcpy(&w2, p + 2 * kStripe + i, 8);
        c = _mm_crc32_u64(c, w0);
        c1 = _mm_crc32_u64(c1, w1);
        c2 = _mm_crc32_u64(c2, w2);
      }
      c = MulModP(k2, static_cast<uint32_t>(c)) ^ MulModP(k1, static_cast<uint32_t>(c1)) ^
          static_cast<uint32_t>(c2);
      p += 3 * kStripe;
      n -= 3 * kStripe;
    } while (n >= 3 * kStripe);
  }
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

bool HasSse42() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c & bit_SSE4_2) != 0;
}
#endif

// Polynomial arithmetic modulo the CRC polynomial, in the reflected bit order of the CRC: bit 31
// is the coefficient of x^0, bit 0 that of x^31.
constexpr uint32_t kXPow0 = 0x80000000u;  // the polynomial 1

// a * b mod P.
uint32_t MulModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = kXPow0; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;  // b *= x
  }
  return product;
}

// kPow2[k] = x^(2^k) mod P.
struct PowersOfX {
  std::array<uint32_t, 64> pow2{};
  PowersOfX() {
    pow2[0] = kXPow0 >> 1;  // x^1
    for (size_t k = 1; k < pow2.size(); ++k) pow2[k] = MulModP(pow2[k - 1], pow2[k - 1]);
  }
};

// x^(8 n) mod P.
uint32_t XPow8N(uint64_t n) {
  static const PowersOfX powers;
  uint32_t r = kXPow0;
  for (size_t k = 3; n != 0 && k < powers.pow2.size(); ++k, n >>= 1) {
    if (n & 1) r = MulModP(powers.pow2[k], r);
  }
  return r;
}

}  // namespace

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  // With the initial and final inversions of the CRC, they cancel out of the difference:
  // crc(A B) = crc(A) * x^(8|B|) + crc(B).
  return MulModP(XPow8N(len_b), crc_a) ^ crc_b;
}

uint32_t Crc32c(const void* data, size_t n, uint32_t init) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = ~init;
#if defined(__x86_64__)
  static const bool hw = HasSse42();
  crc = hw ? HardwareCrc(p, n, crc) : SoftwareCrc(p, n, crc);
#else
  crc = SoftwareCrc(p, n, crc);
#endif
  return ~crc;
}

}  // namespace tracedb::engine
