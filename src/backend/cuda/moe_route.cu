// MoE routing (layer_ops.h): router logits h . gate^T in one fixed per-lane order for every tile
// shape (so decode and prefill batches give the same bits), then sqrt-softplus scores, the
// bias-corrected top-k and the weights.
#include <atomic>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/lane_math.cuh"
#include "backend/cuda/layer_ops.h"
#include "backend/cuda/mma_common.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;
using detail::fma4;
using detail::warp_sum;

namespace {

// logits[t, e] = h[t] . gate[e] in one order for every tile shape: lane l (of 32) accumulates
// with fmaf, in order, columns k0 + l*8 + 0..7 for k0 = 0, 256, ..., then the warp's xor tree
// 16..1. A warp holds TM tokens x TN experts; a block is WM x WN warps (at most 8). The tile only
// changes reuse, never the bits, so the decode and prefill shapes give identical logits.
template <int TM, int TN, int WM, int WN>
__global__ void __launch_bounds__(32 * WM * WN) router_logits_kernel(const float* __restrict__ h, int T, int d,
                                                                     const uint16_t* __restrict__ gate, int E,
                                                                     float* __restrict__ logits) {
  detail::pdl_entry();
  static_assert(WM * WN <= 8, "at most 8 warps");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t0 = (blockIdx.y * WM + warp / WN) * TM, e0 = (blockIdx.x * WN + warp % WN) * TN;
  const float* hr = h + lane * 8;
  const uint16_t* gr = gate + int64_t(e0) * d + lane * 8;
  int64_t ho[TM];
#pragma unroll
  for (int i = 0; i < TM; ++i) ho[i] = int64_t(min(t0 + i, T - 1)) * d;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  constexpr int kUnroll = TM * TN == 1 ? 8 : TM * TN <= 16 ? 4 : 1;  // small tiles: several k steps' loads in flight
#pragma unroll kUnroll
  for (int k = 0; k < d; k += 256) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float4 w[TN];
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const uint2 g = __ldg(reinterpret_cast<const uint2*>(gr + int64_t(j) * d + k + 4 * half));
        w[j] = make_float4(__uint_as_float(g.x << 16), __uint_as_float(g.x & 0xffff0000u), __uint_as_float(g.y << 16),
                           __uint_as_float(g.y & 0xffff0000u));
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const float4 a = *reinterpret_cast<const float4*>(hr + ho[i] + k + 4 * half);
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fma4(a, w[j], acc[i][j]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const float s = warp_sum(acc[i][j]);  // every lane holds the same bits
      if (lane == (i * TN + j) % 32 && t0 + i < T) logits[int64_t(t0 + i) * E + e0 + j] = s;
    }
}


// The same per-lane order from a shared-memory ring: the block's WM x TM tokens' 256 columns
// (fp32) and its WN x TN experts' 256 gate columns (bf16) of k step s in stage s % S, filled by
// cp.async S - 1 steps ahead. In router_logits_kernel each warp read its tokens' rows itself from
// global: the 8 warps of a block (8 experts) re-read the same 8 rows, 128 MB through L2 for the
// EP step's 256 tokens x 32 experts (24 us on the H100); here each row is read once per block.
// A lane's values (columns l*8 .. l*8+7 of each step) and its fmaf order are router_logits_kernel's,
// so every tile gives the same bits as the direct kernel. Token float4 f of a row sits at slot
// f ^ ((f >> 3) & 1) (lanes read float4s 2l and 2l + 1: 32 bytes apart, two-way bank conflicts
// without the swap); a lane reads its 16 gate bytes of a row in one load.
template <int TM, int TN, int WM, int WN>
struct RouteRing {
  static constexpr int kTok = TM * WM, kExp = TN * WN;
  static constexpr int kStage = kTok * 1024 + kExp * 512;
  static constexpr int kStages = 96 * 1024 / kStage < 3 ? 3 : 96 * 1024 / kStage > 8 ? 8 : 96 * 1024 / kStage;
  static constexpr int kBytes = kStages * kStage;
};
template <int TM, int TN, int WM, int WN>
__global__ void __launch_bounds__(256) router_logits_staged_kernel(const float* __restrict__ h, int T, int d,
                                                                   const uint16_t* __restrict__ gate, int E,
                                                                   float* __restrict__ logits) {
  detail::pdl_entry();
  static_assert(WM * WN == 8, "8 warps");
  using R = RouteRing<TM, TN, WM, WN>;
  constexpr int S = R::kStages;
  extern __shared__ __align__(16) unsigned char route_smem[];
  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(route_smem));
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int bt0 = blockIdx.y * R::kTok, be0 = blockIdx.x * R::kExp;
  const int steps = d / 256;
  // Stage fill of k step s: chunk q < kTok * 64 is token q / 64's float4 q % 64, else gate row
  // (q - kTok * 64) / 32's 16-byte chunk.
  auto issue = [&](int s) {
    if (s < steps) {
      const uint32_t st = sbase + (s % S) * R::kStage;
      for (int q = tid; q < R::kTok * 64 + R::kExp * 32; q += 256) {
        if (q < R::kTok * 64) {
          const int i = q >> 6, f = q & 63;
          const float* src = h + int64_t(min(bt0 + i, T - 1)) * d + s * 256 + 4 * f;
          detail::cp_async16(st + i * 1024 + ((f ^ ((f >> 3) & 1)) << 4), src);
        } else {
          const int g = q - R::kTok * 64, j = g >> 5, c = g & 31;
          detail::cp_async16(st + R::kTok * 1024 + j * 512 + c * 16, gate + int64_t(be0 + j) * d + s * 256 + 8 * c);
        }
      }
    }
    detail::cp_commit();
  };
#pragma unroll 1
  for (int s = 0; s < S - 1; ++s) issue(s);
  const int wt = (warp / WN) * TM, we = (warp % WN) * TN;  // the warp's first token / expert in the block
  const int f0 = 2 * lane, f1 = 2 * lane + 1;
  const uint32_t ho0 = ((f0 ^ ((f0 >> 3) & 1)) << 4), ho1 = ((f1 ^ ((f1 >> 3) & 1)) << 4);
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
#pragma unroll 1
  for (int s = 0; s < steps; ++s) {
    detail::cp_wait<S - 2>();
    __syncthreads();  // step s in for all; every warp past step s - 1, whose stage is refilled now
    issue(s + S - 1);
    const uint32_t st = sbase + (s % S) * R::kStage;
    uint4 g[TN];
#pragma unroll
    for (int j = 0; j < TN; ++j) g[j] = detail::lds_u4(st + R::kTok * 1024 + (we + j) * 512 + lane * 16);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float4 w[TN];
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const uint32_t gx = half ? g[j].z : g[j].x, gy = half ? g[j].w : g[j].y;
        w[j] = make_float4(__uint_as_float(gx << 16), __uint_as_float(gx & 0xffff0000u), __uint_as_float(gy << 16),
                           __uint_as_float(gy & 0xffff0000u));
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const uint4 av = detail::lds_u4(st + (wt + i) * 1024 + (half ? ho1 : ho0));
        const float4 a = make_float4(__uint_as_float(av.x), __uint_as_float(av.y), __uint_as_float(av.z),
                                     __uint_as_float(av.w));
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fma4(a, w[j], acc[i][j]);
      }
    }
  }
  detail::cp_wait<0>();
  const int t0 = bt0 + wt, e0 = be0 + we;
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const float sum = warp_sum(acc[i][j]);  // every lane holds the same bits
      if (lane == (i * TN + j) % 32 && t0 + i < T) logits[int64_t(t0 + i) * E + e0 + j] = sum;
    }
}

