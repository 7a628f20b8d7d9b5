// One row's RMSNorm by a block of 256 threads, in the fixed order every norm kernel uses (so their
// outputs agree bit for bit), and the same row's FP8 / bf16 forms in the pass that writes it:
// rms_norm_pack_kernel (elementwise.cu) and the mHC pre's fused form (hc_finish_kernel,
// mhc.cu). Device code only; never included outside backend/cuda.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/fp8_quant.cuh"

namespace deepinfer::cuda::detail {

/// A row's 1 / rms by a block of 256 threads in a fixed order (strided fmaf partials, then a
/// fixed tree). Every thread of the block must call it.
__device__ __forceinline__ float row_rsqrt_mean_sq(const float* __restrict__ xi, int64_t d, float eps) {
  __shared__ float red[256];
  float acc = 0.f;
  for (int64_t k = threadIdx.x; k < d; k += 256) acc = fmaf(xi[k], xi[k], acc);
  red[threadIdx.x] = acc;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  return rsqrtf(red[0] / static_cast<float>(d) + eps);
}

/// Row `row` (of n) of y = w * (x * r) (r = row_rsqrt_mean_sq; no w: unweighted) and, in the same
/// pass, its FP8 activation q (quant_act_kernel's bits; scales row-major [row * d/128 + kb] or
/// K-block-major [kb * n + row]) and / or its bf16 copy y16 (cast_bf16_kernel's rounding). Warp w
/// handles the 128-column blocks kb_begin + w, + 8, ... below kb_end (default: the whole row); lane
/// j their columns 4j..4j+3 (xi may be a shared-memory copy of the row: r reads all of it, the
/// forms only [kb_begin, kb_end)); column c's weight is w[c - w_off] (w may hold just those
/// columns, e.g. in shared memory). qe / qes: the same e4m3 values in the FP8 expert kernels'
/// column order (fp8_expert_word, moe_rows_fp8's bits) with K-block-major scales [kb * n + row].
/// d % 128 == 0; a block of 256 threads, all calling it.
__device__ __forceinline__ void norm_pack_row(const float* __restrict__ xi, int64_t row, int64_t n, int64_t d,
                                              const float* __restrict__ w, float eps, float* __restrict__ y,
                                              uint8_t* __restrict__ q, float* __restrict__ scales, bool scales_t,
                                              uint16_t* __restrict__ y16, int64_t kb_begin = 0,
                                              int64_t kb_end = -1, int64_t w_off = 0, uint8_t* __restrict__ qe = nullptr,
                                              float* __restrict__ qes = nullptr) {
  const float r = row_rsqrt_mean_sq(xi, d, eps);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t nkb = d / 128, kb_stop = kb_end < 0 ? nkb : kb_end;
  for (int64_t kb = kb_begin + warp; kb < kb_stop; kb += 8) {
    const int64_t c = kb * 128 + lane * 4;
    const float4 xv = *reinterpret_cast<const float4*>(xi + c);
    float v[4] = {xv.x * r, xv.y * r, xv.z * r, xv.w * r};
    if (w) {
      const float4 wv = *reinterpret_cast<const float4*>(w + (c - w_off));
      v[0] = wv.x * v[0], v[1] = wv.y * v[1], v[2] = wv.z * v[2], v[3] = wv.w * v[3];
    }
    *reinterpret_cast<float4*>(y + row * d + c) = make_float4(v[0], v[1], v[2], v[3]);
    if (y16) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]), hi = __floats2bfloat162_rn(v[2], v[3]);
      uint2 packed16;
      packed16.x = *reinterpret_cast<const uint32_t*>(&lo);
      packed16.y = *reinterpret_cast<const uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(y16 + row * d + c) = packed16;
    }
    if (q || qe) {
      uint32_t packed;
      const float s = quant4_e4m3_pow2(v, packed);
      if (q) {
        *reinterpret_cast<uint32_t*>(q + row * d + c) = packed;
        if (lane == 0) scales[scales_t ? kb * n + row : row * nkb + kb] = s;
      }
      if (qe) {
        *reinterpret_cast<uint32_t*>(qe + row * d + kb * 128 + fp8_expert_word(lane) * 4) = packed;
        if (lane == 0) qes[kb * n + row] = s;
      }
    }
  }
}

}  // namespace deepinfer::cuda::detail
