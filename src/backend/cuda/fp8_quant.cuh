// FP8 activation quantisation of one 128-column block by one warp (device code only; never
// included outside backend/cuda): the reference's act_quant rule, shared by quantize_act_fp8
// (elementwise.cu), the FP8 expert rows (mxfp4_fp8.cu) and the decode attention merge's e4m3
// output (attention_decode.cu).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace deepinfer::cuda::detail {

/// The FP8 expert kernels' column order (mxfp4_fp8.cu): lane j's 4 columns of a 128-column block
/// (quant4_e4m3_pow2's packed word) go to the block's word 8 q + 4 h + t, j = 8 t + 2 q + h.
__device__ __forceinline__ int fp8_expert_word(int lane) { return 8 * ((lane >> 1) & 3) + 4 * (lane & 1) + (lane >> 3); }

/// Four bf16 (little-endian, first in the low half of raw.x) as floats: exact.
__device__ __forceinline__ void bf16x4_to_float(uint2 raw, float (&v)[4]) {
  v[0] = __uint_as_float(raw.x << 16), v[1] = __uint_as_float(raw.x & 0xffff0000u);
  v[2] = __uint_as_float(raw.y << 16), v[3] = __uint_as_float(raw.y & 0xffff0000u);
}

/// Lane j holds columns 4j..4j+3 of the block in v; packed gets their e4m3 codes (column 4j + i in
/// byte i) and the return value is the block's scale s = 2^ceil(log2(max(amax, 1e-4) / 448)),
/// computed exactly from the binary exponent (code = e4m3(v / s), saturating). All 32 lanes call.
__device__ __forceinline__ float quant4_e4m3_pow2(const float (&v)[4], uint32_t& packed) {
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float r = fmaxf(amax, 1e-4f) / 448.0f;
  int e;
  const float m = frexpf(r, &e);  // r = m * 2^e, m in [0.5, 1)
  const int c = (m == 0.5f) ? e - 1 : e;
  const float s = ldexpf(1.0f, c), inv = ldexpf(1.0f, -c);
  packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_fp8_storage_t b = __nv_cvt_float_to_fp8(v[i] * inv, __NV_SATFINITE, __NV_E4M3);
    packed |= static_cast<uint32_t>(b) << (8 * i);
  }
  return s;
}

}  // namespace deepinfer::cuda::detail