__device__ __forceinline__ bool better(float ka, int ia, float kb, int ib) {
  return ka > kb || (ka == kb && ia < ib);
}

// One block (256 threads) per token.
__global__ void __launch_bounds__(256) router_topk_kernel(const float* __restrict__ logits, int E,
                                                          const float* __restrict__ bias, int k, float scaling,
                                                          int32_t* __restrict__ experts, float* __restrict__ weights) {
  detail::pdl_entry();
  __shared__ float score[1024];
  __shared__ float wk[8];
  __shared__ int wi[8];
  __shared__ int chosen[16];
  const int t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float key[4];
  bool taken[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int e = threadIdx.x + 256 * i;
    key[i] = -INFINITY;
    taken[i] = e >= E;
    if (e < E) {
      const float x = logits[int64_t(t) * E + e];
      const float sp = x > 20.f ? x : log1pf(expf(x));
      const float s = sqrtf(sp);
      score[e] = s;
      key[i] = s + (bias ? bias[e] : 0.f);
    }
  }
  for (int r = 0; r < k; ++r) {
    float bk = -INFINITY;
    int bi = INT_MAX;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = threadIdx.x + 256 * i;
      if (!taken[i] && better(key[i], e, bk, bi)) bk = key[i], bi = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ok = __shfl_xor_sync(0xffffffffu, bk, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (better(ok, oi, bk, bi)) bk = ok, bi = oi;
    }
    if (lane == 0) wk[warp] = bk, wi[warp] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
      float ck = wk[0];
      int ci = wi[0];
      for (int w = 1; w < 8; ++w)
        if (better(wk[w], wi[w], ck, ci)) ck = wk[w], ci = wi[w];
      chosen[r] = ci;
    }
    __syncthreads();
    const int c = chosen[r];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (threadIdx.x + 256 * i == c) taken[i] = true, key[i] = -INFINITY;
  }
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int r = 0; r < k; ++r) sum += score[chosen[r]];
    for (int r = 0; r < k; ++r) {
      experts[t * k + r] = chosen[r];
      weights[t * k + r] = score[chosen[r]] / sum * scaling;
    }
  }
}


