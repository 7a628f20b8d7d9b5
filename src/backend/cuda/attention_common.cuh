// Shared by the V4 decode-attention kernels (attention_decode.cu: mma.sync, any launch;
// attention_wgmma.cu: warpgroup MMA, the default mode's large launches): shapes, the rows a
// (split, sequence) reads, the split merge with the sink and the output's finish. Device code
// only; never included outside backend/cuda.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

namespace deepinfer::cuda::attn {

constexpr int kD = 512, kH = 64, kTile = 64, kRope = 64, kRing = 128;
using bf16 = __nv_bfloat16;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;  // 0: zero-fill
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

__device__ __forceinline__ int num_splits(int total, int split_rows) {
  return total <= 0 ? 1 : (total + split_rows - 1) / split_rows;
}

// The rows of (split, sequence b): rows r0 .. r1 - 1 of the sequence's window rows then its
// compressed rows. Window row g (< nw) is row ((g + w_first) & w_mask) of `ring`: prefill mode,
// contiguous rows (w_first 0, no wrap); ring mode, slot (pos - nw + 1 + g) mod 128 (position order).
struct SplitRows {
  const bf16* ring;
  const bf16* entries;
  const int32_t* idx;
  int w_first, w_mask, nw, r0, r1, ntiles, nsplit;

  __device__ __forceinline__ SplitRows(const DecodeAttnArgs& a, int b, int split) {
    nw = min(a.n_window[b], kRing);
    const int total = nw + a.n_index[b];
    nsplit = num_splits(total, a.split_rows);
    r0 = split * a.split_rows, r1 = min(total, r0 + a.split_rows);
    ntiles = max(1, (r1 - r0 + kTile - 1) / kTile);
    if (a.window_row0) {
      ring = reinterpret_cast<const bf16*>(a.window) + size_t(a.window_row0[b]) * kD;
      w_first = 0, w_mask = -1;
    } else {
      ring = a.window_ptrs ? reinterpret_cast<const bf16*>(a.window_ptrs[b])
                           : reinterpret_cast<const bf16*>(a.window) + size_t(b) * kRing * kD;
      w_first = (a.pos[b] - nw + 1) & (kRing - 1), w_mask = kRing - 1;  // two's complement: a true mod
    }
    entries = reinterpret_cast<const bf16*>(a.entry_ptrs ? a.entry_ptrs[b] : a.entries);
    idx = a.index_is_prefix ? nullptr : a.index + size_t(b) * a.index_stride;
  }
  // Row r of tile t in two steps: ref() reads what the row needs from memory (a compressed row's
  // index), ptr() makes the source of it (null: past the split's rows, or a skipped index < 0).
  // The kernels take a tile's refs a tile ahead and its pointers when they issue its copies: made
  // at once, the index test stalled every thread on the index load before the tile's math (ncu,
  // the wgmma kernel at the EP step's shape: 16% of its stall samples).
  struct Ref {
    int kind, v;  // kind 0: no row; 1: ring row v; 2: compressed row with index v
  };
  __device__ __forceinline__ Ref ref(int t, int r) const {
    const int g = r0 + t * kTile + r;
    if (t >= ntiles || g >= r1) return {0, 0};
    if (g < nw) return {1, (g + w_first) & w_mask};
    return {2, idx ? idx[g - nw] : g - nw};  // no idx: the prefix form, entry i is row i
  }
  __device__ __forceinline__ const bf16* ptr(Ref f) const {
    if (f.kind == 1) return ring + size_t(f.v) * kD;
    return f.kind == 2 && f.v >= 0 ? entries + size_t(f.v) * kD : nullptr;
  }
};

// The merge of n split partials (m_i, l_i, o_i) with the sink, in split order; a single-split
// block calls it with n = 1 so both paths round identically.
struct Merge {
  float M, L;
};
__device__ __forceinline__ Merge merge_stats(const float* m, const float* l, int n, int stride, float sink) {
  float M = sink;
  for (int i = 0; i < n; ++i) M = fmaxf(M, m[i * stride]);
  float L = expf(sink - M);
  for (int i = 0; i < n; ++i) L = __fadd_rn(L, __fmul_rn(expf(m[i * stride] - M), l[i * stride]));
  return {M, L};
}
// merge_stats over values in registers (the first n of N): the same operations in the same order.
template <int N>
__device__ __forceinline__ Merge merge_stats_regs(const float (&m)[N], const float (&l)[N], int n, float sink) {
  float M = sink;
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (i < n) M = fmaxf(M, m[i]);
  float L = expf(sink - M);
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (i < n) L = __fadd_rn(L, __fmul_rn(expf(m[i] - M), l[i]));
  return {M, L};
}
// Normalises one (even, odd) output pair, applies the inverse rope on the tail and stores bf16.
__device__ __forceinline__ void finish_pair(float ox, float oy, float L, int d, int pos, const float* inv_freq,
                                            bf16* out) {
  float x = __fdiv_rn(ox, L), y = __fdiv_rn(oy, L);
  if (d >= kD - kRope) {
    const float ang = __fmul_rn(static_cast<float>(pos), inv_freq[(d - (kD - kRope)) >> 1]);
    float sn, cs;
    sincosf(ang, &sn, &cs);
    const float nx = __fadd_rn(__fmul_rn(x, cs), __fmul_rn(y, sn));  // conjugate rotation
    const float ny = __fsub_rn(__fmul_rn(y, cs), __fmul_rn(x, sn));
    x = nx, y = ny;
  }
  *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(x, y);
}

/// The warpgroup-MMA split kernel (attention_wgmma.cu) over every (split, sequence): single-split
/// sequences finished, the others' partials (o [batch, max_splits, 64, 512] in bf16, m / l in
/// fp32) in ws_o / ws_ml for attn_combine_kernel. False + last_error() on a launch failure.
bool launch_wgmma_splits(const DecodeAttnArgs& a, bf16* ws_o, float* ws_ml, int max_splits, cudaStream_t stream);

}  // namespace deepinfer::cuda::attn
