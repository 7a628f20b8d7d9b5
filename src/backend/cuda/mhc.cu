// mHC pre and post (layer_ops.h): the chunk partial sums of the mixes (prefill and decode kernels,
// one canonical order), the mix + Sinkhorn + collapse (one kernel per token below 1,025 tokens,
// with the sub-layer's norm; a mix kernel and a collapse kernel above), and the post, alone or
// with the MoE combine.
#include <algorithm>
#include <atomic>
#include <climits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/lane_math.cuh"
#include "backend/cuda/layer_ops.h"
#include "backend/cuda/moe_combine.cuh"
#include "backend/cuda/norm_row.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;
using detail::fma4;
using detail::MoeCombineIn;
using detail::moe_combine4;

namespace {

constexpr int kHcN = 4, kHcMix = 24, kHcOut = kHcMix + 1, kHcChunk = 1024;
// Canonical reduction order of the mHC dots (fixed by the shape, identical in both partial
// kernels): 4d is cut into chunks of kHcKc; in a chunk, lane l (of kHcLanes) accumulates with
// fmaf, in order, the float4s at columns l*4 + 32*i (i = 0..kHcSteps-1, .x .y .z .w); the 8
// lanes are combined by the xor tree 1, 2, 4; the chunks are summed in order in the mix step.
constexpr int kHcKc = 512, kHcLanes = 8, kHcSteps = kHcKc / (4 * kHcLanes);
// Prefill partial: TOK tokens x 25 outputs per thread, fn chunk in shared memory (48 KB). TOK 4
// from kHcPTok4MinT tokens; below, TOK 2: at 256 tokens TOK 4's 4 x 32 blocks of 4 warps were too
// few to hide the loads' latency (16.7 us against 5.6 of X's bytes, H100 ncu), and TOK 1 (23.6 us,
// also with all of a thread's X in registers: not the loads) reads fn's float4s from shared memory
// once per token (4 wavefronts each, 24 a step: ~13 us of the SM's shared-memory pipe at 256
// tokens). Each output's reduction order is TOK's independent, so every variant gives the same bits.
constexpr int kHcPThreads = 128, kHcPTok4MinT = 1024;
template <int TOK>
constexpr int hc_ptile() { return TOK * kHcPThreads / kHcLanes; }  // tokens per block: 16 TOK
// Decode partial: 1 token x 1 output per thread, fn from global.
constexpr int kHcDWarps = 5, kHcDTile = 4;  // 5 x 5 = 25 output rows
constexpr int kHcPartialPrefillMinT = 33;  // T >= this: the prefill partial kernel
// T >= this: mix kernel + collapse kernel. Below, hc_finish_kernel (grid T x d/1024, the Sinkhorn
// on 16 lanes per token): the mix kernel's 32 tokens per block left a decode batch of 256 with 8
// blocks (hc_pre 48 us at T = 256, the mix kernel 31 of it, on the H200).
constexpr int kHcSplitFinishMinT = static_cast<int>(kHcPreOneLaunchMaxT) + 1;  // layer_ops.h

__device__ __forceinline__ float lane8_sum(float v) {
#pragma unroll
  for (int o = 1; o < kHcLanes; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + expf(-x)); }

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// ws layout: [nchunk][25][T] (token fastest) where the mix kernel reads it (coalesced over
// tokens); [T][nchunk][25] where hc_finish_kernel does (T < kHcSplitFinishMinT: a token's 25 x
// nchunk partials in one 3.2 KB run, not 800 scattered sectors re-read by each of its column
// blocks). Either way each output's chunks are summed in chunk order (the same bits).
struct HcWs {
  int64_t T;
  int nchunk;
  bool token_major;
  __device__ __forceinline__ int64_t at(int c, int r, int64_t t) const {
    return token_major ? (t * nchunk + c) * kHcOut + r : (int64_t(c) * kHcOut + r) * T + t;
  }
  __device__ __forceinline__ int64_t chunk_stride() const { return token_major ? kHcOut : int64_t(kHcOut) * T; }
  /// The layout hc_pre's partial kernels (and a fused post's partials) write for T tokens of width d.
  static HcWs of(int64_t T, int64_t d) {
    return HcWs{T, static_cast<int>(kHcN * d / kHcKc), T < kHcSplitFinishMinT};  // token-major for hc_finish_kernel
  }
};
// Prefill: grid (ceil(T/64), nchunk), 128 threads = 16 token groups x 8 lanes; a thread holds
// 4 tokens x 25 accumulators; fn's chunk (24 x 512) is staged in shared memory once per block;
// each thread streams its own X float4s through a kHcPStages-deep cp.async ring (it reads back
// only what it copied, so no block barrier in the loop).
// Ring depth (an 8-deep ring at TOK 2 measured no faster in the EP step: 30.33 ms either way).
constexpr int kHcPStages = 3;
template <int TOK>
constexpr size_t hc_psmem() { return (size_t(kHcMix) * kHcKc + size_t(kHcPStages) * TOK * kHcPThreads * 4) * sizeof(float); }
template <int TOK>
__global__ void __launch_bounds__(kHcPThreads, 3) hc_partial_prefill_kernel(const float* __restrict__ X, int T, int nd,
                                                                           const float* __restrict__ fn,
                                                                           float* __restrict__ ws, HcWs wl) {
  extern __shared__ float4 hc_smem[];
  const float* sfn = reinterpret_cast<const float*>(hc_smem);
  float4* sx = hc_smem + kHcMix * kHcKc / 4 + threadIdx.x;  // [stage][token j][thread]
  const int c = blockIdx.y, lane = threadIdx.x & (kHcLanes - 1), g = threadIdx.x / kHcLanes;
  // fn's chunk (48 KB, a weight no kernel writes: copied before the wait for the kernel before)
  // by cp.async, in the first group with X's stage 0: all 24 of a thread's copies in flight at
  // once (a load-to-register loop waited on L2 six times, four loads each, before the first step:
  // most of the kernel at 256 tokens, where each block does 16 steps).
  static_assert(kHcMix * kHcKc / 4 % kHcPThreads == 0, "fn chunk: whole float4s per thread");
#pragma unroll
  for (int n = 0; n < kHcMix * kHcKc / 4 / kHcPThreads; ++n) {
    const int i = threadIdx.x + n * kHcPThreads, r = i / (kHcKc / 4), q = i % (kHcKc / 4);
    cp_async16(hc_smem + i, reinterpret_cast<const float4*>(fn + int64_t(r) * nd + c * kHcKc) + q);
  }
  detail::pdl_entry();
  const int t0 = blockIdx.x * hc_ptile<TOK>() + g * TOK;
  const float* xr[TOK];
#pragma unroll
  for (int j = 0; j < TOK; ++j) xr[j] = X + int64_t(min(t0 + j, T - 1)) * nd + c * kHcKc + lane * 4;
  auto issue = [&](int i) {
#pragma unroll
    for (int j = 0; j < TOK; ++j) cp_async16(sx + ((i % kHcPStages) * TOK + j) * kHcPThreads, xr[j] + 32 * i);
  };
#pragma unroll
  for (int i = 0; i < kHcPStages - 1; ++i) {
    issue(i);
    cp_async_commit();
  }
  float acc[TOK][kHcOut];
#pragma unroll
  for (int j = 0; j < TOK; ++j)
#pragma unroll
    for (int r = 0; r < kHcOut; ++r) acc[j][r] = 0.f;
  cp_async_wait<kHcPStages - 2>();  // group 0: fn's chunk (and X's stage 0)
  __syncthreads();
#pragma unroll 1
  for (int i = 0; i < kHcSteps; ++i) {
    if (i + kHcPStages - 1 < kHcSteps) issue(i + kHcPStages - 1);
    cp_async_commit();
    cp_async_wait<kHcPStages - 1>();
    const int col = lane * 4 + 32 * i;
    float4 x[TOK];
#pragma unroll
    for (int j = 0; j < TOK; ++j) x[j] = sx[((i % kHcPStages) * TOK + j) * kHcPThreads];
#pragma unroll
    for (int r = 0; r < kHcMix; ++r) {
      const float4 f = *reinterpret_cast<const float4*>(sfn + r * kHcKc + col);
#pragma unroll
      for (int j = 0; j < TOK; ++j) acc[j][r] = fma4(x[j], f, acc[j][r]);
    }
#pragma unroll
    for (int j = 0; j < TOK; ++j) acc[j][kHcMix] = fma4(x[j], x[j], acc[j][kHcMix]);
  }
#pragma unroll
  for (int j = 0; j < TOK; ++j)
#pragma unroll
    for (int r = 0; r < kHcOut; ++r) {
      const float s = lane8_sum(acc[j][r]);  // every lane of the 8 holds the same bits
      if (lane == (j * kHcOut + r) % kHcLanes && t0 + j < T) ws[wl.at(c, r, t0 + j)] = s;
    }
}

// Decode: grid (ceil(T/4), nchunk, 5), 160 threads = 5 warps x 4 tokens x 8 lanes; thread =
// one output row (blockIdx.z * 5 + warp) of one token, all 16 steps' loads in flight at once;
// the same per-output order as the prefill kernel (bitwise equal results).
__global__ void __launch_bounds__(kHcDWarps * 32, 2)
    hc_partial_decode_kernel(const float* __restrict__ X, int T, int nd, const float* __restrict__ fn,
                             float* __restrict__ ws, HcWs wl) {
  const int c = blockIdx.y, lane = threadIdx.x & (kHcLanes - 1);
  const int r = blockIdx.z * kHcDWarps + (threadIdx.x >> 5);
  const float4* fr = reinterpret_cast<const float4*>(fn + int64_t(min(r, kHcMix - 1)) * nd + c * kHcKc + lane * 4);
  const bool sq = r >= kHcMix;  // row 24: the sum of squares
  float4 x[kHcSteps], f[kHcSteps];
  // fn (a weight no kernel writes) before the wait for the kernel before: its loads overlap that
  // kernel's tail; X's after.
#pragma unroll
  for (int i = 0; i < kHcSteps; ++i) f[i] = __ldg(fr + 8 * i);
  detail::pdl_entry();
  const int t = blockIdx.x * kHcDTile + ((threadIdx.x >> 3) & 3);
  const float4* xr = reinterpret_cast<const float4*>(X + int64_t(min(t, T - 1)) * nd + c * kHcKc + lane * 4);
#pragma unroll
  for (int i = 0; i < kHcSteps; ++i) x[i] = xr[8 * i];
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < kHcSteps; ++i) acc = fma4(x[i], sq ? x[i] : f[i], acc);
  acc = lane8_sum(acc);
  if (lane == 0 && t < T) ws[wl.at(c, r, t)] = acc;
}