// The staged kernel with its ring's shared memory (the limit raised once per device).
template <int TM, int TN, int WM, int WN>
bool launch_staged(const float* h, int T, int d, const uint16_t* gate, int E, float* logits, cudaStream_t s) {
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel = router_logits_staged_kernel<TM, TN, WM, WN>;
  constexpr int bytes = RouteRing<TM, TN, WM, WN>::kBytes;
  if (!detail::max_dynamic_smem_once(reinterpret_cast<const void*>(kernel), bytes, smem_set,
                                     "moe_route: shared-memory size"))
    return false;
  constexpr int tok = TM * WM, ex = TN * WN;
  detail::launch_pdl(kernel, dim3(static_cast<unsigned>(E / ex), static_cast<unsigned>((T + tok - 1) / tok)), 256, bytes,
                     s, h, T, d, gate, E, logits);
  return check_launch("router_logits_staged_kernel");
}

// Hash-routed layers: the k experts come from the token id, so only their k logits are needed (not
// all E): warp j makes expert tid2eid[id, j]'s logit in router_logits_kernel's per-lane order (the
// same bits), then warp 0 the weights as hash_route does. The gate rows are loaded before the PDL
// wait (the ids were uploaded before the step; gate and tid2eid are weights).
constexpr int kHashMaxD = 4096;  // hash_route_direct_fits
static_assert(hash_route_direct_fits(kHashMaxD, 16) && !hash_route_direct_fits(kHashMaxD + 256, 16));
__global__ void __launch_bounds__(32 * 16) hash_route_direct_kernel(const float* __restrict__ h, int d,
                                                                    const uint16_t* __restrict__ gate,
                                                                    const int32_t* __restrict__ ids,
                                                                    const int32_t* __restrict__ tid2eid, int k,
                                                                    float scale, int32_t* __restrict__ experts,
                                                                    float* __restrict__ weights) {
  __shared__ float sc[16];
  const int t = blockIdx.x, j = threadIdx.x >> 5, lane = threadIdx.x & 31, steps = d / 256;
  const int32_t e = tid2eid[int64_t(ids[t]) * k + j];
  if (!h) {  // the experts alone: they need no activation, so no wait either
    if (lane == 0) experts[int64_t(t) * k + j] = e;
    detail::pdl_trigger();
    return;
  }
  const uint16_t* gr = gate + int64_t(e) * d + lane * 8;
  uint2 g[kHashMaxD / 256][2];
#pragma unroll
  for (int i = 0; i < kHashMaxD / 256; ++i)
    if (i < steps)
#pragma unroll
      for (int half = 0; half < 2; ++half) g[i][half] = __ldg(reinterpret_cast<const uint2*>(gr + i * 256 + 4 * half));
  detail::pdl_wait();  // h comes from the kernels before
  detail::pdl_trigger_one_wave();
  const float* hr = h + int64_t(t) * d + lane * 8;
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < kHashMaxD / 256; ++i) {
    if (i >= steps) break;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint2 v = g[i][half];
      const float4 w = make_float4(__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xffff0000u),
                                   __uint_as_float(v.y << 16), __uint_as_float(v.y & 0xffff0000u));
      acc = fma4(*reinterpret_cast<const float4*>(hr + i * 256 + 4 * half), w, acc);
    }
  }
  const float l = warp_sum(acc);
  if (lane == 0) {
    const float sp = l > 20.f ? l : log1pf(expf(l));
    sc[j] = sqrtf(sp);
    if (experts) experts[int64_t(t) * k + j] = e;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int i = 0; i < k; ++i) sum += sc[i];
    for (int i = 0; i < k; ++i) weights[int64_t(t) * k + i] = sc[i] / sum * scale;
  }
}

}  // namespace

