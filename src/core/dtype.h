// Element types as stored in checkpoints, their sizes, names (safetensors spelling) and scalar
// conversions to float. Packed FP4 (MXFP4, e2m1) is stored as I8/U8 bytes, two codes per byte.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace deepinfer {

enum class DType : uint8_t { kF32, kF16, kBF16, kF8E4M3, kF8E8M0, kI64, kI32, kI8, kU8, kBool };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "F32", "BF16", "F8_E4M3", ...
std::optional<DType> dtype_from_name(std::string_view name);

inline float bf16_to_f32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Round-to-nearest-even float -> bf16 (NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

/// OCP FP8 e4m3fn: bias 7, no infinities, 0x7f/0xff are NaN, max 448.
inline float e4m3_to_f32(uint8_t b) {
  const uint32_t sign = b >> 7, exp = (b >> 3) & 0xfu, man = b & 0x7u;
  float v;
  if (exp == 0xf && man == 0x7) v = NAN;
  else if (exp == 0) v = std::ldexp(static_cast<float>(man), -9);
  else v = std::ldexp(static_cast<float>(man | 0x8u), static_cast<int>(exp) - 10);
  return sign ? -v : v;
}

/// E8M0 (ue8m0): a power of two 2^(e-127); 0xff is NaN.
inline float e8m0_to_f32(uint8_t e) {
  if (e == 0xff) return NAN;
  return std::ldexp(1.0f, static_cast<int>(e) - 127);
}

/// e2m1 code (low 4 bits) -> value: [0, .5, 1, 1.5, 2, 3, 4, 6] and their negatives.
inline float e2m1_to_f32(uint8_t code) {
  static constexpr float kLut[16] = {0.f,  0.5f,  1.f,  1.5f,  2.f,  3.f,  4.f,  6.f,
                                     -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};
  return kLut[code & 0xf];
}

}  // namespace deepinfer
