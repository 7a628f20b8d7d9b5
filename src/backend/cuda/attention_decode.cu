// V4 decode attention (one query token per sequence): 64 query heads over ONE shared K=V head of
// dim 512, rows = the sliding-window ring + a list of compressed rows, a per-head sink logit,
// softmax scale 1/sqrt(512), then the inverse RoPE of the tail 64 dims at the query position
// (V4-MODEL.md 2.3-2.6; CPU reference: src/model/deepseek_v4/attention.cpp). This file: the
// mma.sync kernel (any launch; the only one in batch-invariant mode) and the split merge;
// attention_wgmma.cu: the warpgroup-MMA kernel the default mode takes for large launches.
//
// Split-KV with a FIXED split size: sequence b's rows (window first, then compressed) are cut into
// splits of `split_rows`; one block runs one (split, sequence, head group) over HB heads, in 64-row
// tiles with an online softmax in a fixed order. A second kernel merges the splits in split order.
// HB = 64 (one group: the K tile is read once for all heads, best when the grid fills the GPU) or
// 16 (4 groups: 4x the blocks for small launches, where a few 64-head blocks leave most SMs idle
// and run latency-bound); the host picks it from the launch size. Each head's arithmetic is the
// same in both layouts (the same mma chains, k order, shuffles and rounding), so an output is
// bitwise the same whichever HB computes it, and nothing depends on the batch: a row's output is
// bitwise the same in any batch. A single-split sequence is finished in the first kernel by the
// same function.
//
// Ring mode: sequence b's ring (window + b * 128 rows, or window_ptrs[b]) holds position p at slot
// p % 128 and is read in position order, row j = slot (pos[b] - nw + 1 + j) mod 128. Prefill
// (window_row0 set): "sequence" b is one query token whose window rows are contiguous rows
// window_row0[b].. of the chunk's KV rows instead of ring b; only the row address differs, so the
// result is bitwise that of the ring mode on the same rows in the same (position) order.
// Compressed rows: entries (shared) or entry_ptrs[b] (per sequence), row index[b][j]. Per-sequence
// pointers are resolved once per block. Batches beyond the 65535 grid rows are launched in slices
// (a row's result does not depend on its slice). For thousands of queries use
// split_rows >= max_rows: one split per query needs no workspace (several need
// batch * splits * 64 * 514 * 4 bytes, 2.2 GB for 8192 queries of 640 rows at split 512).
//
// Math: bf16 q and K/V rows (as the reference kernel), QK^T and PV on the tensor cores
// (mma.sync m16n8k16 bf16, fp32 accumulate), P rounded to bf16 for PV (as the reference), softmax
// statistics in fp32, output bf16.
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/fp8_quant.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check;
using detail::check_launch;
using detail::fail;
using namespace attn;

