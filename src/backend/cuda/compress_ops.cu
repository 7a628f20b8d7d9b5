// V4's compressor (CSA / HCA) and lightning indexer on CUDA (compress_ops.h). The math and order
// of operations follow src/model/deepseek_v4/compressor.cpp and attention.cpp.
//
// compressor_step runs two kernels, both free of host syncs and allocations (graph-capturable):
//   pool   one block per (closing window, sequence): every window that closes in this step is
//          pooled independently (its rows come from the chunk's input, the open-window buffer
//          or the previous window's overlap half), softmax over gates per channel, RMSNorm,
//          RoPE, optional reference rounding, bf16 entry.
//   state  one block per (window row, sequence): carries the open window and the overlap half
//          to the end of the chunk (each thread reads the old buffer value before overwriting
//          it, so no other thread depends on it). Runs after pool on the same stream.
// indexer_select runs two kernels:
//   score  one block per (query, chunk of up to 1024 entries): q (fp32) is split into bf16 hi + lo parts and
//          multiplied with bf16 key tiles by mma.sync m16n8k16 (fp32 accumulate; hi + lo keeps
//          ~2^-17 relative precision of q), relu, head weights, sum over heads -> fp32 scores in
//          the workspace [tokens, max_visible].
//   topk   one block per query: radix select (4 passes of 8 bits) of the k-th largest score,
//          then an in-order scan that keeps scores above it and the lowest-index ties, which
//          writes the selection in ascending entry order. Deterministic.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <string>

#include "backend/cuda/compress_ops.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/mma_common.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check;
using detail::check_launch;
using detail::fail;