// Sum of chunk c = 0..nchunk-1 (in order, from 0.f) of output r of token t. The loads go out a
// batch at a time before the adds (a load -> add chain pays one L2 latency per chunk): batches of
// kHcSumBatch, then of 8 (nchunk = d / 128 is a multiple of 8: hc_pre requires d % 1024 == 0).
constexpr int kHcSumBatch = 32;
template <int N>
__device__ __forceinline__ float hc_sum_batch(const float* __restrict__ p, int64_t stride, float s) {
  float v[N];
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = p[i * stride];
#pragma unroll
  for (int i = 0; i < N; ++i) s += v[i];
  return s;
}
__device__ __forceinline__ float hc_chunk_sum(const float* __restrict__ ws, const HcWs& wl, int t, int r) {
  const int64_t stride = wl.chunk_stride();
  const float* p = ws + wl.at(0, r, t);
  float s = 0.f;
  int c = 0;
  for (; c + kHcSumBatch <= wl.nchunk; c += kHcSumBatch) s = hc_sum_batch<kHcSumBatch>(p + c * stride, stride, s);
  for (; c < wl.nchunk; c += 8) s = hc_sum_batch<8>(p + c * stride, stride, s);
  return s;
}

// The per-element steps of the mix, shared by hc_mix_math (one token per thread) and
// hc_finish_kernel (one token spread over lanes), so that both do the same float operations in
// the same order (bitwise equal results). sm = the 24 dots and the sum of squares; mix i is
// sm[i] * r with r = hc_rms_scale(sm).
__device__ __forceinline__ float hc_rms_scale(const float* sm, int d, float rms_eps) {
  return rsqrtf(sm[kHcMix] / static_cast<float>(kHcN * d) + rms_eps);
}
__device__ __forceinline__ float hc_pre_of(const float* sm, float r, const float* __restrict__ base,
                                           const float* __restrict__ scale, float hc_eps, int j) {
  return sigmoidf_(__fmaf_rn(sm[j] * r, scale[0], base[j])) + hc_eps;
}
__device__ __forceinline__ float hc_post_of(const float* sm, float r, const float* __restrict__ base,
                                            const float* __restrict__ scale, int j) {
  return 2.f * sigmoidf_(__fmaf_rn(sm[kHcN + j] * r, scale[1], base[kHcN + j]));
}
// Row j of comb before the Sinkhorn: softmax over k (max and sum in k order) of the mixes
// 8 + 4j + k, each + hc_eps. The sum is __fadd_rn: expf ends in a multiply that the compiler
// could fuse with a plain add into an fma or not depending on the multiply's other uses, and
// these differ between the paths (hc_comb_lanes keeps one of the four quotients).
__device__ __forceinline__ void hc_comb_row(const float* sm, float r, const float* __restrict__ base,
                                            const float* __restrict__ scale, float hc_eps, int j, float (&c)[kHcN]) {
  const int i0 = 2 * kHcN + j * kHcN;
  float mx = -INFINITY;
#pragma unroll
  for (int k = 0; k < kHcN; ++k) {
    c[k] = __fmaf_rn(sm[i0 + k] * r, scale[2], base[i0 + k]);
    mx = fmaxf(mx, c[k]);
  }
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kHcN; ++k) s = __fadd_rn(s, c[k] = expf(c[k] - mx));
#pragma unroll
  for (int k = 0; k < kHcN; ++k) c[k] = c[k] / s + hc_eps;
}
// Sinkhorn normalisation of one entry by its row's or column's sum s (summed in order from 0.f).
__device__ __forceinline__ float hc_sinkhorn_div(float c, float s, float hc_eps) { return c / (s + hc_eps); }

