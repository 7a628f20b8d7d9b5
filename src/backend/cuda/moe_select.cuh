// The MoE's expert selection from the router's logits, as device functions shared by the kernels
// that run it (router_topk_kernel in moe_route.cu, hash_route_kernel in v4_ops.cu, and
// moe_groups_kernel in layer_ops.cu when the grouping makes the selection in its own launch), so
// that every path computes each score and weight with the same expressions (the same bits).
// Device code only; never included outside backend/cuda.
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>

namespace deepinfer::cuda::detail {

/// A router score: sqrt(softplus(logit)).
__device__ __forceinline__ float route_score(float x) { return sqrtf(x > 20.f ? x : log1pf(expf(x))); }

/// The selection order: the larger key first, the lower expert index on ties.
__device__ __forceinline__ bool route_better(float ka, int ia, float kb, int ib) {
  return ka > kb || (ka == kb && ia < ib);
}

/// Hash routing of token t by one thread: experts[t, j] = tid2eid[ids[t] * k + j], weights their
/// scores / the sum of the k scores (in j order) * scale.
__device__ __forceinline__ void hash_route_token(const float* logits, int64_t E, const int32_t* ids,
                                                 const int32_t* tid2eid, int k, float scale, int64_t t,
                                                 int32_t* experts, float* weights) {
  float sum = 0.f;
  for (int j = 0; j < k; ++j) {
    const int32_t e = tid2eid[int64_t(ids[t]) * k + j];
    const float s = route_score(logits[t * E + e]);
    experts[t * k + j] = e;
    weights[t * k + j] = s;
    sum += s;
  }
  for (int j = 0; j < k; ++j) weights[t * k + j] = weights[t * k + j] / sum * scale;
}

/// Top-k of token t by one warp (E <= 32 * kMaxPerLane): lane l holds experts l, l + 32, ...; k
/// rounds of the warp's best (key = score + bias) not yet taken, in route_better's order, so the
/// picks and their order are router_topk_kernel's; every lane returns them in chosen[0..k-1] and
/// the weights (scores / their sum in pick order * scaling) go to weights[t, :] (lane 0).
template <int kMaxPerLane>
__device__ __forceinline__ void topk_warp_token(const float* logits, int E, const float* bias, int k, float scaling,
                                                int64_t t, int32_t* chosen, float* weights) {
  const int lane = threadIdx.x & 31;
  float key[kMaxPerLane], score[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int e = lane + 32 * i;
    key[i] = -INFINITY, score[i] = 0.f;
    if (e < E) {
      score[i] = route_score(logits[t * E + e]);
      key[i] = score[i] + (bias ? bias[e] : 0.f);
    }
  }
  float picked[16];
  for (int r = 0; r < k; ++r) {
    float bk = -INFINITY, bs = 0.f;
    int bi = INT_MAX;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < E && key[i] != -INFINITY && route_better(key[i], e, bk, bi)) bk = key[i], bi = e, bs = score[i];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ok = __shfl_xor_sync(0xffffffffu, bk, o), os = __shfl_xor_sync(0xffffffffu, bs, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (route_better(ok, oi, bk, bi)) bk = ok, bi = oi, bs = os;
    }
    chosen[r] = bi;
    picked[r] = bs;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i)
      if (lane + 32 * i == bi) key[i] = -INFINITY;
  }
  if (lane == 0) {
    float sum = 0.f;
    for (int r = 0; r < k; ++r) sum += picked[r];
    for (int r = 0; r < k; ++r) weights[t * k + r] = picked[r] / sum * scaling;
  }
}

}  // namespace deepinfer::cuda::detail
