// The MoE combine's per-float4 arithmetic, shared by moe_combine_kernel (layer_ops.cu) and the
// mHC post that makes the MoE output in its own pass (mhc.cu): one definition, the same bits.
#pragma once

#include <cstdint>

namespace deepinfer::cuda::detail {

// The MoE output's float4 at (token t, columns e..e+3): the top-k expert rows y[slot_pos[t, j]]
// times their weights, summed in j order from 0, then added to the shared expert's row (if any).
// moe_combine_kernel and the fused hc_post_kernel<true> both call it: the same bits.
struct MoeCombineIn {
  const float* y;
  const int32_t* slot_pos;
  const float* w;
  const float* shared;
  int k;
};
__device__ __forceinline__ float4 moe_combine4(const MoeCombineIn& c, int64_t t, int d, int e) {
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int j = 0; j < c.k; ++j) {
    const float wj = c.w[t * c.k + j];
    const float4 v = *reinterpret_cast<const float4*>(c.y + int64_t(c.slot_pos[t * c.k + j]) * d + e);
    acc.x += v.x * wj, acc.y += v.y * wj, acc.z += v.z * wj, acc.w += v.w * wj;
  }
  float4 o = c.shared ? *reinterpret_cast<const float4*>(c.shared + t * d + e) : make_float4(0.f, 0.f, 0.f, 0.f);
  o.x += acc.x, o.y += acc.y, o.z += acc.z, o.w += acc.w;
  return o;
}

}  // namespace deepinfer::cuda::detail