bool hash_route_direct(const float* h, int64_t T, int64_t d, const uint16_t* gate, const int32_t* ids,
                       const int32_t* tid2eid, int k, float scaling, int32_t* experts, float* weights, void* stream) {
  if (!hash_route_direct_fits(d, k))
    return fail("hash_route_direct: need d % 256 == 0, d <= 4096, 1 <= k <= 16 (d " + std::to_string(d) + ", k " +
                std::to_string(k) + ")");
  if (T <= 0) return true;
  if (T > 0x7fffffff) return fail("hash_route_direct: T too large");
  if (!ids || !tid2eid || (!h && !experts) || (h && (!gate || !weights))) return fail("hash_route_direct: null argument");
  detail::launch_pdl(hash_route_direct_kernel, static_cast<unsigned>(T), 32 * k, 0, as_stream(stream), h,
                     static_cast<int>(d), gate, ids, tid2eid, k, scaling, experts, weights);
  return check_launch("hash_route_direct_kernel");
}

bool moe_route(const float* h, int64_t T, int64_t d, const uint16_t* gate, int64_t E, const float* bias, int k,
               float scaling, float* logits_ws, int32_t* experts, float* weights, void* stream) {
  if (d % 256 || E % 8 || E > 1024 || k > 16 || k > E) return fail("moe_route: need d % 256 == 0, E % 8 == 0, E <= 1024, k <= 16");
  if (T <= 0) return true;
  if (!h || !gate || !logits_ws || !experts != !weights) return fail("moe_route: null argument");
  const cudaStream_t s = as_stream(stream);
  const int Ti = static_cast<int>(T), di = static_cast<int>(d), Ei = static_cast<int>(E);
  // Same bits from every shape (router_logits_kernel and the staged kernel): pick by reuse only,
  // the widest tile whose grid still has a block per SM (the EP slice's 32 experts at 256 tokens
  // took 8 x 32 tiles: 32 blocks, 26 us on the H100, ncu). Past 8 tokens the staged kernel (each
  // token row read once per block); decode batches of up to 8 the direct one, whose 8 k steps'
  // loads in flight per warp suit a block of one token.
  const int64_t sms = detail::sm_count();
  auto fills = [&](int64_t tok, int64_t ex) { return (E / ex) * ((T + tok - 1) / tok) >= sms; };
  bool ok;
  if (T > 256 && E % 32 == 0 && fills(16, 32)) {  // 16 tokens x 32 experts per block
    ok = launch_staged<8, 8, 2, 4>(h, Ti, di, gate, Ei, logits_ws, s);
  } else if (T > 64 && E % 32 == 0 && fills(8, 32)) {  // 8 x 32
    ok = launch_staged<8, 4, 1, 8>(h, Ti, di, gate, Ei, logits_ws, s);
  } else if (T > 8 && E % 16 == 0 && fills(8, 16)) {  // 8 x 16
    ok = launch_staged<8, 2, 1, 8>(h, Ti, di, gate, Ei, logits_ws, s);
  } else if (T > 8) {  // 8 x 8 (one expert per warp)
    ok = launch_staged<8, 1, 1, 8>(h, Ti, di, gate, Ei, logits_ws, s);
  } else {  // decode: 1 x 2 (one token and expert per warp, 8 k steps' loads in flight), T x E/2 blocks of 2
    // warps: E/8 blocks of 8 (the EP slice's 32 experts: 4 blocks a token) put a token's gate and
    // its h re-reads on a few SMs (7.9 us for the 2 MB gate at batch 1, H100 ncu).
    detail::launch_pdl(router_logits_kernel<1, 1, 1, 2>, dim3(static_cast<unsigned>(E / 2), static_cast<unsigned>(T)), 64, 0, s, h, Ti, di, gate, Ei, logits_ws);
    ok = check_launch("router_logits_kernel");
  }
  if (!ok) return false;
  if (!experts && !weights) return true;  // the logits only
  return moe_route_from_logits(logits_ws, T, E, bias, k, scaling, experts, weights, stream);
}

bool moe_route_from_logits(const float* logits, int64_t T, int64_t E, const float* bias, int k, float scaling,
                           int32_t* experts, float* weights, void* stream) {
  if (E > 1024 || k > 16 || k > E) return fail("moe_route_from_logits: need E <= 1024, k <= 16, k <= E");
  if (T <= 0) return true;
  if (!logits || !experts || !weights) return fail("moe_route_from_logits: null argument");
  detail::launch_pdl(router_topk_kernel, static_cast<unsigned>(T), 256, 0, as_stream(stream), logits,
                     static_cast<int>(E), bias, k, scaling, experts, weights);
  return check_launch("router_topk_kernel");
}

}  // namespace deepinfer::cuda