// mixes -> pre, post, comb of one token (sm = the 24 dots and the sum of squares).
__device__ __forceinline__ void hc_mix_math(const float* sm, int d, const float* __restrict__ base,
                                            const float* __restrict__ scale, float rms_eps, float hc_eps, int iters,
                                            float* pre, float* post, float (&C)[kHcN][kHcN]) {
  const float r = hc_rms_scale(sm, d, rms_eps);
#pragma unroll
  for (int j = 0; j < kHcN; ++j) hc_comb_row(sm, r, base, scale, hc_eps, j, C[j]);
  auto col_norm = [&] {
#pragma unroll
    for (int k = 0; k < kHcN; ++k) {
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < kHcN; ++j) s += C[j][k];
#pragma unroll
      for (int j = 0; j < kHcN; ++j) C[j][k] = hc_sinkhorn_div(C[j][k], s, hc_eps);
    }
  };
  auto row_norm = [&] {
#pragma unroll
    for (int j = 0; j < kHcN; ++j) {
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < kHcN; ++k) s += C[j][k];
#pragma unroll
      for (int k = 0; k < kHcN; ++k) C[j][k] = hc_sinkhorn_div(C[j][k], s, hc_eps);
    }
  };
  col_norm();
  for (int it = 1; it < iters; ++it) {
    row_norm();
    col_norm();
  }
#pragma unroll
  for (int j = 0; j < kHcN; ++j) {
    pre[j] = hc_pre_of(sm, r, base, scale, hc_eps, j);
    post[j] = hc_post_of(sm, r, base, scale, j);
  }
}

// comb of one token on lanes 0..15 of a warp (lane = 4j + k returns C[j][k]), the same steps as
// hc_mix_math: each lane computes its row's softmax (hc_comb_row) and keeps entry k; a
// normalisation gathers the row's / column's 4 entries by shuffles and sums them in the serial
// order (k, resp. j, from 0.f).
__device__ __forceinline__ float hc_comb_lanes(const float* sm, float r, const float* __restrict__ base,
                                               const float* __restrict__ scale, float hc_eps, int iters, int lane) {
  constexpr unsigned kMask = 0xffffu;
  const int j = lane / kHcN, k = lane % kHcN;
  float row[kHcN];
  hc_comb_row(sm, r, base, scale, hc_eps, j, row);
  float c = row[kHcN - 1];  // row[k] by selects (a dynamic index would put row in local memory)
#pragma unroll
  for (int q = kHcN - 2; q >= 0; --q) c = k == q ? row[q] : c;
  auto norm = [&](int first, int stride) {
    float a[kHcN];
#pragma unroll
    for (int q = 0; q < kHcN; ++q) a[q] = __shfl_sync(kMask, c, first + q * stride);
    float s = 0.f;
#pragma unroll
    for (int q = 0; q < kHcN; ++q) s += a[q];
    c = hc_sinkhorn_div(c, s, hc_eps);
  };
  norm(k, kHcN);  // column
  for (int it = 1; it < iters; ++it) {
    norm(j * kHcN, 1);  // row
    norm(k, kHcN);
  }
  return c;
}

// input[t, e..e+3] = sum_j pre_j X_j (j in order, fmaf from 0); v[j] = X_j[e..e+3].
__device__ __forceinline__ float4 hc_collapse4(const float4 (&v)[kHcN], const float* p) {
  float4 y = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int j = 0; j < kHcN; ++j) {
    y.x = __fmaf_rn(p[j], v[j].x, y.x), y.y = __fmaf_rn(p[j], v[j].y, y.y);
    y.z = __fmaf_rn(p[j], v[j].z, y.z), y.w = __fmaf_rn(p[j], v[j].w, y.w);
  }
  return y;
}

// kPart: kHcAll as above; kHcNoComb, the same without the Sinkhorn (comb left to hc_pre_comb);
// kHcCombOnly (grid T x 1), comb alone: no X, pre, post or input.
enum HcFinishPart { kHcAll = 0, kHcNoComb = 1, kHcCombOnly = 2 };

