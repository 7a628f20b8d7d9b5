// Test utility: reference encoders/decoders for the checkpoint number formats, written from the
// format definitions (not from src/core/dtype.h) so tests can check the engine against them.
//   e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa; no infinities; S.1111.111 is NaN; max 448.
//   e8m0:   an unsigned power of two 2^(e-127); 0xff is NaN.
//   e2m1:   1 sign, 2 exponent (bias 1), 1 mantissa: 0, .5, 1, 1.5, 2, 3, 4, 6.
//   bf16:   the top 16 bits of an IEEE float, rounded to nearest even.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace deepinfer::testing {

/// e4m3fn code -> value, in double, straight from the definition.
inline double ref_e4m3(uint8_t code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? (m / 8.0) * std::pow(2.0, -6) : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -mag : mag;
}

/// Nearest e4m3fn code to x (ties to the even code), saturating at +-448.
inline uint8_t ref_encode_e4m3(double x) {
  static const auto table = [] {  // the 127 non-negative finite values, ascending with the code
    std::array<double, 127> t{};
    for (int c = 0; c < 127; ++c) t[c] = ref_e4m3(static_cast<uint8_t>(c));
    return t;
  }();
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(x);
  const int hi = static_cast<int>(std::lower_bound(table.begin(), table.end(), a) - table.begin());
  if (hi == 127) return 126 | sign;  // saturate
  if (hi == 0) return sign;
  const double dl = a - table[hi - 1], dh = table[hi] - a;
  const int c = dl < dh ? hi - 1 : dh < dl ? hi : ((hi - 1) % 2 == 0 ? hi - 1 : hi);
  return static_cast<uint8_t>(c) | sign;
}

inline double ref_e8m0(uint8_t e) {
  return e == 0xff ? std::numeric_limits<double>::quiet_NaN() : std::pow(2.0, e - 127);
}

inline double ref_e2m1(uint8_t code) {
  const int s = (code >> 3) & 1, e = (code >> 1) & 3, m = code & 1;
  const double mag = e == 0 ? m * 0.5 : (1.0 + m / 2.0) * std::pow(2.0, e - 1);
  return s ? -mag : mag;
}

/// Nearest e2m1 code (ties to the even code), saturating at +-6.
inline uint8_t ref_encode_e2m1(double x) {
  const uint8_t sign = std::signbit(x) ? 8 : 0;
  const double a = std::fabs(x);
  uint8_t best = 0;
  double best_d = INFINITY;
  for (int c = 0; c < 8; ++c) {
    const double d = std::fabs(ref_e2m1(static_cast<uint8_t>(c)) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = static_cast<uint8_t>(c), best_d = d;
  }
  return best | sign;
}

/// bf16 bits -> float.
inline float ref_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Nearest bf16 (ties to even), choosing between the two neighbours by exact double arithmetic.
inline uint16_t ref_encode_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);  // towards zero
  if ((u & 0xffff) == 0) return lo;
  const uint16_t hi = static_cast<uint16_t>(lo + 1);  // away from zero (may be inf)
  // Value of `hi`; infinity counts as 2^128 (the next step after the largest finite bf16).
  const double vh = std::isinf(ref_bf16(hi)) ? std::copysign(std::ldexp(1.0, 128), f) : ref_bf16(hi);
  const double dl = std::fabs(static_cast<double>(f) - ref_bf16(lo));
  const double dh = std::fabs(static_cast<double>(f) - vh);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

}  // namespace deepinfer::testing
