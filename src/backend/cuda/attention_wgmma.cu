// V4 decode attention on warpgroup MMA (the default mode's large launches: prefill, one query per
// block, and decode batches that fill the GPU): the same rows, splits, online softmax, sink merge
// and output as attention_decode.cu's mma.sync kernel (attention_common.cuh), other last bits.
//
// Why: the mma.sync kernel takes about 4 us per 64-row tile whatever its heads (H200), far from
// the tensor rate: per tile every warp re-reads its q and K fragments through ldmatrix, and
// three block barriers separate the logits, the softmax (a quarter of the threads) and P.V.
// Prefill at 8k tokens spent 12.8 ms there (107-134 TFLOP/s), the EP slice's decode at batch 256
// 116 us per layer.
//
// Block: one (split, query), 64 heads, two warpgroups; q and two K/V stages in shared memory in
// the 128-byte swizzled layout wgmma reads (a tile is 8 chunks of 64 dims x 64 rows, 8 KB each,
// row r's 16-byte unit u of a chunk at 128 r + 16 (u ^ (r & 7))). Per 64-row tile:
//   1. S_w = q K_w^T for warpgroup w's 32 rows of the tile (m64n32k16 x 32, both operands K-major
//      from shared memory): each warpgroup computes half the logits, so the tile costs 2 units of
//      MMA work (q K^T once, P V once) where computing all of S in both warpgroups cost 3.
//   2. Online softmax in registers: rows g and g + 8 of each warp's 16 heads, 8 logits per thread
//      per row, the row max over the 4 threads of a row by shuffles, then over the two halves
//      through shared memory (both warpgroups then hold the same m, alpha and l for every head).
//   3. O[:, 256 w ..] += P V for warpgroup w (m64n256k16 x 4, A = P from registers: the half this
//      warpgroup made stays in registers (the accumulator layout of S is the A fragment layout of
//      the next MMA), the other half and its row sums come through shared memory; B = the same K
//      tile read MN-major: dims contiguous, 8-row atoms 1024 B apart, 64-dim chunks 8 KB apart).
// Four block barriers per tile (the tile in; the row maxima; P and the row sums; every warpgroup
// past its reads before the stage is refilled). The output (128 fp32 per thread) stays in
// registers until the finish, which goes through shared memory (compact code, coalesced stores).
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/wgmma.cuh"