// Warp 1 lane l's base / scale value (l < 27; hc_finish_mix stages it in shared memory): weights no
// kernel writes, loaded by the finish kernels before their PDL wait.
__device__ __forceinline__ float hc_base_scale_lane(const float* __restrict__ base, const float* __restrict__ scale) {
  const int lane = threadIdx.x & 31;
  if ((threadIdx.x >> 5) != 1 || lane >= kHcMix + 3) return 0.f;
  return lane < kHcMix ? base[lane] : scale[lane - kHcMix];
}

// The start every small-T finish shares (a block of 256 threads, token t): threads 0..24 sum the
// chunk partials into sm while warp 1 stages base and scale (bs: hc_base_scale_lane) in sbase;
// then, at once, warp 1 lanes 0..7 compute pre (into spre, for the collapse) and post, and
// (kPart != kHcNoComb, `writer` only) warp 0 lanes 0..15 compute comb (hc_comb_lanes); the other
// blocks of the token skip the Sinkhorn (they need pre only). The writer block writes pre, post,
// comb. The caller syncs before reading spre.
template <int kPart>
__device__ __forceinline__ void hc_finish_mix(int t, int T, int d, int nchunk, const float* __restrict__ ws, float bs,
                                              float rms_eps, float hc_eps, int iters, float* __restrict__ pre,
                                              float* __restrict__ post, float* __restrict__ comb, bool writer,
                                              float* sm, float* sbase, float* spre) {
  const float* sscale = sbase + kHcMix;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x < kHcOut) sm[threadIdx.x] = hc_chunk_sum(ws, HcWs{T, nchunk, true}, t, threadIdx.x);
  if (warp == 1 && lane < kHcMix + 3) sbase[lane] = bs;
  __syncthreads();
  if (warp == 0 && lane < kHcN * kHcN) {
    if (kPart != kHcNoComb && writer) {
      const float r = hc_rms_scale(sm, d, rms_eps);
      comb[t * kHcN * kHcN + lane] = hc_comb_lanes(sm, r, sbase, sscale, hc_eps, iters, lane);
    }
  } else if (kPart != kHcCombOnly && warp == 1 && lane < 2 * kHcN) {
    const float r = hc_rms_scale(sm, d, rms_eps);
    const int j = lane % kHcN;
    if (lane < kHcN) {
      const float p = hc_pre_of(sm, r, sbase, sscale, hc_eps, j);
      spre[j] = p;
      if (writer) pre[t * kHcN + j] = p;
    } else if (writer) {
      post[t * kHcN + j] = hc_post_of(sm, r, sbase, sscale, j);
    }
  }
}

// Small T: grid (T, d/1024), 256 threads, one token and 1024 columns of input per block (kPack:
// grid (T, 1), the block's 1024-column blocks in turn, then the token's RMSNorm and its packed
// forms, detail::norm_pack_row, from the input it wrote: rms_norm_pack's bits). Every thread first
// issues its X loads (4 float4, for the collapse at the end), then hc_finish_mix (column block 0
// writes pre, post, comb); all threads collapse.
template <int kPart, bool kPack = false>
__global__ void __launch_bounds__(256) hc_finish_kernel(const float* __restrict__ X, int T, int d, int nchunk,
                                                        const float* __restrict__ ws, const float* __restrict__ base,
                                                        const float* __restrict__ scale, float rms_eps, float hc_eps,
                                                        int iters, float* __restrict__ pre, float* __restrict__ post,
                                                        float* __restrict__ comb, float* __restrict__ input,
                                                        HcNormPack pk) {
  const float bs = hc_base_scale_lane(base, scale);
  detail::pdl_entry();
  __shared__ float sm[kHcOut];
  __shared__ float sbase[kHcMix + 3];  // base, then scale
  __shared__ float spre[kHcN];
  const int t = blockIdx.x;
  const int e = blockIdx.y * kHcChunk + threadIdx.x * 4;
  float4 v[kHcN];
  if (kPart != kHcCombOnly) {
#pragma unroll
    for (int j = 0; j < kHcN; ++j) v[j] = *reinterpret_cast<const float4*>(X + (int64_t(t) * kHcN + j) * d + e);
  }
  hc_finish_mix<kPart>(t, T, d, nchunk, ws, bs, rms_eps, hc_eps, iters, pre, post, comb, blockIdx.y == 0, sm,
                       sbase, spre);
  if (kPart == kHcCombOnly) return;
  __syncthreads();
  *reinterpret_cast<float4*>(input + int64_t(t) * d + e) = hc_collapse4(v, spre);
  if constexpr (kPack) {
    for (int cb = 1; cb < d / kHcChunk; ++cb) {  // the token's other column blocks
      const int ec = cb * kHcChunk + threadIdx.x * 4;
#pragma unroll
      for (int j = 0; j < kHcN; ++j) v[j] = *reinterpret_cast<const float4*>(X + (int64_t(t) * kHcN + j) * d + ec);
      *reinterpret_cast<float4*>(input + int64_t(t) * d + ec) = hc_collapse4(v, spre);
    }
    __syncthreads();  // the block's input row, written by all of its threads, is read back by all
    detail::norm_pack_row(input + int64_t(t) * d, t, T, d, pk.weight, pk.eps, pk.y, pk.q, pk.scales, pk.scales_t,
                          pk.y16, 0, -1, 0, pk.qe, pk.qes);
  }
}

