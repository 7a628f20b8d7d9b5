// Small per-lane float helpers shared by the fp32 CUDA kernels (mhc.cu, moe_route.cu), each
// with one fixed order of operations (the kernels' bitwise invariances rest on it). Device code
// only; never included outside backend/cuda.
#pragma once

#include <cuda_runtime.h>

namespace deepinfer::cuda::detail {

/// The sum of v over the warp by the xor tree 16, 8, 4, 2, 1: every lane returns the same bits.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// acc + a.x b.x + a.y b.y + a.z b.z + a.w b.w, one fmaf at a time in that order.
__device__ __forceinline__ float fma4(float4 a, float4 b, float acc) {
  acc = __fmaf_rn(a.x, b.x, acc);
  acc = __fmaf_rn(a.y, b.y, acc);
  acc = __fmaf_rn(a.z, b.z, acc);
  return __fmaf_rn(a.w, b.w, acc);
}

}  // namespace deepinfer::cuda::detail
