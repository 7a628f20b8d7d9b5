#include "model/numerics.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace deepinfer::numerics {

namespace {
// RNE of a >= 0 onto a binary float grid with `mant` mantissa bits and minimum normal exponent
// `emin` (below it the quantum stays 2^(emin - mant)). Computed in double: exact for f32 inputs.
double round_grid(double a, int mant, int emin) {
  if (a == 0) return 0;
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): floor(log2 a) = e - 1
  const int fl = std::max(e - 1, emin);
  const double q = std::ldexp(1.0, fl - mant);
  return std::nearbyint(a / q) * q;  // default rounding mode: half to even
}
}  // namespace

float round_e4m3(float x) {
  const double a = std::min(std::fabs(static_cast<double>(x)), 448.0);
  return static_cast<float>(std::copysign(round_grid(a, 3, -6), x));
}

float round_e2m1(float x) {
  const double a = std::min(std::fabs(static_cast<double>(x)), 6.0);
  return static_cast<float>(std::copysign(round_grid(a, 1, 0), x));
}

float pow2_ceil(float t) {
  int e = 0;
  const double m = std::frexp(static_cast<double>(t), &e);
  return static_cast<float>(std::ldexp(1.0, m == 0.5 ? e - 1 : e));
}

float fp8_scale(float amax) { return pow2_ceil(std::max(amax, 1e-4f) / 448.f); }
float fp4_scale(float amax) { return pow2_ceil(std::max(amax, 6.f * std::ldexp(1.f, -126)) / 6.f); }
float fp4_scale_e4m3(float amax) { return round_e4m3(std::max(amax, 6.f * std::ldexp(1.f, -9)) / 6.f); }

void fake_fp8(float* x, int64_t n, int64_t block) {
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min(n, b0 + block);
    float amax = 0.f;
    for (int64_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = fp8_scale(amax);  // a power of two: x / s and q * s are exact
    for (int64_t i = b0; i < b1; ++i) x[i] = round_e4m3(x[i] / s) * s;
  }
}

void fake_fp4(float* x, int64_t n, int64_t block, bool e4m3_scale) {
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min(n, b0 + block);
    float amax = 0.f;
    for (int64_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = e4m3_scale ? fp4_scale_e4m3(amax) : fp4_scale(amax);
    for (int64_t i = b0; i < b1; ++i) x[i] = round_e2m1(x[i] / s) * s;
  }
}

void fake_fp8_rows(float* x, int64_t rows, int64_t n, int64_t block) {
  for (int64_t r = 0; r < rows; ++r) fake_fp8(x + r * n, n, block);
}
void fake_fp4_rows(float* x, int64_t rows, int64_t n, int64_t block, bool e4m3_scale) {
  for (int64_t r = 0; r < rows; ++r) fake_fp4(x + r * n, n, block, e4m3_scale);
}

void hadamard(float* x, int64_t n) {
  assert(n > 0 && (n & (n - 1)) == 0);
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  const float s = 1.f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace deepinfer::numerics