// With the norm at few tokens (T <= kHcPackSpreadMaxT, d <= kHcPackMaxD): grid (T, d/1024), 256
// threads. Every block of a token loads all of the token's X at once (d/256 float4 a thread), makes
// the whole input row in shared memory (so the norm's sum of squares is row_rsqrt_mean_sq's over
// the same values: rms_norm_pack's bits) and writes input, y and the packed forms of its own 1024
// columns: the token's norm over d/1024 SMs, one round of loads, where hc_finish_kernel<.., true>
// runs it in one block after d/1024 serial column passes (8.3 us at one token, d 4096, H100 ncu).
constexpr int kHcPackSpreadMaxT = 32, kHcPackMaxD = 4096, kHcPackMaxCb = kHcPackMaxD / kHcChunk;
template <int kPart>
__global__ void __launch_bounds__(256) hc_finish_pack_kernel(const float* __restrict__ X, int T, int d, int nchunk,
                                                             const float* __restrict__ ws,
                                                             const float* __restrict__ base,
                                                             const float* __restrict__ scale, float rms_eps,
                                                             float hc_eps, int iters, float* __restrict__ pre,
                                                             float* __restrict__ post, float* __restrict__ comb,
                                                             float* __restrict__ input, HcNormPack pk) {
  static_assert(kPart != kHcCombOnly, "the pack needs the collapse");
  // Weights before the wait: base / scale, and the norm weight of the block's columns (thread tid's
  // float4 is the one norm_pack_row's warp tid / 32, lane tid % 32 reads for column block `mine`).
  const int t = blockIdx.x, ncb = d / kHcChunk, mine = blockIdx.y;
  const float bs = hc_base_scale_lane(base, scale);
  const float4 wv = pk.weight ? *reinterpret_cast<const float4*>(pk.weight + mine * kHcChunk + threadIdx.x * 4)
                              : make_float4(0.f, 0.f, 0.f, 0.f);
  detail::pdl_entry();
  __shared__ float sm[kHcOut];
  __shared__ float sbase[kHcMix + 3];
  __shared__ float spre[kHcN];
  __shared__ __align__(16) float srow[kHcPackMaxD];
  __shared__ __align__(16) float sw[kHcChunk];  // the norm weight of the block's columns
  *reinterpret_cast<float4*>(sw + threadIdx.x * 4) = wv;
  float4 v[kHcPackMaxCb][kHcN];
#pragma unroll
  for (int cb = 0; cb < kHcPackMaxCb; ++cb)
    if (cb < ncb) {
#pragma unroll
      for (int j = 0; j < kHcN; ++j)
        v[cb][j] = *reinterpret_cast<const float4*>(X + (int64_t(t) * kHcN + j) * d + cb * kHcChunk + threadIdx.x * 4);
    }
  hc_finish_mix<kPart>(t, T, d, nchunk, ws, bs, rms_eps, hc_eps, iters, pre, post, comb, mine == 0, sm, sbase,
                       spre);
  __syncthreads();
#pragma unroll
  for (int cb = 0; cb < kHcPackMaxCb; ++cb)
    if (cb < ncb) {
      const int e = cb * kHcChunk + threadIdx.x * 4;
      const float4 y = hc_collapse4(v[cb], spre);
      *reinterpret_cast<float4*>(srow + e) = y;
      if (cb == mine) *reinterpret_cast<float4*>(input + int64_t(t) * d + e) = y;
    }
  __syncthreads();  // the whole row in shared memory
  constexpr int kKbPerCb = kHcChunk / 128;
  detail::norm_pack_row(srow, t, T, d, pk.weight ? sw : nullptr, pk.eps, pk.y, pk.q, pk.scales, pk.scales_t, pk.y16,
                        mine * kKbPerCb, (mine + 1) * kKbPerCb, int64_t(mine) * kHcChunk, pk.qe, pk.qes);
}

// Large T, step 1: grid ceil(T/32), 256 threads: 8 warps sum the chunk partials of 32 tokens
// (row r by warp r % 8, chunks in order, coalesced over tokens), then warp 0 runs one token's
// mix + Sinkhorn per lane.
constexpr int kHcMixTok = 32;
__global__ void __launch_bounds__(256) hc_mix_kernel(int T, int d, int nchunk, const float* __restrict__ ws,
                                                     const float* __restrict__ base, const float* __restrict__ scale,
                                                     float rms_eps, float hc_eps, int iters, float* __restrict__ pre,
                                                     float* __restrict__ post, float* __restrict__ comb) {
  detail::pdl_entry();
  __shared__ float sm[kHcMixTok][kHcOut + 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int t = blockIdx.x * kHcMixTok + lane, tc = min(t, T - 1);
  for (int r = warp; r < kHcOut; r += 8) sm[lane][r] = hc_chunk_sum(ws, HcWs{T, nchunk, false}, tc, r);
  __syncthreads();
  if (warp != 0 || t >= T) return;
  float pr[kHcN], po[kHcN], C[kHcN][kHcN];
  hc_mix_math(sm[lane], d, base, scale, rms_eps, hc_eps, iters, pr, po, C);
#pragma unroll
  for (int j = 0; j < kHcN; ++j) {
    pre[t * kHcN + j] = pr[j];
    post[t * kHcN + j] = po[j];
#pragma unroll
    for (int k = 0; k < kHcN; ++k) comb[(t * kHcN + j) * kHcN + k] = C[j][k];
  }
}

// Large T, step 2: grid (T, ceil(d/4 / 1024)), 256 threads, 4 float4 columns each (X read once).
__global__ void __launch_bounds__(256, 2) hc_collapse_kernel(const float* __restrict__ X, int d,
                                                          const float* __restrict__ pre, float* __restrict__ input) {
  detail::pdl_entry();
  const int t = blockIdx.x, q = d / 4;
  float p[kHcN];
#pragma unroll
  for (int j = 0; j < kHcN; ++j) p[j] = pre[t * kHcN + j];
  const float* xt = X + int64_t(t) * kHcN * d;
  float4 v[4][kHcN];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int c = min((blockIdx.y * 4 + u) * 256 + int(threadIdx.x), q - 1);
#pragma unroll
    for (int j = 0; j < kHcN; ++j) v[u][j] = reinterpret_cast<const float4*>(xt + int64_t(j) * d)[c];
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int c = (blockIdx.y * 4 + u) * 256 + threadIdx.x;
    if (c < q) reinterpret_cast<float4*>(input + int64_t(t) * d)[c] = hc_collapse4(v[u], p);
  }
}

// Stream k's new float4 of the post: post_k f, then + C[j][k] X_j for j in order (fmaf).
__device__ __forceinline__ float4 hc_post4(float pk, const float (&C)[kHcN][kHcN], int k, const float4 (&x)[kHcN],
                                           float4 fv) {
  float4 r = make_float4(pk * fv.x, pk * fv.y, pk * fv.z, pk * fv.w);
#pragma unroll
  for (int j = 0; j < kHcN; ++j) {
    r.x = __fmaf_rn(C[j][k], x[j].x, r.x), r.y = __fmaf_rn(C[j][k], x[j].y, r.y);
    r.z = __fmaf_rn(C[j][k], x[j].z, r.z), r.w = __fmaf_rn(C[j][k], x[j].w, r.w);
  }
  return r;
}