namespace deepinfer::cuda::attn {

using detail::fence_proxy_async_shared;
using detail::wgmma_commit;
using detail::wgmma_fence;
using detail::wgmma_fence_operand;
using detail::wgmma_wait;

namespace {

constexpr int kThreads = 256;
constexpr int kChunk = kTile * 128;     // one 64-dim chunk of a 64-row tile: 8 KB
constexpr int kTileBytes = 8 * kChunk;  // 64 KB (q, or one K/V stage)
constexpr int kSmemBytes = 3 * kTileBytes + 1024;  // q, 2 stages, alignment slack
constexpr int kPRow = 20;                          // sP's row: 16 bf16 pairs + 4 words of padding
// The finish's O rows in the same shared memory: 8 floats of padding a row, so the 16 lanes of a
// half-warp's float2 stores (4 rows x 32 bytes) fall in distinct banks.
constexpr int kORow = kD + 8;
static_assert(kH * kORow * 4 + kH * 2 * 4 <= 3 * kTileBytes, "the finish's O rows exceed the kernel's shared memory");
static_assert(kSmemBytes + 2 * kTile * 4 + kRope * 2 + 2 * kH * 4 * 2 + 2 * kH * kPRow * 4 <= 232448,
              "exceeds the SM90 per-block shared memory");

// Byte offset of row r's 16-byte unit j (dims 8j .. 8j + 7, j < 64) in a tile.
__device__ __forceinline__ uint32_t tile_off(int r, int j) {
  return uint32_t((j >> 3) * kChunk + r * 128 + (((j & 7) ^ (r & 7)) << 4));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint4 pack_bf16x8(float4 a, float4 b) {
  return make_uint4(pack_bf16(a.x, a.y), pack_bf16(a.z, a.w), pack_bf16(b.x, b.y), pack_bf16(b.z, b.w));
}

__global__ void __launch_bounds__(kThreads, 1)
    attn_wgmma_kernel(DecodeAttnArgs a, bf16* __restrict__ ws_o, float* __restrict__ ws_ml, int max_splits,
                      int b_base) {
  detail::pdl_entry();
  extern __shared__ unsigned char smem_raw[];
  __shared__ int sValid[2][kTile];
  __shared__ float sFreq[kRope / 2];
  // The exchange between the two warpgroups' halves of a tile: row maxima, row sums, and P (bf16
  // pairs, 16 a head per half, padded to 20 so a warp's stores fall in distinct banks).
  __shared__ float sMax[2][kH], sSum[2][kH];
  __shared__ uint32_t sP[2][kH][kPRow];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;  // q, then the 2 stages
  unsigned char* const gbase = smem_raw + (base - raw);

  const int b = b_base + blockIdx.y, split = blockIdx.x;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int h0 = warp * 16 + g, c0 = 32 * wg;  // this thread's heads h0, h0 + 8; the warpgroup's first tile row
  const SplitRows rows(a, b, split);
  if (split >= rows.nsplit) return;
  const int ntiles = rows.ntiles;
  const bf16* qb = reinterpret_cast<const bf16*>(a.q) + size_t(b) * kH * kD;

  // Tile loads: thread tid copies row tid / 4 of the tile, 16-byte units (tid % 4) + 4i; its row's
  // index is loaded one tile ahead and used when the copies are issued (SplitRows::ref / ptr), so
  // the load's latency sits behind the previous tile's math.
  const int lr = tid >> 2, lc = tid & 3;
  auto load_tile = [&](const bf16* src, int stage) {
    unsigned char* dst = gbase + (1 + stage) * kTileBytes;
    const bf16* s = src ? src : qb;  // any valid address: nothing is read (zero-fill)
#pragma unroll
    for (int i = 0; i < 16; ++i) cp_async16(dst + tile_off(lr, lc + 4 * i), s + (lc + 4 * i) * 8, src != nullptr);
    if (lc == 0) sValid[stage][lr] = src != nullptr;
  };
  for (int c = tid; c < kH * 64; c += kThreads) cp_async16(gbase + tile_off(c >> 6, c & 63), qb + c * 8, true);
  load_tile(rows.ptr(rows.ref(0, lr)), 0);
  cp_commit();
  SplitRows::Ref next = rows.ref(1, lr);
  if (tid < kRope / 2) sFreq[tid] = a.inv_freq[tid];
  const int pos_b = a.pos[b];
  const float scale = rsqrtf(static_cast<float>(kD));

  float o[128];  // O[heads warp*16 + g (+8), dims 256 wg + 8j + 2tq (+1)]: o[4j + 2rr + e]
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows g, g + 8

  for (int t = 0; t < ntiles; ++t) {
    if (t + 1 < ntiles) {
      load_tile(rows.ptr(next), (t + 1) & 1);
      cp_commit();
      next = rows.ref(t + 2, lr);
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    fence_proxy_async_shared();  // this thread's copies visible to wgmma
    __syncthreads();
    const uint32_t kt = base + (1 + (t & 1)) * kTileBytes;
    // 1. S_w = q K[32 wg .. 32 wg + 31]^T over k = 512: this warpgroup's half of the tile's rows
    //    (row 32 sits 4096 B into each 8 KB chunk: whole swizzle atoms); chunk ks / 4, 32 bytes per
    //    k16 step within a row.
    float s[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) s[i] = 0.f;
    const uint64_t dq = detail::wgmma_desc_sw128(base), dk = detail::wgmma_desc_sw128(kt + wg * 32 * 128);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      const uint32_t off = (ks >> 2) * kChunk + (ks & 3) * 32;
      detail::wgmma_bf16_ss_32(s, detail::wgmma_desc_advance(dq, off), detail::wgmma_desc_advance(dk, off), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 16; ++i) wgmma_fence_operand(s[i]);
    // 2. Online softmax: s[4j + 2rr + e] is head h0 + 8rr, tile column c0 + 8j + 2tq + e. The row
    //    max over both halves goes through sMax (one barrier); both warpgroups then hold the same
    //    m and alpha for every head.
    const int* valid = sValid[t & 1];
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool v = valid[c0 + 8 * j + 2 * tq + e] != 0;
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          float& x = s[4 * j + 2 * rr + e];
          x = v ? x * scale : -INFINITY;
          mx[rr] = fmaxf(mx[rr], x);
        }
      }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 1));
      mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 2));
      if (tq == 0) sMax[wg][h0 + 8 * rr] = mx[rr];
    }
    __syncthreads();
    float alpha[2], sum[2] = {0.f, 0.f}, m_use[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const float m_new = fmaxf(m[rr], fmaxf(sMax[0][h0 + 8 * rr], sMax[1][h0 + 8 * rr]));
      // A row with no valid logit yet subtracts 0: its exps are exp(-inf) = 0 with no branch (o
      // and l are still 0 there, so alpha 0 changes nothing); any other row subtracts its max.
      m_use[rr] = m_new == -INFINITY ? 0.f : m_new;
      alpha[rr] = expf(m[rr] - m_use[rr]);
      m[rr] = m_new;
    }
    // P as the A fragments of the PV MMA's 4 k16 steps: n8 tile J = 4 wg + j of the tile is step
    // J / 2, registers 2 (J & 1) + rr. This warpgroup makes steps 2 wg and 2 wg + 1 (`mine`) and
    // reads the other two from the other warpgroup through sP, with the partial row sums.
    uint32_t mine[2][4], theirs[2][4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const float p0 = expf(s[4 * j + 2 * rr] - m_use[rr]);
        const float p1 = expf(s[4 * j + 2 * rr + 1] - m_use[rr]);
        sum[rr] = __fadd_rn(__fadd_rn(sum[rr], p0), p1);
        mine[j >> 1][2 * (j & 1) + rr] = pack_bf16(p0, p1);
        sP[wg][h0 + 8 * rr][4 * j + tq] = mine[j >> 1][2 * (j & 1) + rr];
      }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      sum[rr] = __fadd_rn(sum[rr], __shfl_xor_sync(0xffffffffu, sum[rr], 1));
      sum[rr] = __fadd_rn(sum[rr], __shfl_xor_sync(0xffffffffu, sum[rr], 2));
      if (tq == 0) sSum[wg][h0 + 8 * rr] = sum[rr];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) theirs[j >> 1][2 * (j & 1) + rr] = sP[wg ^ 1][h0 + 8 * rr][4 * j + tq];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr)  // the halves' sums in one order in both warpgroups: the same l
      l[rr] = __fadd_rn(__fmul_rn(alpha[rr], l[rr]), __fadd_rn(sSum[0][h0 + 8 * rr], sSum[1][h0 + 8 * rr]));
    uint32_t p[4][4];
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        p[q][i] = wg == 0 ? mine[q][i] : theirs[q][i];
        p[2 + q][i] = wg == 0 ? theirs[q][i] : mine[q][i];
      }