namespace {

using bf16 = __nv_bfloat16;

// ---------------------------------------------------------------------------------------------
// Reference rounding (model/numerics.cpp), in float: every step is exact where the CPU's double
// arithmetic is (division and multiplication by powers of two, round to nearest even).

__device__ __forceinline__ float round_grid(float a, int mant, int emin) {
  if (a == 0.f) return 0.f;
  int e = 0;
  frexpf(a, &e);
  const int fl = max(e - 1, emin);
  const float q = ldexpf(1.f, fl - mant);
  return rintf(a / q) * q;
}
__device__ __forceinline__ float round_e4m3(float x) { return copysignf(round_grid(fminf(fabsf(x), 448.f), 3, -6), x); }
__device__ __forceinline__ float round_e2m1(float x) { return copysignf(round_grid(fminf(fabsf(x), 6.f), 1, 0), x); }
__device__ __forceinline__ float pow2_ceil(float t) {
  int e = 0;
  const float m = frexpf(t, &e);
  return ldexpf(1.f, m == 0.5f ? e - 1 : e);
}
__device__ __forceinline__ float fp8_scale(float amax) { return pow2_ceil(fmaxf(amax, 1e-4f) / 448.f); }
__device__ __forceinline__ float fp4_scale(float amax) { return pow2_ceil(fmaxf(amax, 6.f * 1.1754943508222875e-38f) / 6.f); }

// ---------------------------------------------------------------------------------------------
// Compressor

constexpr int kMaxWidth = 1024;

// Sequence b of a step, with its state's addresses resolved once (slot layout or the `seq`
// pointer table): buf_* [ratio, cw], prev_* [ratio, width] (CSA), entries [.., width] at entry 0.
struct SeqStep {
  int tok, pos0, end, wo, wn;  // wo: window open at the start; wn: open at the end
  float* buf_kv;
  float* buf_gate;
  float* prev_kv;
  float* prev_gate;
  uint16_t* entries;
};
__device__ __forceinline__ SeqStep seq_step(const CompressorStepArgs& a, int b) {
  SeqStep s;
  s.tok = a.tok_offset[b];
  s.pos0 = a.pos0[b];
  s.end = s.pos0 + a.count[b];
  s.wo = s.pos0 / a.ratio;
  s.wn = s.end / a.ratio;
  if (a.seq) {
    const CompressorSeqPtrs p = a.seq[b];
    s.buf_kv = p.buf_kv, s.buf_gate = p.buf_gate, s.prev_kv = p.prev_kv, s.prev_gate = p.prev_gate;
    s.entries = p.entries;
  } else {
    const int64_t slot = a.slot[b], cw = (a.overlap ? 2 : 1) * a.width;
    s.buf_kv = a.buf_kv + slot * a.ratio * cw;
    s.buf_gate = a.buf_gate + slot * a.ratio * cw;
    s.prev_kv = a.overlap ? a.prev_kv + slot * a.ratio * a.width : nullptr;
    s.prev_gate = a.overlap ? a.prev_gate + slot * a.ratio * a.width : nullptr;
    s.entries = a.entries + a.entry_base[b] * a.width;
  }
  return s;
}

// Value of channel ch (of cw) at position p, from wherever the row lives: the chunk's input
// (p >= pos0; gate plus ape), the open-window buffer (window wo) or the overlap half (window
// wo - 1, ch < width only).
__device__ __forceinline__ void row_value(const CompressorStepArgs& a, const SeqStep& s, int64_t p, int ch, int cw,
                                          float& kv, float& g) {
  const int r = static_cast<int>(p % a.ratio);
  if (p >= s.pos0) {
    const int64_t i = (static_cast<int64_t>(s.tok) + (p - s.pos0)) * (a.row_stride > 0 ? a.row_stride : cw) + ch;
    kv = a.kv[i];
    g = a.gate[i] + a.ape[static_cast<int64_t>(r) * cw + ch];
  } else if (p >= static_cast<int64_t>(s.wo) * a.ratio) {
    const int64_t i = static_cast<int64_t>(r) * cw + ch;
    kv = s.buf_kv[i];
    g = s.buf_gate[i];
  } else {
    const int64_t i = static_cast<int64_t>(r) * a.width + ch;
    kv = s.prev_kv[i];
    g = s.prev_gate[i];
  }
}

__device__ __forceinline__ float block_sum(float v, float* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
  __syncthreads();  // red may still be read from a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = 0.f;
  for (int w = 0; w < nw; ++w) s += red[w];  // same order in every thread
  return s;
}

// The normalised Hadamard of a block's row x[0, W) in shared memory (numerics::hadamard's butterfly
// order), then FP4 e2m1 per 32 with ue8m0 scales (numerics::fake_fp4): channel ch's value. W
// threads (one channel each), W a power of two; scale holds W / 32 floats. Ends with x rotated.
__device__ __forceinline__ float hadamard_fp4(float* x, float* scale, int W, int ch) {
  for (int h = 1; h < W; h *= 2) {
    if (ch < W / 2) {
      const int k = (ch / h) * 2 * h + (ch % h);
      const float p0 = x[k], p1 = x[k + h];
      x[k] = p0 + p1;
      x[k + h] = p0 - p1;
    }
    __syncthreads();
  }
  const float hs = 1.f / sqrtf(static_cast<float>(W));
  x[ch] *= hs;
  __syncthreads();
  if (ch < W / 32) {
    float amax = 0.f;
    for (int k = ch * 32; k < ch * 32 + 32; ++k) amax = fmaxf(amax, fabsf(x[k]));
    scale[ch] = fp4_scale(amax);
  }
  __syncthreads();
  return round_e2m1(x[ch] / scale[ch / 32]) * scale[ch / 32];
}

// grid rows, width threads: hadamard_fp4 of each row of x, in place.
__global__ void __launch_bounds__(kMaxWidth) hadamard_fp4_rows_kernel(float* __restrict__ x, int width) {
  detail::pdl_entry();
  __shared__ float row[kMaxWidth];
  __shared__ float scale[kMaxWidth / 32];
  float* const xr = x + static_cast<int64_t>(blockIdx.x) * width;
  const int ch = threadIdx.x;
  row[ch] = xr[ch];
  __syncthreads();
  xr[ch] = hadamard_fp4(row, scale, width, ch);
}

// grid (ceil(max_count / ratio), batch), width threads (one channel each).
__global__ void __launch_bounds__(kMaxWidth) compress_pool_kernel(CompressorStepArgs a) {
  detail::pdl_entry();
  __shared__ float x[kMaxWidth];
  __shared__ float red[32];
  __shared__ float scale[kMaxWidth / 32];
  const int b = blockIdx.y;
  const SeqStep s = seq_step(a, b);
  const int w = s.wo + static_cast<int>(blockIdx.x);
  if (w >= s.wn) return;  // uniform over the block
  const int W = a.width, R = a.ratio, cw = (a.overlap ? 2 : 1) * W, ch = threadIdx.x;
  // Softmax over the window's rows per channel (CSA: window w-1's A halves, then w's B halves).
  const int64_t p_prev = static_cast<int64_t>(w - 1) * R, p_this = static_cast<int64_t>(w) * R;
  const bool with_prev = a.overlap && w >= 1;
  const int off = a.overlap ? W : 0;
  float kv, g, mx = -INFINITY;
  if (with_prev)
    for (int r = 0; r < R; ++r) row_value(a, s, p_prev + r, ch, cw, kv, g), mx = fmaxf(mx, g);
  for (int r = 0; r < R; ++r) row_value(a, s, p_this + r, off + ch, cw, kv, g), mx = fmaxf(mx, g);
  float sum = 0.f;
  if (with_prev)
    for (int r = 0; r < R; ++r) row_value(a, s, p_prev + r, ch, cw, kv, g), sum += expf(g - mx);
  for (int r = 0; r < R; ++r) row_value(a, s, p_this + r, off + ch, cw, kv, g), sum += expf(g - mx);
  float acc = 0.f;
  if (with_prev)
    for (int r = 0; r < R; ++r) row_value(a, s, p_prev + r, ch, cw, kv, g), acc += kv * (expf(g - mx) / sum);
  for (int r = 0; r < R; ++r) row_value(a, s, p_this + r, off + ch, cw, kv, g), acc += kv * (expf(g - mx) / sum);
  // RMSNorm
  const float ms = block_sum(acc * acc, red);
  const float rs = 1.f / sqrtf(ms / static_cast<float>(W) + a.eps);
  x[ch] = a.norm[ch] * (acc * rs);
  __syncthreads();
  // RoPE at the window's first position on the last rope_dim dims (interleaved pairs).
  float v = x[ch];
  const int j = ch - (W - a.rope_dim);
  if (j >= 0) {
    const int i = j >> 1;
    const float angle = static_cast<float>(p_this) * a.inv_freq[i];
    const float c = cosf(angle), sn = sinf(angle);
    const float re = x[W - a.rope_dim + 2 * i], im = x[W - a.rope_dim + 2 * i + 1];
    v = (j & 1) ? im * c + re * sn : re * c - im * sn;
  }
  __syncthreads();
  x[ch] = v;
  __syncthreads();
  if (a.round_mode == 1) {  // FP8 e4m3 per 64 over the nope dims, ue8m0 scales
    const int n = W - a.rope_dim, nb = (n + 63) / 64;
    if (ch < nb) {
      float amax = 0.f;
      for (int k = ch * 64; k < min(n, ch * 64 + 64); ++k) amax = fmaxf(amax, fabsf(x[k]));
      scale[ch] = fp8_scale(amax);
    }
    __syncthreads();
    if (ch < n) v = round_e4m3(x[ch] / scale[ch / 64]) * scale[ch / 64];
  } else if (a.round_mode == 2) {
    v = hadamard_fp4(x, scale, W, ch);
  }
  s.entries[static_cast<int64_t>(w) * W + ch] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// grid (rows, batch): CSA rows = ratio (a closing window copies every row's A half into prev);
// HCA rows = min(ratio, max_count), block j handles buffer row r_first + j.
__global__ void __launch_bounds__(256) compress_state_kernel(CompressorStepArgs a) {
  detail::pdl_entry();
  const int b = blockIdx.y;
  const SeqStep s = seq_step(a, b);
  const int W = a.width, R = a.ratio, cw = (a.overlap ? 2 : 1) * W;
  const int64_t new_base = static_cast<int64_t>(s.wn) * R;  // first position of the open window at the end
  int r = blockIdx.x;
  if (!a.overlap) r += static_cast<int>((s.pos0 > new_base ? static_cast<int64_t>(s.pos0) : new_base) - new_base);
  if (r >= R) return;
  const int64_t p_new = new_base + r;
  const bool write_buf = p_new >= s.pos0 && p_new < s.end;
  const bool write_prev = a.overlap && s.wn > s.wo;
  if (!write_buf && !write_prev) return;
  const int64_t p_prev = static_cast<int64_t>(s.wn - 1) * R + r;
  const int64_t bi = static_cast<int64_t>(r) * cw;
  for (int ch = threadIdx.x; ch < cw; ch += blockDim.x) {
    if (write_prev && ch < W) {  // window wn-1 closed in this step: its row r's A half
      float kv, g;
      if (p_prev >= s.pos0) {
        row_value(a, s, p_prev, ch, cw, kv, g);
      } else {  // in the old open window: read before this thread overwrites it below
        kv = s.buf_kv[bi + ch];
        g = s.buf_gate[bi + ch];
      }
      const int64_t pi = static_cast<int64_t>(r) * W + ch;
      s.prev_kv[pi] = kv;
      s.prev_gate[pi] = g;
    }
    if (write_buf) {
      float kv, g;
      row_value(a, s, p_new, ch, cw, kv, g);
      s.buf_kv[bi + ch] = kv;
      s.buf_gate[bi + ch] = g;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Indexer scores

constexpr int kIdxMaxH = 64, kIdxMaxD = 128;
constexpr int kIdxStride = kIdxMaxD + 8;  // bf16 per smem row: 272 B, fragment loads conflict-free
constexpr int kIdxTile = 128;             // entries per tile (4 warps x 32)
constexpr int kIdxMaxChunk = 1024;        // entries per block (fewer when there are few queries)
constexpr int kIdxThreads = 128;
constexpr size_t kIdxSmemQ = size_t(kIdxMaxH) * kIdxStride * 2;     // bytes of one of hi / lo
constexpr size_t kIdxSmemK = size_t(kIdxTile) * kIdxStride * 2;     // bytes of one key tile
constexpr size_t kIdxSmemBytes = 2 * kIdxSmemQ + 2 * kIdxSmemK + kIdxMaxH * 4;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;  // 0: zero-fill
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sa), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;"); }

__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t smem_addr(const bf16* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// Loads key tile [kIdxTile, D] (rows >= nv zero-filled) asynchronously.
__device__ __forceinline__ void load_key_tile(bf16* dst, const uint16_t* keys, int64_t base, int e0, int nv, int D) {
  const int per_row = D / 8;
  for (int i = threadIdx.x; i < kIdxTile * per_row; i += kIdxThreads) {
    const int row = i / per_row, c = i % per_row, e = e0 + row;
    const bool valid = e < nv;
    const uint16_t* src = keys + (base + (valid ? e : 0)) * D + c * 8;
    cp_async16(dst + row * kIdxStride + c * 8, src, valid);
  }
  cp_commit();
}

// grid (tokens, ceil(max_visible / chunk)), kIdxThreads threads; chunk a multiple of kIdxTile.
// scores [tokens, max_visible].
__global__ void __launch_bounds__(kIdxThreads) indexer_score_kernel(IndexerArgs a, int chunk, float* __restrict__ scores) {
  detail::pdl_entry();
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* qhi = reinterpret_cast<bf16*>(smem);
  bf16* qlo = reinterpret_cast<bf16*>(smem + kIdxSmemQ);
  bf16* ktiles = reinterpret_cast<bf16*>(smem + 2 * kIdxSmemQ);  // two buffers of kIdxTile rows
  float* wk = reinterpret_cast<float*>(smem + 2 * kIdxSmemQ + 2 * kIdxSmemK);
  const int t = blockIdx.x, H = a.heads, D = a.head_dim;
  const int nv = a.n_visible[t];
  const int c0 = blockIdx.y * chunk, c1 = min(nv, c0 + chunk);
  if (c0 >= c1) return;
  const int64_t kbase = a.key_base[t];
  const uint16_t* keys = a.key_ptrs ? a.key_ptrs[t] : a.keys;  // resolved once per block
  load_key_tile(ktiles, keys, kbase, c0, nv, D);
  // q -> bf16 hi + lo (rows >= H zero), head weights w_h / sqrt(H). Element i of the [64, D] block
  // is q[i] (h = i / D < H); a thread's float4s (4 elements of one row: D % 16 == 0) are all
  // requested before the first is converted (one at a time, the q loads had been a chain of L2
  // round trips at the head of every block).
  const float* q = a.q + static_cast<int64_t>(t) * H * D;
  constexpr int kQv = kIdxMaxH * kIdxMaxD / 4 / kIdxThreads;  // float4s per thread, at most
  float4 qv[kQv];
#pragma unroll
  for (int u = 0; u < kQv; ++u) {
    const int i = (threadIdx.x + u * kIdxThreads) * 4;
    qv[u] = i < H * D ? *reinterpret_cast<const float4*>(q + i) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int u = 0; u < kQv; ++u) {
    const int i = (threadIdx.x + u * kIdxThreads) * 4;
    if (i < kIdxMaxH * D) {
      const int h = i / D, k = i % D;
      const float v[4] = {qv[u].x, qv[u].y, qv[u].z, qv[u].w};
      uint32_t hi[2] = {0u, 0u}, lo[2] = {0u, 0u};  // element c in bits 16 (c % 2) of word c / 2
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const bf16 b = __float2bfloat16_rn(v[c]);
        hi[c / 2] |= uint32_t(__bfloat16_as_ushort(b)) << (16 * (c % 2));
        lo[c / 2] |= uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v[c] - __bfloat162float(b)))) << (16 * (c % 2));
      }
      *reinterpret_cast<uint2*>(qhi + h * kIdxStride + k) = make_uint2(hi[0], hi[1]);
      *reinterpret_cast<uint2*>(qlo + h * kIdxStride + k) = make_uint2(lo[0], lo[1]);
    }
  }
  const float head_scale = 1.f / sqrtf(static_cast<float>(H)), dot_scale = 1.f / sqrtf(static_cast<float>(D));
  if (threadIdx.x < kIdxMaxH)
    wk[threadIdx.x] = threadIdx.x < H ? a.w[static_cast<int64_t>(t) * H + threadIdx.x] * head_scale : 0.f;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const int mtiles = H / 16;
  float* out = scores + static_cast<int64_t>(t) * a.max_visible;
  int buf = 0;
  for (int e0 = c0; e0 < c1; e0 += kIdxTile, buf ^= 1) {
    cp_wait_all();
    __syncthreads();  // tile `buf` (and q on the first pass) visible; the other buffer is free
    if (e0 + kIdxTile < c1) load_key_tile(ktiles + (buf ^ 1) * kIdxTile * kIdxStride, keys, kbase, e0 + kIdxTile, nv, D);
    const bf16* kt = ktiles + buf * kIdxTile * kIdxStride;
    float acc[4][4][4];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[mt][nt][c] = 0.f;
    // Fragments by ldmatrix (the same registers as m16n8k16's element-wise loads, a quarter of the
    // shared-memory instructions): lane l addresses row l % 8 of matrix l / 8. B, x4 per pair of
    // n8 tiles: (tile 2p, k 0-7), (2p, k 8-15), (2p + 1, k 0-7), (2p + 1, k 8-15); A, x4 per m16
    // tile: (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
    const int lj = lane >> 3, lr = lane & 7;
    const uint32_t kb = smem_addr(kt + (warp * 32 + (lj >> 1) * 8 + lr) * kIdxStride + (lj & 1) * 8);
    const int a_el = ((lj & 1) * 8 + lr) * kIdxStride + (lj >> 1) * 8;
    const uint32_t qa_hi = smem_addr(qhi + a_el), qa_lo = smem_addr(qlo + a_el);
    for (int ks = 0; ks < D; ks += 16) {
      uint32_t bfr[4][2];
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t r[4];
        detail::ldsm_x4(r, kb + (np * 16 * kIdxStride + ks) * 2);
        bfr[2 * np][0] = r[0], bfr[2 * np][1] = r[1], bfr[2 * np + 1][0] = r[2], bfr[2 * np + 1][1] = r[3];
      }
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        if (mt >= mtiles) break;
        uint32_t ah[4], al[4];
        detail::ldsm_x4(ah, qa_hi + (mt * 16 * kIdxStride + ks) * 2);
        detail::ldsm_x4(al, qa_lo + (mt * 16 * kIdxStride + ks) * 2);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          mma_bf16(acc[mt][nt], ah, bfr[nt][0], bfr[nt][1]);
          mma_bf16(acc[mt][nt], al, bfr[nt][0], bfr[nt][1]);
        }
      }
    }
    // score[e] = sum_h relu(q_h . k_e) * dot_scale * (w_h * head_scale)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float sc = 0.f;
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          if (mt >= mtiles) break;
          sc += fmaxf(acc[mt][nt][c], 0.f) * dot_scale * wk[mt * 16 + g];
          sc += fmaxf(acc[mt][nt][c + 2], 0.f) * dot_scale * wk[mt * 16 + g + 8];
        }
        sc += __shfl_xor_sync(0xffffffffu, sc, 4);
        sc += __shfl_xor_sync(0xffffffffu, sc, 8);
        sc += __shfl_xor_sync(0xffffffffu, sc, 16);
        const int e = e0 + warp * 32 + nt * 8 + tig * 2 + c;
        if (g == 0 && e < c1) out[e] = sc + 0.f;  // + 0: -0 -> +0 (the CPU's sums start at +0)
      }
  }
}