// grid (T, ceil(d/4 / 1024)), 256 threads, 4 float4 columns each: X_k <- post_k f + sum_j C[j][k] X_j
// (same per-element expression as before: post_k f, then + C[j][k] X_j for j in order).
// kCombine: f is not read but made in place by moe_combine4 from `mc` (the MoE's combine and mHC
// post in one pass: no f row written and read back, one launch less).
template <bool kCombine>
__global__ void __launch_bounds__(256, 2) hc_post_kernel(float* __restrict__ X, int d, const float* __restrict__ post,
                                                      const float* __restrict__ comb, const float* __restrict__ f,
                                                      MoeCombineIn mc) {
  detail::pdl_entry();
  const int t = blockIdx.x, q = d / 4;
  float C[kHcN][kHcN], pk[kHcN];
#pragma unroll
  for (int j = 0; j < kHcN; ++j) {
    pk[j] = post[t * kHcN + j];
#pragma unroll
    for (int k = 0; k < kHcN; ++k) C[j][k] = comb[(t * kHcN + j) * kHcN + k];
  }
  float* xt = X + int64_t(t) * kHcN * d;
  const float* ft = f + int64_t(t) * d;
  // all loads first (the in-place stores would otherwise order them), then 4 x 4 float4 stores
  float4 x[4][kHcN], fv[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int c = min((blockIdx.y * 4 + u) * 256 + int(threadIdx.x), q - 1);
#pragma unroll
    for (int j = 0; j < kHcN; ++j) x[u][j] = reinterpret_cast<const float4*>(xt + int64_t(j) * d)[c];
    fv[u] = kCombine ? moe_combine4(mc, t, d, 4 * c) : reinterpret_cast<const float4*>(ft)[c];
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int c = (blockIdx.y * 4 + u) * 256 + threadIdx.x;
    if (c >= q) break;
#pragma unroll
    for (int k = 0; k < kHcN; ++k) reinterpret_cast<float4*>(xt + int64_t(k) * d)[c] = hc_post4(pk[k], C, k, x[u], fv[u]);
  }
}

// Small T (kHcPostPartialMaxT tokens at most): the post, then the next sub-layer's hc_pre chunk
// partials of the new X (its fn: fn_next), in one launch: hc_post_kernel's values and
// hc_partial_decode_kernel's sums, bit for bit (the same per-element expressions, the same
// per-output order), so hc_pre(..., partials_ready) goes on from them. Grid (T, R d / kHcKc), R =
// kRanks blocks along y a column group b = blockIdx.y / R (a cluster when R > 1): the group owns
// columns [kHcKc b, kHcKc (b + 1)) of all four streams, so no other group reads what it overwrites
// in place; those are the chunks s (d / kHcKc) + b, s = 0..3, of the flat [4d] row. Its block of
// rank q = blockIdx.y % R sums outputs r = q 24/R .. (q + 1) 24/R - 1 (rank R - 1 also row 24, the
// sum of squares): before the PDL wait, thread (s, slot, lane) copies its 16 fn float4s into shared
// memory (cp.async: a weight no kernel writes), 24/R rows of fn's 196 KB a group. Threads 0..127 of
// every block make the post of one float4 column each (every stream, into shared memory); a barrier
// (the cluster's: every block of the group has read the old X), then rank 0 writes the new X; every
// thread sums output r of chunk s as the decode partial's lane does. R = 4 (48 KB of fn a block,
// beside the kernel before) up to kHcPpClusterMaxT tokens: one token's 196 KB on one SM took 8 us
// (H100 ncu; 6.2 in clusters); at 8 and 16 tokens the clusters were slower (H100, the model's step).
template <int kRanks>
struct HcPp {
  static constexpr int kRows = kHcMix / kRanks;             // fn rows a block
  static constexpr int kSlots = kRows + 1;                  // + the sum of squares (rank R - 1)
  static constexpr int kThreads = kHcN * kSlots * kHcLanes;  // 800 (R 1) or 224 (R 4)
  static constexpr int kCols = kHcKc / 4;                   // float4 columns a group owns: 128
  static constexpr size_t kSmem = sizeof(float4) * (kHcN * kCols + size_t(kThreads) * kHcSteps);  // 213 / 64 KB
  static_assert(kRows * kRanks == kHcMix && kThreads >= kCols, "the rows' and columns' split");
};
constexpr int kHcPostPartialMaxT = 16, kHcPpClusterMaxT = 4;
template <bool kCombine, int kRanks>
__global__ void __launch_bounds__(HcPp<kRanks>::kThreads) hc_post_partial_kernel(
    float* __restrict__ X, int d, const float* __restrict__ post, const float* __restrict__ comb,
    const float* __restrict__ f, MoeCombineIn mc, const float* __restrict__ fn_next, float* __restrict__ ws, HcWs wl) {
  using P = HcPp<kRanks>;
  extern __shared__ float4 hc_pp_smem[];
  float4* const xs = hc_pp_smem;                                 // [kHcN][kCols]: the new X
  float4* const fs = hc_pp_smem + kHcN * P::kCols + threadIdx.x;  // this thread's fn, stride kThreads
  const int t = blockIdx.x, b = blockIdx.y / kRanks, q = blockIdx.y % kRanks, tid = threadIdx.x;
  const int s = tid / (P::kSlots * kHcLanes), slot = tid / kHcLanes % P::kSlots, lane = tid % kHcLanes;
  const bool sq = slot == P::kRows;  // the sum of squares: rank R - 1's only
  const int r = sq ? kHcMix : q * P::kRows + slot;
  const int nd = kHcN * d, c = s * (d / kHcKc) + b;  // this thread's chunk of the flat row
  if (!sq) {
    const float4* p = reinterpret_cast<const float4*>(fn_next + int64_t(r) * nd + c * kHcKc + lane * 4);
#pragma unroll
    for (int i = 0; i < kHcSteps; ++i) cp_async16(fs + i * P::kThreads, p + 8 * i);
  }
  cp_async_commit();
  detail::pdl_entry();
  float* xt = X + int64_t(t) * nd;
  const int col = b * P::kCols + tid;  // float4 column of each stream
  float4 v[kHcN];
  if (tid < P::kCols) {
    float C[kHcN][kHcN], pk[kHcN];
#pragma unroll
    for (int j = 0; j < kHcN; ++j) {
      pk[j] = post[t * kHcN + j];
#pragma unroll
      for (int k = 0; k < kHcN; ++k) C[j][k] = comb[(t * kHcN + j) * kHcN + k];
    }
    float4 x[kHcN];
#pragma unroll
    for (int j = 0; j < kHcN; ++j) x[j] = reinterpret_cast<const float4*>(xt + int64_t(j) * d)[col];
    const float4 fv = kCombine ? moe_combine4(mc, t, d, 4 * col) : reinterpret_cast<const float4*>(f + int64_t(t) * d)[col];
#pragma unroll
    for (int k = 0; k < kHcN; ++k) xs[k * P::kCols + tid] = v[k] = hc_post4(pk[k], C, k, x, fv);
  }
  cp_async_wait<0>();  // this thread's own fn copies (read back by it alone)
  if constexpr (kRanks > 1) {
    detail::cluster_sync();  // the new X in shared memory; every block of the group has read the old X
  } else {
    __syncthreads();  // the new X in shared memory (this block alone read the old X)
  }
  if (q == 0 && tid < P::kCols) {
#pragma unroll
    for (int k = 0; k < kHcN; ++k) reinterpret_cast<float4*>(xt + int64_t(k) * d)[col] = v[k];
  }
  float acc = 0.f;  // (the sum-of-squares slots of ranks 0..R-2 sum too, unwritten: lane8_sum's full-warp shuffles)
  const float4* xr = xs + s * P::kCols + lane;
  if (sq) {
#pragma unroll
    for (int i = 0; i < kHcSteps; ++i) acc = fma4(xr[8 * i], xr[8 * i], acc);
  } else {
#pragma unroll
    for (int i = 0; i < kHcSteps; ++i) acc = fma4(xr[8 * i], fs[i * P::kThreads], acc);
  }
  acc = lane8_sum(acc);
  if (lane == 0 && (!sq || q == kRanks - 1)) ws[wl.at(c, r, t)] = acc;
}