#pragma unroll
    for (int j = 0; j < 32; ++j) o[4 * j] *= alpha[0], o[4 * j + 1] *= alpha[0], o[4 * j + 2] *= alpha[1], o[4 * j + 3] *= alpha[1];
    // 3. O[:, 256 wg ..] += P V: rows 16q .. 16q + 15 of the tile are 2 atoms (2048 B) on.
    const uint64_t dv = detail::wgmma_desc_sw128_mn(kt + 4 * wg * kChunk, kChunk);
    wgmma_fence();
#pragma unroll
    for (int q = 0; q < kTile / 16; ++q) detail::wgmma_bf16_rs_tn_256(o, p[q], detail::wgmma_desc_advance(dv, q * 2048), 1);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 128; ++i) wgmma_fence_operand(o[i]);
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i) wgmma_fence_operand(p[q][i]);
    __syncthreads();  // both warpgroups past this stage before it is refilled
  }

  // Finish (one split) or write the partial (several splits) through shared memory, free now (the
  // last iteration's barrier): O as fp32 rows of kORow floats, then every thread takes whole
  // 128-byte runs of a row. One compact loop instead of 64 unrolled stores per thread (the
  // unrolled finish was most of the kernel's code: instruction-fetch stalls, ncu), and coalesced.
  float* const so = reinterpret_cast<float*>(gbase);
  float* const sw = so + kH * kORow;  // per head: the output weight w, then L (one split)
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int h = warp * 16 + g + 8 * rr;
#pragma unroll
    for (int j = 0; j < 32; ++j)
      *reinterpret_cast<float2*>(so + h * kORow + 256 * wg + 8 * j + 2 * tq) =
          make_float2(o[4 * j + 2 * rr], o[4 * j + 2 * rr + 1]);
    if (wg == 0 && tq == 0) {
      if (rows.nsplit == 1) {
        const Merge mg = merge_stats(&m[rr], &l[rr], 1, 0, a.sink[h]);
        sw[2 * h] = expf(m[rr] - mg.M), sw[2 * h + 1] = mg.L;
      } else {
        float* ml = ws_ml + ((size_t(b) * max_splits + split) * kH + h) * 2;
        ml[0] = m[rr], ml[1] = l[rr];
      }
    }
  }
  __syncthreads();
  if (rows.nsplit == 1) {
    bf16* const out = reinterpret_cast<bf16*>(a.out) + size_t(b) * kH * kD;
#pragma unroll 2
    for (int i = tid; i < kH * kD / 2; i += kThreads) {  // pair i: head i / 256, dims 2 (i % 256) + {0, 1}
      const int h = i >> 8, d = 2 * (i & 255);
      const float2 v = *reinterpret_cast<const float2*>(so + h * kORow + d);
      const float w = sw[2 * h];
      finish_pair(__fadd_rn(0.f, __fmul_rn(w, v.x)), __fadd_rn(0.f, __fmul_rn(w, v.y)), sw[2 * h + 1], d, pos_b, sFreq,
                  out + h * kD + d);
    }
  } else {
    // bf16 partials (unnormalised, each split's own max): half the bytes of fp32 out and back in
    // the combine; the rounding is the output's own (bf16), before the wo_a input's FP8.
    bf16* const out = ws_o + (size_t(b) * max_splits + split) * kH * kD;
#pragma unroll 4
    for (int i = tid; i < kH * kD / 8; i += kThreads) {
      const int h = i >> 6, d = 8 * (i & 63);
      const float4 v0 = *reinterpret_cast<const float4*>(so + h * kORow + d);
      const float4 v1 = *reinterpret_cast<const float4*>(so + h * kORow + d + 4);
      *reinterpret_cast<uint4*>(out + h * kD + d) = pack_bf16x8(v0, v1);
    }
  }
}

}  // namespace

bool launch_wgmma_splits(const DecodeAttnArgs& a, bf16* ws_o, float* ws_ml, int max_splits, cudaStream_t stream) {
  static std::atomic<uint64_t> smem_set{0};
  if (!detail::max_dynamic_smem_once(reinterpret_cast<const void*>(attn_wgmma_kernel), kSmemBytes, smem_set,
                                     "decode_attention (wgmma): smem attribute"))
    return false;
  constexpr int kMaxGridY = 65535;
  for (int b0 = 0; b0 < a.batch; b0 += kMaxGridY) {
    const int nb = std::min(kMaxGridY, a.batch - b0);
    detail::launch_pdl(attn_wgmma_kernel, dim3(max_splits, nb), kThreads, kSmemBytes, stream, a, ws_o, ws_ml, max_splits,
                       b0);
    if (!detail::check_launch("decode_attention wgmma split")) return false;
  }
  return true;
}

}  // namespace deepinfer::cuda::attn