// ---------------------------------------------------------------------------------------------
// Top-k selection

constexpr int kTopkThreads = 512;

__device__ __forceinline__ uint32_t order_key(float f) {
  if (f == 0.f) f = 0.f;  // -0 == +0
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix count of `flag` over the block (threads in order); `total` gets the sum.
__device__ __forceinline__ int block_excl_count(bool flag, int* warp_counts, int& total) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  __syncthreads();  // warp_counts may still be read from a previous call
  if (lane == 0) warp_counts[warp] = __popc(ballot);
  __syncthreads();
  int before = 0;
  total = 0;
  for (int w = 0; w < nw; ++w) {
    if (w < warp) before += warp_counts[w];
    total += warp_counts[w];
  }
  return before + __popc(ballot & ((1u << lane) - 1u));
}

// one block per query, kTopkThreads threads.
__global__ void __launch_bounds__(kTopkThreads) indexer_topk_kernel(IndexerArgs a, const float* __restrict__ scores) {
  detail::pdl_entry();
  __shared__ int hist[256];
  __shared__ int warp_counts[kTopkThreads / 32];
  __shared__ uint32_t s_bin, s_remaining;
  const int t = blockIdx.x, nv = a.n_visible[t];
  const int k = min(a.top_k, nv);
  const int32_t ob = static_cast<int32_t>(a.out_base[t]);
  int32_t* idx = a.index + static_cast<int64_t>(t) * a.index_stride;
  if (threadIdx.x == 0) a.n_index[t] = k;
  for (int64_t j = k + threadIdx.x; j < a.index_stride; j += blockDim.x) idx[j] = -1;
  if (nv <= a.top_k) {
    for (int j = threadIdx.x; j < nv; j += blockDim.x) idx[j] = ob + j;
    return;
  }
  const float* sc = scores + static_cast<int64_t>(t) * a.max_visible;
  uint32_t prefix = 0, mask = 0, remaining = static_cast<uint32_t>(k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    for (int e = threadIdx.x; e < nv; e += blockDim.x) {
      const uint32_t u = order_key(sc[e]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1);
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // warp 0: lane l scans bins 255 - 8l ... 248 - 8l (descending)
      const int lane = threadIdx.x;
      uint32_t c[8], tot = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) tot += (c[i] = hist[255 - lane * 8 - i]);
      uint32_t incl = tot;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t n = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += n;
      }
      uint32_t cum = incl - tot;  // keys in higher bins; exactly one lane holds the k-th
      if (cum < remaining && remaining <= incl) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if (cum + c[i] >= remaining) {
            s_bin = 255 - lane * 8 - i;
            s_remaining = remaining - cum;
            break;
          }
          cum += c[i];
        }
      }
    }
    __syncthreads();
    prefix |= s_bin << shift;
    mask |= 255u << shift;
    remaining = s_remaining;
    __syncthreads();  // s_bin / hist reused by the next pass
  }
  // prefix is the k-th largest key; take every larger one and the first `remaining` equal ones.
  const uint32_t thr = prefix;
  int eq_before = 0, sel_before = 0;
  for (int base = 0; base < nv; base += blockDim.x) {
    const int e = base + threadIdx.x;
    const uint32_t u = e < nv ? order_key(sc[e]) : 0u;
    const bool gt = e < nv && u > thr, eq = e < nv && u == thr;
    int eq_total = 0, sel_total = 0;
    const int eq_rank = block_excl_count(eq, warp_counts, eq_total);
    const bool take = gt || (eq && eq_before + eq_rank < static_cast<int>(remaining));
    const int pos = block_excl_count(take, warp_counts, sel_total);
    if (take) idx[sel_before + pos] = ob + e;
    eq_before += eq_total;
    sel_before += sel_total;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

bool hadamard_fp4_rows(float* x, int64_t rows, int64_t width, void* stream) {
  if (rows <= 0) return true;
  if (!x || width < 32 || width > kMaxWidth || (width & (width - 1)) != 0 || rows > INT_MAX)
    return fail("hadamard_fp4_rows: width must be a power of two from 32 to 1024, x non-null");
  detail::launch_pdl(hadamard_fp4_rows_kernel, static_cast<unsigned>(rows), static_cast<unsigned>(width), 0,
                     as_stream(stream), x, static_cast<int>(width));
  return check_launch("hadamard_fp4_rows_kernel");
}

bool compressor_step(const CompressorStepArgs& a, void* stream) {
  if (a.batch <= 0 || a.max_count <= 0) return true;
  if (a.round_mode < 0 || a.round_mode > 2) return fail("compressor_step: round_mode must be 0, 1 or 2, not " + std::to_string(a.round_mode));
  if (a.ratio <= 0 || a.width <= 0 || a.width > kMaxWidth || a.width % 32 != 0 || a.rope_dim < 0 ||
      a.rope_dim % 2 != 0 || a.rope_dim > a.width)
    return fail("compressor_step: unsupported ratio / width / rope_dim");
  if (a.round_mode == 2 && (a.width & (a.width - 1)) != 0)
    return fail("compressor_step: round_mode 2 (Hadamard) needs a power-of-two width");
  if (!a.kv || !a.gate || !a.ape || !a.norm || !a.tok_offset || !a.count || !a.pos0 || (a.rope_dim > 0 && !a.inv_freq))
    return fail("compressor_step: null argument");
  if (a.row_stride != 0 && a.row_stride < int64_t(a.overlap ? 2 : 1) * a.width)
    return fail("compressor_step: row_stride " + std::to_string(a.row_stride) + " is below a row's channels");
  if (!a.seq) {  // slot layout (with `seq`, every sequence's state comes from its table entry)
    if (!a.slot || !a.entry_base || !a.buf_kv || !a.buf_gate || !a.entries)
      return fail("compressor_step: the slot layout needs slot, entry_base, buf_kv, buf_gate and entries (or seq)");
    if (a.overlap && (!a.prev_kv || !a.prev_gate)) return fail("compressor_step: CSA needs prev_kv / prev_gate");
  }
  cudaStream_t st = as_stream(stream);
  const int windows = (a.max_count + a.ratio - 1) / a.ratio;
  detail::launch_pdl(compress_pool_kernel, dim3(windows, a.batch), a.width, 0, st, a);
  if (!check_launch("compress_pool_kernel")) return false;
  const int rows = a.overlap ? a.ratio : std::min(a.ratio, a.max_count);
  const int cw = (a.overlap ? 2 : 1) * a.width;
  detail::launch_pdl(compress_state_kernel, dim3(rows, a.batch), std::min(cw, 256), 0, st, a);
  return check_launch("compress_state_kernel");
}

size_t indexer_workspace_bytes(const IndexerArgs& a) {
  return static_cast<size_t>(std::max(a.tokens, 0)) * static_cast<size_t>(std::max(a.max_visible, 0)) * sizeof(float);
}

bool indexer_select(const IndexerArgs& a, void* workspace, void* stream) {
  if (a.tokens <= 0) return true;
  if (a.heads <= 0 || a.heads > kIdxMaxH || a.heads % 16 != 0 || a.head_dim <= 0 || a.head_dim > kIdxMaxD ||
      a.head_dim % 16 != 0)
    return fail("indexer_select: heads must be a multiple of 16 <= 64 and head_dim a multiple of 16 <= 128");
  if (a.top_k <= 0 || a.index_stride < a.top_k) return fail("indexer_select: need 0 < top_k <= index_stride");
  if (!a.n_visible || !a.out_base || !a.index || !a.n_index) return fail("indexer_select: null argument");
  if (a.max_visible > 0 && (!a.q || !a.w || !a.key_base || (!a.keys && !a.key_ptrs)))
    return fail("indexer_select: scoring needs q, w, key_base and keys (or key_ptrs)");
  cudaStream_t st = as_stream(stream);
  float* scores = static_cast<float*>(workspace);
  if (a.max_visible > 0) {
    static bool attr_set = false;
    if (!attr_set) {
      if (!check(cudaFuncSetAttribute(indexer_score_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(kIdxSmemBytes)),
                 "cudaFuncSetAttribute(indexer_score_kernel)"))
        return false;
      attr_set = true;
    }
    // Enough blocks to fill the GPU (decode has few queries): halve the chunk down to one tile.
    int chunk = kIdxMaxChunk;
    auto n_chunks = [&](int c) { return (a.max_visible + c - 1) / c; };
    while (chunk > kIdxTile && int64_t(a.tokens) * n_chunks(chunk) < 512) chunk /= 2;
    if (n_chunks(chunk) > 65535) return fail("indexer_select: max_visible too large");
    detail::launch_pdl(indexer_score_kernel, dim3(a.tokens, n_chunks(chunk)), kIdxThreads, kIdxSmemBytes, st, a, chunk, scores);
    if (!check_launch("indexer_score_kernel")) return false;
  }
  detail::launch_pdl(indexer_topk_kernel, a.tokens, kTopkThreads, 0, st, a, scores);
  return check_launch("indexer_topk_kernel");
}

}  // namespace deepinfer::cuda