inline unsigned blocks_for(int64_t n, int threads = 256) { return static_cast<unsigned>((n + threads - 1) / threads); }

// The prefill partial with TOK tokens per thread; its shared-memory size set once per device (not
// re-issued inside a graph capture).
template <int TOK>
bool launch_hc_partial(const float* X, int T, int nd, int nchunk, const float* fn, float* ws, HcWs wl, cudaStream_t s) {
  static std::atomic<uint64_t> attr_set{0};
  if (!detail::max_dynamic_smem_once(reinterpret_cast<const void*>(hc_partial_prefill_kernel<TOK>),
                                     static_cast<int>(hc_psmem<TOK>()), attr_set, "hc_pre: shared-memory size"))
    return false;
  detail::launch_pdl(hc_partial_prefill_kernel<TOK>, dim3(blocks_for(T, hc_ptile<TOK>()), nchunk), kHcPThreads,
                     hc_psmem<TOK>(), s, X, T, nd, fn, ws, wl);
  return check_launch("hc_partial_prefill_kernel");
}

}  // namespace

size_t hc_pre_workspace_bytes(int64_t T, int64_t d) {
  return static_cast<size_t>(T) * (kHcN * d / kHcKc) * kHcOut * sizeof(float);
}

bool hc_pre(const float* X, int64_t T, int64_t d, const float* fn, const float* base, const float* scale,
            float rms_eps, float hc_eps, int sinkhorn_iters, float* pre, float* post, float* comb, float* input,
            void* workspace, void* stream, bool comb_later, const HcNormPack* pack, bool partials_ready) {
  if (pack && (!pack->y || (pack->q && !pack->scales) || (pack->qe && !pack->qes)))
    return fail("hc_pre: pack needs y, and scales with q / qe");
  if (pack && pack->qe && T >= kHcSplitFinishMinT) return fail("hc_pre: the experts' rows (qe) below 1,025 tokens only");
  if (d % kHcChunk) return fail("hc_pre: d % 1024 != 0");
  if (T <= 0) return true;
  if (T > INT_MAX / 2) return fail("hc_pre: T too large");
  const int nd = static_cast<int>(kHcN * d), nchunk = nd / kHcKc, Ti = static_cast<int>(T);
  float* ws = static_cast<float*>(workspace);
  const cudaStream_t s = as_stream(stream);
  const HcWs wl = HcWs::of(T, d);
  if (partials_ready) {
    if (!hc_post_partial_fits(T, d)) return fail("hc_pre: partials_ready past hc_post_partial_fits");
  } else if (T >= kHcPTok4MinT) {
    if (!launch_hc_partial<4>(X, Ti, nd, nchunk, fn, ws, wl, s)) return false;
  } else if (T >= kHcPartialPrefillMinT) {
    if (!launch_hc_partial<2>(X, Ti, nd, nchunk, fn, ws, wl, s)) return false;
  } else {
    const dim3 grid(blocks_for(T, kHcDTile), nchunk, kHcOut / kHcDWarps);
    detail::launch_pdl(hc_partial_decode_kernel, grid, kHcDWarps * 32, 0, s, X, Ti, nd, fn, ws, wl);
    if (!check_launch("hc_partial_decode_kernel")) return false;
  }
  if (T < kHcSplitFinishMinT) {
    const HcNormPack pk = pack ? *pack : HcNormPack{};
    if (pack && T <= kHcPackSpreadMaxT && d <= kHcPackMaxD) {
      const auto kernel = comb_later ? hc_finish_pack_kernel<kHcNoComb> : hc_finish_pack_kernel<kHcAll>;
      detail::launch_pdl(kernel, dim3(static_cast<unsigned>(T), static_cast<unsigned>(d / kHcChunk)), 256, 0, s, X, Ti,
                         static_cast<int>(d), nchunk, ws, base, scale, rms_eps, hc_eps, sinkhorn_iters, pre, post, comb,
                         input, pk);
      return check_launch("hc_finish_pack_kernel");
    }
    const auto kernel = pack ? (comb_later ? hc_finish_kernel<kHcNoComb, true> : hc_finish_kernel<kHcAll, true>)
                             : (comb_later ? hc_finish_kernel<kHcNoComb> : hc_finish_kernel<kHcAll>);
    const unsigned col_blocks = pack ? 1u : static_cast<unsigned>(d / kHcChunk);
    detail::launch_pdl(kernel, dim3(static_cast<unsigned>(T), col_blocks), 256, 0, s, X, Ti, static_cast<int>(d), nchunk,
                       ws, base, scale, rms_eps, hc_eps, sinkhorn_iters, pre, post, comb, input, pk);
    return check_launch("hc_finish_kernel");
  }
  detail::launch_pdl(hc_mix_kernel, blocks_for(T, kHcMixTok), 256, 0, s, Ti, static_cast<int>(d), nchunk, ws, base, scale, rms_eps,
                                                         hc_eps, sinkhorn_iters, pre, post, comb);
  if (!check_launch("hc_mix_kernel")) return false;
  detail::launch_pdl(hc_collapse_kernel, dim3(static_cast<unsigned>(T), blocks_for(d / 4, 1024)), 256, 0, s, X, static_cast<int>(d), pre, input);
  if (!check_launch("hc_collapse_kernel")) return false;
  if (!pack) return true;
  return rms_norm_pack(input, T, d, pack->weight, pack->eps, pack->y, pack->q, pack->scales, pack->scales_t, pack->y16,
                       stream);
}