namespace {

constexpr int kStride = kD + 8;      // bf16 per smem row: 1040 B, so 8 ldmatrix rows hit 8 bank groups
constexpr int kSStride = kTile + 4;  // fp32 logits row
constexpr int kPStride = kTile + 8;  // bf16 probabilities row
constexpr int kThreads = 256;        // 8 warps: (16-head mma group) x (row slice / dim slice)
constexpr int kWarps = kThreads / 32;
constexpr size_t kSmemK = size_t(kTile) * kStride * 2;
// Dynamic shared memory of the HB-head variant: q, 2 K stages, logits, probabilities, m / l / alpha,
// row validity.
constexpr size_t smem_bytes(int hb) {
  return size_t(hb) * kStride * 2 + 2 * kSmemK + size_t(hb) * kSStride * 4 + size_t(hb) * kPStride * 2 + 3 * hb * 4 +
         2 * kTile * 4;
}
static_assert(smem_bytes(kH) <= 232448, "exceeds the SM90 per-block shared memory");

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldsm_x2(uint32_t r[2], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}


// Block (split, sequence b_base + y, head group z) over heads z*HB .. z*HB + HB - 1. Warp w works on
// heads (w % G)*16.. of the group (G = HB/16 mma groups of 16) and on slice w / G of the 8/G slices
// of the tile's rows (phase 1: HB/2 rows, HB/16 n8 tiles) and of the output dims (phase 3: 4*HB
// dims). A logit is one mma chain over k = 0..511 and an output one chain over the tile's rows
// whatever the slice, so the layout only moves work between warps and blocks.
template <int HB>
__global__ void __launch_bounds__(kThreads, 1)
    attn_split_kernel(DecodeAttnArgs a, bf16* __restrict__ ws_o, float* __restrict__ ws_ml, int max_splits,
                      int b_base) {
  detail::pdl_entry();
  constexpr int kGroups = HB / 16, kSlices = kWarps / kGroups;
  constexpr int kRowTiles = kTile / kSlices / 8;  // n8 logit tiles per warp
  constexpr int kDimTiles = kD / kSlices / 8;     // n8 output tiles per warp
  static_assert(HB % 16 == 0 && kWarps % kGroups == 0 && (kRowTiles == 1 || kRowTiles % 2 == 0) && HB * 4 <= kThreads);
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sK = sQ + HB * kStride;  // 2 stages
  float* sS = reinterpret_cast<float*>(sK + 2 * kTile * kStride);
  bf16* sP = reinterpret_cast<bf16*>(sS + HB * kSStride);
  float* sM = reinterpret_cast<float*>(sP + HB * kPStride);
  float* sL = sM + HB;
  float* sA = sL + HB;
  int* sValid = reinterpret_cast<int*>(sA + HB);  // [2][kTile]
  __shared__ float sFreq[kRope / 2];  // read once: per-element global loads behind the output
                                      // stores could not be hoisted (possible aliasing) and
                                      // serialised the finish on load latency

  const int b = b_base + blockIdx.y, split = blockIdx.x, head0 = blockIdx.z * HB;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const SplitRows rows(a, b, split);
  const int nsplit = rows.nsplit, ntiles = rows.ntiles;
  if (split >= nsplit) return;
  const bf16* qb = reinterpret_cast<const bf16*>(a.q) + (size_t(b) * kH + head0) * kD;

  // Tile loads: thread tid copies row tid/4 of the tile, 16-byte chunks (tid%4) + 4i. Its row's
  // index is loaded one tile ahead and turned into its source when the copies are issued
  // (SplitRows::ref / ptr), so the load's latency overlaps the previous tile's math.
  const int lr = tid >> 2, lc = tid & 3;
  auto load_tile = [&](const bf16* src, int stage) {
    bf16* dst = sK + stage * kTile * kStride + lr * kStride;
    const bf16* s = src ? src : qb;  // any valid address: nothing is read (zero-fill)
#pragma unroll
    for (int i = 0; i < 16; ++i) cp_async16(dst + (lc + 4 * i) * 8, s + (lc + 4 * i) * 8, src != nullptr);
    if (lc == 0) sValid[stage * kTile + lr] = src != nullptr;
  };

  {
    for (int c = tid; c < HB * 64; c += kThreads) {
      const int h = c >> 6, ch = c & 63;
      cp_async16(sQ + h * kStride + ch * 8, qb + size_t(h) * kD + ch * 8, true);
    }
  }
  load_tile(rows.ptr(rows.ref(0, lr)), 0);
  cp_commit();
  SplitRows::Ref next = rows.ref(1, lr);
  if (tid < HB) sM[tid] = -INFINITY, sL[tid] = 0.f;
  if (tid < kRope / 2) sFreq[tid] = a.inv_freq[tid];
  const int pos_b = a.pos[b];

  const int hg = warp % kGroups, slice = warp / kGroups, g = lane >> 2, tq = lane & 3;
  const float scale = rsqrtf(static_cast<float>(kD));
  float acc[kDimTiles][4];
#pragma unroll
  for (int i = 0; i < kDimTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;

  for (int t = 0; t < ntiles; ++t) {
    if (t + 1 < ntiles) {
      load_tile(rows.ptr(next), (t + 1) & 1);
      cp_commit();
      next = rows.ref(t + 2, lr);
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    __syncthreads();
    const bf16* K = sK + (t & 1) * kTile * kStride;
    const int* valid = sValid + (t & 1) * kTile;
    // Phase 1: logits of heads hg*16.. over rows slice*(8 kRowTiles).. (k = 512).
    {
      float s[kRowTiles][4];
#pragma unroll
      for (int i = 0; i < kRowTiles; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
      const bf16* qa = sQ + (hg * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride + (lane >> 4) * 8;
      const bf16* kb =
          K + (slice * kRowTiles * 8 + (lane & 7) + (lane >> 4) * 8) * kStride + ((lane >> 3) & 1) * 8;
#pragma unroll 4
      for (int ks = 0; ks < kD / 16; ++ks) {
        uint32_t af[4];
        ldsm_x4(af, qa + ks * 16);
        if constexpr (kRowTiles == 1) {
          uint32_t bf[2];
          ldsm_x2(bf, kb + ks * 16);  // lanes 0-15's addresses: rows 0-7, k 0-7 / 8-15
          mma_bf16(s[0], af, bf[0], bf[1]);
        } else {
#pragma unroll
          for (int p = 0; p < kRowTiles / 2; ++p) {
            uint32_t bf[4];
            ldsm_x4(bf, kb + p * 16 * kStride + ks * 16);
            mma_bf16(s[2 * p], af, bf[0], bf[1]);
            mma_bf16(s[2 * p + 1], af, bf[2], bf[3]);
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < kRowTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = slice * kRowTiles * 8 + nt * 8 + tq * 2 + e;
          const bool v = valid[col] != 0;
          sS[(hg * 16 + g) * kSStride + col] = v ? s[nt][e] * scale : -INFINITY;
          sS[(hg * 16 + g + 8) * kSStride + col] = v ? s[nt][2 + e] * scale : -INFINITY;
        }
    }
    __syncthreads();
    // Phase 2: online softmax update, 4 threads per head, 16 rows each (warps past 4 HB threads
    // idle: whole warps, so the shuffles below stay full-warp).
    if (tid < HB * 4) {
      const int h = tid >> 2, qd = tid & 3;
      const float* srow = sS + h * kSStride + qd * 16;
      float v[16], mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 16; ++j) v[j] = srow[j], mx = fmaxf(mx, v[j]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_old = sM[h], l_old = sL[h];
      const float m_new = fmaxf(m_old, mx);
      const bool none = m_new == -INFINITY;
      const float alpha = none ? 1.f : expf(m_old - m_new);
      float sum = 0.f;
      __nv_bfloat162* prow = reinterpret_cast<__nv_bfloat162*>(sP + h * kPStride + qd * 16);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float p0 = none ? 0.f : expf(v[2 * j] - m_new), p1 = none ? 0.f : expf(v[2 * j + 1] - m_new);
        sum = __fadd_rn(__fadd_rn(sum, p0), p1);
        prow[j] = __floats2bfloat162_rn(p0, p1);
      }
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 1));
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
      __syncwarp();
      if (qd == 0) sL[h] = __fadd_rn(__fmul_rn(alpha, l_old), sum), sM[h] = m_new, sA[h] = alpha;
    }
    __syncthreads();
    // Phase 3: O[heads hg*16.., dims slice*(8 kDimTiles)..] = alpha * O + P . V (V = the same K tile).
    {
      const float al0 = sA[hg * 16 + g], al1 = sA[hg * 16 + g + 8];
#pragma unroll
      for (int i = 0; i < kDimTiles; ++i) acc[i][0] *= al0, acc[i][1] *= al0, acc[i][2] *= al1, acc[i][3] *= al1;
      const bf16* pa = sP + (hg * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kPStride + (lane >> 4) * 8;
      const bf16* vb =
          K + ((lane & 7) + ((lane >> 3) & 1) * 8) * kStride + slice * kDimTiles * 8 + (lane >> 4) * 8;
#pragma unroll
      for (int ks = 0; ks < kTile / 16; ++ks) {
        uint32_t pf[4];
        ldsm_x4(pf, pa + ks * 16);
#pragma unroll
        for (int np = 0; np < kDimTiles / 2; ++np) {
          uint32_t vf[4];
          ldsm_x4_t(vf, vb + ks * 16 * kStride + np * 16);
          mma_bf16(acc[2 * np], pf, vf[0], vf[1]);
          mma_bf16(acc[2 * np + 1], pf, vf[2], vf[3]);
        }
      }
    }
    __syncthreads();
  }

  // Finish (one split) or write the partial (several splits).
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int hl = hg * 16 + g + rr * 8, h = head0 + hl;
    const float m = sM[hl], l = sL[hl];
    if (nsplit == 1) {
      const Merge mg = merge_stats(&m, &l, 1, 0, a.sink[h]);
      const float w = expf(m - mg.M);
      bf16* orow = reinterpret_cast<bf16*>(a.out) + (size_t(b) * kH + h) * kD;
#pragma unroll
      for (int nt = 0; nt < kDimTiles; ++nt) {
        const int d = slice * kDimTiles * 8 + nt * 8 + tq * 2;
        finish_pair(__fadd_rn(0.f, __fmul_rn(w, acc[nt][2 * rr])), __fadd_rn(0.f, __fmul_rn(w, acc[nt][2 * rr + 1])),
                    mg.L, d, pos_b, sFreq, orow + d);
      }
    } else {
      bf16* orow = ws_o + ((size_t(b) * max_splits + split) * kH + h) * kD;
#pragma unroll
      for (int nt = 0; nt < kDimTiles; ++nt) {
        const int d = slice * kDimTiles * 8 + nt * 8 + tq * 2;
        *reinterpret_cast<__nv_bfloat162*>(orow + d) = __floats2bfloat162_rn(acc[nt][2 * rr], acc[nt][2 * rr + 1]);
      }
      if (slice == 0 && tq == 0) {
        float* ml = ws_ml + ((size_t(b) * max_splits + split) * kH + h) * 2;
        ml[0] = m, ml[1] = l;
      }
    }
  }
}

constexpr int kCombineHeads = 4, kCombineThreads = 256, kCombineFast = 4;
// out's row b, the block's 4 heads, quantised as quantize_act_fp8 does (a warp per 128 columns).
__device__ __forceinline__ void quant_block_heads(const DecodeAttnArgs& a, int b) {
  constexpr int kCols = kH * kD, kUnits = kCombineHeads * kD / 128;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const size_t row = size_t(b) * kCols;
  for (int u = warp; u < kUnits; u += kCombineThreads / 32) {
    const int c = blockIdx.y * kCombineHeads * kD + u * 128 + lane * 4;
    float v[4];
    detail::bf16x4_to_float(*reinterpret_cast<const uint2*>(a.out + row + c), v);
    uint32_t packed;
    const float s = detail::quant4_e4m3_pow2(v, packed);
    *reinterpret_cast<uint32_t*>(a.out_q8 + row + c) = packed;
    if (lane == 0) a.out_qs[size_t(b) * (kCols / 128) + c / 128] = s;
  }
}
// Row b's n > 1 splits merged, the block's 4 heads.
__device__ __forceinline__ void merge_splits(const DecodeAttnArgs& a, const bf16* __restrict__ ws_o,
                                             const float* __restrict__ ws_ml, int max_splits, int b, int n) {
  __shared__ float sFreq[kRope / 2];
  if (threadIdx.x < kRope / 2) sFreq[threadIdx.x] = a.inv_freq[threadIdx.x];
  __syncthreads();
  const int pos_b = a.pos[b];
  const float* ml = ws_ml + size_t(b) * max_splits * kH * 2;
  const bf16* o = ws_o + size_t(b) * max_splits * kH * kD;
  bf16* out = reinterpret_cast<bf16*>(a.out) + size_t(b) * kH * kD;
  if (n <= kCombineFast) {
    // Up to kCombineFast splits (decode's CSA rows at split 256: 3): each thread's pairs (one per
    // head) with every load requested before the first merge, then the loop below's arithmetic.
    constexpr int kPer = kCombineHeads * (kD / 2) / kCombineThreads;
    float mv[kPer][kCombineFast], lv[kPer][kCombineFast];
    float2 v[kPer][kCombineFast];
#pragma unroll
    for (int r = 0; r < kPer; ++r) {
      const int i = threadIdx.x + r * kCombineThreads;
      const int h = blockIdx.y * kCombineHeads + i / (kD / 2), d = (i % (kD / 2)) * 2;
#pragma unroll
      for (int s = 0; s < kCombineFast; ++s)
        if (s < n) {
          mv[r][s] = ml[(s * kH + h) * 2], lv[r][s] = ml[(s * kH + h) * 2 + 1];
          v[r][s] = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(o + (size_t(s) * kH + h) * kD + d));
        }
    }
#pragma unroll
    for (int r = 0; r < kPer; ++r) {
      const int i = threadIdx.x + r * kCombineThreads;
      const int h = blockIdx.y * kCombineHeads + i / (kD / 2), d = (i % (kD / 2)) * 2;
      const Merge mg = merge_stats_regs(mv[r], lv[r], n, a.sink[h]);
      float ox = 0.f, oy = 0.f;
#pragma unroll
      for (int s = 0; s < kCombineFast; ++s)
        if (s < n) {
          const float w = expf(mv[r][s] - mg.M);
          ox = __fadd_rn(ox, __fmul_rn(w, v[r][s].x));
          oy = __fadd_rn(oy, __fmul_rn(w, v[r][s].y));
        }
      finish_pair(ox, oy, mg.L, d, pos_b, sFreq, out + size_t(h) * kD + d);
    }
    return;
  }
  for (int i = threadIdx.x; i < kCombineHeads * (kD / 2); i += blockDim.x) {
    const int h = blockIdx.y * kCombineHeads + i / (kD / 2), d = (i % (kD / 2)) * 2;
    const Merge mg = merge_stats(ml + h * 2, ml + h * 2 + 1, n, kH * 2, a.sink[h]);
    float ox = 0.f, oy = 0.f;
    for (int s = 0; s < n; ++s) {
      const float w = expf(ml[(s * kH + h) * 2] - mg.M);
      const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(o + (size_t(s) * kH + h) * kD + d));
      ox = __fadd_rn(ox, __fmul_rn(w, v.x));
      oy = __fadd_rn(oy, __fmul_rn(w, v.y));
    }
    finish_pair(ox, oy, mg.L, d, pos_b, sFreq, out + size_t(h) * kD + d);
  }
}

// Merges the splits of each multi-split sequence: grid (batch, 16), 4 heads per block,
// kCombineThreads threads. With a.out_q8, then quantises the block's 4 heads of the row (merged
// here, or a single split's, written by the split kernel): quantize_act_fp8's bits.
__global__ void attn_combine_kernel(DecodeAttnArgs a, const bf16* __restrict__ ws_o, const float* __restrict__ ws_ml,
                                    int max_splits) {
  detail::pdl_entry();
  const int b = blockIdx.x;
  const int total = min(a.n_window[b], kRing) + a.n_index[b];
  const int n = num_splits(total, a.split_rows);
  if (n > 1) merge_splits(a, ws_o, ws_ml, max_splits, b, n);
  if (a.out_q8) {
    __syncthreads();  // the block's rows of out (written above, or before the PDL wait) seen by every thread
    quant_block_heads(a, b);
  }
}

int host_max_splits(const DecodeAttnArgs& a) {
  return a.max_rows <= 0 ? 1 : (a.max_rows + a.split_rows - 1) / a.split_rows;
}

// Heads per block for a launch of `blocks` (split, sequence) pairs. Both variants run one block per
// SM (shared memory: 222 KB at 64 heads, 153 KB at 16). A 16-head block does a quarter of the math
// of a 64-head one but, latency-bound, takes 0.4-0.6 of its time (H200: 17 vs 43 us for a split of
// 2 tiles, 41 vs 65 us for 8: about 4 us per tile either way, the rest fixed); while the 16-head
// grid fits in two waves it mostly beats one wave of 64-head blocks (measured: 4 of 5 shapes with
// 33-66 pairs; the loss, 8-tile splits at 64 pairs, was 9%). Past that the 64-head blocks fill the
// GPU and read each K tile once for all heads.
constexpr int kSmallGridWaves = 2;
int heads_per_block(int64_t blocks) {
  return blocks * (kH / 16) <= int64_t(kSmallGridWaves) * detail::sm_count() ? 16 : kH;
}

// Sets the dynamic shared memory limit of each variant, once per device.
bool set_smem_attributes() {
  static std::atomic<uint64_t> set16{0}, set64{0};
  return detail::max_dynamic_smem_once(reinterpret_cast<const void*>(attn_split_kernel<16>), int(smem_bytes(16)),
                                       set16, "decode_attention: smem attribute") &&
         detail::max_dynamic_smem_once(reinterpret_cast<const void*>(attn_split_kernel<kH>), int(smem_bytes(kH)),
                                       set64, "decode_attention: smem attribute");
}

bool combine(const DecodeAttnArgs& args, const bf16* ws_o, const float* ws_ml, int max_splits, cudaStream_t s) {
  detail::launch_pdl(attn_combine_kernel, dim3(args.batch, kH / kCombineHeads), kCombineThreads, 0, s, args, ws_o, ws_ml,
                     max_splits);
  return check_launch("decode_attention combine");
}

// After the split launches: the merge where a sequence may have several splits (it also quantises
// out when asked), else out's quantisation alone where asked.
bool finish(const DecodeAttnArgs& a, const bf16* ws_o, const float* ws_ml, int max_splits, cudaStream_t s) {
  if (max_splits > 1) return combine(a, ws_o, ws_ml, max_splits, s);
  return !a.out_q8 || quantize_act_fp8(a.out, true, a.batch, int64_t(kH) * kD, a.out_q8, a.out_qs, s);
}

}  // namespace

int32_t decode_split_rows(int32_t batch, int32_t max_rows, int32_t base_split) {
  // Measured on an H100 (cuda_attn_lt_bench, 128 + 512 rows, wgmma kernel with its combine): at
  // 256 queries one split took 121 us against 164 for three of 256 rows, at 128 65 against 90; at
  // 64 two splits of 320 took 43 us (one: 58, three: 54); at 32 and below three splits of 256 were
  // fastest. n = round(SMs / batch) splits a query, never more than the base split makes.
  if (batch <= 0 || base_split <= 0 || max_rows <= base_split) return base_split;
  const int64_t n = std::max<int64_t>(1, (int64_t(detail::sm_count()) + batch / 2) / batch);
  if (n >= (max_rows + base_split - 1) / base_split) return base_split;
  return static_cast<int32_t>((max_rows + n * kTile - 1) / (n * kTile) * kTile);
}

int32_t decode_base_split(int32_t batch, int32_t max_rows) {
  // Measured on an H100 (v4-flash-4, context 4k, device ms a step, 256 against 64 for every
  // launch): batch 1 1.062 -> 1.050, 2 1.195 -> 1.180, 4 1.412 -> 1.405, 8 1.769 -> 1.777 (128 fell
  // between): a CSA query's 3 splits of 256 are 12 blocks, a tenth of the SMs, at batch 1. A limit
  // of SMs / 8 (batch 8's HCA and window-only layers at 64 too) lost 0.6% at batch 8, so the
  // limit is a fifth of the SMs in blocks (4 a query's split): CSA to batch 2, the others to 6.
  constexpr int32_t kBase = 256;
  const int64_t splits = int64_t(std::max<int32_t>(batch, 1)) * ((std::max<int32_t>(max_rows, 1) + kBase - 1) / kBase);
  return splits * 4 * 5 < detail::sm_count() ? kTile : kBase;
}

size_t decode_attention_workspace_bytes(const DecodeAttnArgs& a) {
  const int s = host_max_splits(a);
  if (s <= 1) return 0;
  return size_t(a.batch) * s * kH * (kD * sizeof(bf16) + 2 * sizeof(float));  // bf16 o, fp32 m / l
}

bool decode_attention(const DecodeAttnArgs& a, void* workspace, void* stream) {
  if (a.batch <= 0) return true;
  if (!a.q || !a.n_window || !a.n_index || !a.sink || !a.pos || !a.inv_freq || !a.out)
    return fail("decode_attention: null argument");
  if (a.window_row0 ? !a.window : !a.window && !a.window_ptrs)
    return fail("decode_attention: window rows need window (prefill mode: window and window_row0; ring mode: "
                "window or window_ptrs)");
  if (a.window_row0 && a.window_ptrs)
    return fail("decode_attention: window_ptrs is for the ring mode only (no window_row0)");
  if (a.split_rows <= 0 || a.split_rows % kTile) return fail("decode_attention: split_rows must be a multiple of 64");
  if (!a.out_q8 != !a.out_qs) return fail("decode_attention: out_q8 and out_qs go together");
  if (a.max_rows > kRing && ((!a.index && !a.index_is_prefix) || (!a.entries && !a.entry_ptrs)))
    return fail("decode_attention: compressed rows need index (or index_is_prefix) and entries (or entry_ptrs)");
  const int max_splits = host_max_splits(a);
  if (max_splits > 65535) return fail("decode_attention: too many splits");
  bf16* ws_o = static_cast<bf16*>(workspace);
  float* ws_ml = ws_o ? reinterpret_cast<float*>(ws_o + size_t(a.batch) * max_splits * kH * kD) : nullptr;
  if (max_splits > 1 && !workspace) return fail("decode_attention: workspace required (several splits)");
  if (a.heads_per_block != 0 && a.heads_per_block != 16 && a.heads_per_block != kH)
    return fail("decode_attention: heads_per_block must be 0 (chosen from the launch size), 16 or 64");
  DecodeAttnArgs args = a;
  if (!args.index && !args.index_is_prefix) args.index = args.n_index;  // never dereferenced: no compressed rows
  if (!args.entries) args.entries = args.window;  // read only through an index >= 0 (or entry_ptrs)
  const int hb = a.heads_per_block ? a.heads_per_block : heads_per_block(int64_t(a.batch) * max_splits);
  if (a.wgmma && hb == kH) {
    if (!launch_wgmma_splits(args, ws_o, ws_ml, max_splits, as_stream(stream))) return false;
    return finish(args, ws_o, ws_ml, max_splits, as_stream(stream));
  }
  if (!set_smem_attributes()) return false;
  auto* kernel = hb == 16 ? attn_split_kernel<16> : attn_split_kernel<kH>;
  constexpr int kMaxGridY = 65535;
  for (int b0 = 0; b0 < a.batch; b0 += kMaxGridY) {
    const int nb = std::min(kMaxGridY, a.batch - b0);
    detail::launch_pdl(kernel, dim3(max_splits, nb, kH / hb), kThreads, smem_bytes(hb), as_stream(stream), args, ws_o, ws_ml,
                                                                                          max_splits, b0);
    if (!check_launch("decode_attention split")) return false;
  }
  return finish(args, ws_o, ws_ml, max_splits, as_stream(stream));
}

}  // namespace deepinfer::cuda