bool hc_pre_comb(int64_t T, int64_t d, const float* base, const float* scale, float rms_eps, float hc_eps,
                 int sinkhorn_iters, float* comb, const void* workspace, void* stream) {
  if (d % kHcChunk) return fail("hc_pre_comb: d % 1024 != 0");
  if (T <= 0 || T >= kHcSplitFinishMinT) return true;  // from kHcSplitFinishMinT tokens hc_pre wrote comb
  const int nchunk = static_cast<int>(kHcN * d / kHcKc);
  // 64 threads: the 25 partial sums, base / scale (warp 1) and the Sinkhorn (warp 0) are all it
  // runs; small blocks beside the main stream's kernels (the twenty-third slice's Sinkhorn blocks
  // of 256 threads inside hc_finish's grid pushed it past one wave at 256 tokens).
  detail::launch_pdl(hc_finish_kernel<kHcCombOnly>, dim3(static_cast<unsigned>(T), 1u), 64, 0, as_stream(stream),
                     static_cast<const float*>(nullptr), static_cast<int>(T), static_cast<int>(d), nchunk,
                     static_cast<const float*>(workspace), base, scale, rms_eps, hc_eps, sinkhorn_iters,
                     static_cast<float*>(nullptr), static_cast<float*>(nullptr), comb, static_cast<float*>(nullptr),
                     HcNormPack{});
  return check_launch("hc_pre_comb");
}

bool hc_post_partial_fits(int64_t T, int64_t d) { return T >= 1 && T <= kHcPostPartialMaxT && d % kHcChunk == 0; }

namespace {

// hc_post_partial_kernel in groups of kRanks blocks (T, d checked by hc_post_partial_fits).
template <bool kCombine, int kRanks>
bool launch_post_partial(float* X, int64_t T, int64_t d, const float* post, const float* comb, const float* f,
                         const MoeCombineIn& mc, const HcNext& next, cudaStream_t s) {
  using P = HcPp<kRanks>;
  static std::atomic<uint64_t> attr_set{0};
  const auto kernel = hc_post_partial_kernel<kCombine, kRanks>;
  if (!detail::max_dynamic_smem_once(reinterpret_cast<const void*>(kernel), static_cast<int>(P::kSmem), attr_set,
                                     "hc_post_partial: shared-memory size"))
    return false;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(kRanks * d / kHcKc));
  // (kRanks 1: a cluster of one block, launch_pdl's plain launch.)
  detail::launch_pdl_cluster(kernel, grid, P::kThreads, P::kSmem, s, dim3(1, kRanks, 1), X, static_cast<int>(d), post,
                             comb, f, mc, next.fn, static_cast<float*>(next.workspace), HcWs::of(T, d));
  return true;
}

// hc_post_kernel, or with `next` hc_post_partial_kernel (T, d checked by hc_post_partial_fits).
template <bool kCombine>
bool launch_post(const char* what, float* X, int64_t T, int64_t d, const float* post, const float* comb, const float* f,
                 const MoeCombineIn& mc, const HcNext* next, cudaStream_t s) {
  if (d % 4) return fail(std::string(what) + ": d % 4 != 0");
  if (T <= 0) return true;
  if (!next) {
    detail::launch_pdl(hc_post_kernel<kCombine>, dim3(static_cast<unsigned>(T), blocks_for(d / 4, 1024)), 256, 0, s, X,
                       static_cast<int>(d), post, comb, f, mc);
    return check_launch(what);
  }
  if (!hc_post_partial_fits(T, d) || !next->fn || !next->workspace)
    return fail(std::string(what) + ": the next partials need 1-16 tokens, d % 1024 == 0, fn and a workspace");
  const bool ok = T <= kHcPpClusterMaxT ? launch_post_partial<kCombine, 4>(X, T, d, post, comb, f, mc, *next, s)
                                        : launch_post_partial<kCombine, 1>(X, T, d, post, comb, f, mc, *next, s);
  if (!ok) return false;
  return check_launch(what);
}

}  // namespace

bool hc_post(float* X, int64_t T, int64_t d, const float* post, const float* comb, const float* f, void* stream,
             const HcNext* next) {
  return launch_post<false>("hc_post", X, T, d, post, comb, f, MoeCombineIn{}, next, as_stream(stream));
}

bool moe_combine_hc_post(const float* y_perm, const int32_t* slot_pos, const float* weights, const float* shared,
                         int64_t T, int k, int64_t d, float* X, const float* post, const float* comb, void* stream,
                         const HcNext* next) {
  return launch_post<true>("moe_combine_hc_post", X, T, d, post, comb, nullptr,
                           MoeCombineIn{y_perm, slot_pos, weights, shared, k}, next, as_stream(stream));
}

}  // namespace deepinfer::cuda
