// MXFP4 expert linear for decode: y = x W^T per expert group, W packed e2m1 with E8M0 per 32.
//
// Weights in the device layout (mma_common.cuh): a word of 8 codes becomes 4 half2 of the exact
// e2m1 values by a table lookup in registers (e2m1_dev_pairs, 11 instructions), pairing codes
// (0, 1), (2, 3), (4, 5), (6, 7); the mma (m16n8k16 f16, fp32 accumulate) takes x in natural order.
// Each 32-wide K group (one E8M0 scale per weight row) is two mma into a fresh fragment, then
// added times the scale (one fma).
//
// Memory path: a block owns 32 weight rows of one group; its 8 warps split K in 128-wide chunks
// (warp w takes chunks w, w + 8, ...). Each warp streams its chunks through its own 4-stage
// shared-memory ring with 16-byte cp.async (64 contiguous bytes per row and chunk, two full
// sectors), so up to 3 chunks (6 KB) per warp and 48-64 KB per block are in flight, and reads
// the mma fragments back with ldmatrix: one x4 gives a lane (row g, word t) of each of the 4
// scale groups, exactly the 4-byte layout the dequant wants. The ring is XOR-swizzled so the 8
// rows of one ldmatrix phase hit 8 distinct 16-byte bank slots. After the K loop the ring is
// reused for the cross-warp sum (fixed order: warp 0..7), so the result of a row depends only on
// its own x row, the weights and K: batch invariant (fixed chunk-to-warp map, fma order and final
// sum).
//
// Variants by max_m: <= 8 (one m tile, rows 8..15 never loaded), <= 16, <= 32 (2 tiles), <= 64
// (4 tiles); the <= 16 one also takes the <= 8 arithmetic for a group with m <= 8. ptxas (sm_90a,
// CUDA 13.0, table-lookup dequantisation): 124 registers (<= 8) and 128 (<= 16), no spills, for
// the one-tile ones (2 blocks = 16 warps per SM, 2 x 68 KB smem, up to 96 KB of weights in flight
// per SM), 255 and no spills at 2 tiles (1 block per SM), 255 with 136 B of spills at 4 tiles
// (1 block per SM).
// Weight rows must be 16-byte aligned (K % 128 == 0 and a 16-byte aligned base), x 16-byte too.
#include <atomic>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/mma_common.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check;
using detail::check_launch;
using detail::fail;
using namespace detail;  // the mma / cp.async building blocks

namespace {

__device__ __forceinline__ uint32_t h2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// x rows: ld.global.nc, volatile so the compiler keeps them next to their use (hoisting all of a
// chunk's x loads ahead of the mma is what made the m > 16 variants spill).
__device__ __forceinline__ float4 ldg_f4(const float* p) {
  const uint4 v = detail::ldg_nc_v4(p);
  return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
}

constexpr int kWarps = 8;
constexpr int kNT = 4;                    // 8-row weight tiles per block (32 rows): x fragments are reused across them
constexpr int kStages = 4;                // ring depth per warp
constexpr int kRowBytes = 64;             // one chunk of one weight row: 128 codes
constexpr int kStageW = 8 * kNT * kRowBytes;  // 2048 B of weights per stage
constexpr int kStageS = 8 * kNT * 4;          // 128 B of scales per stage (4 groups x 32 rows)
constexpr int kSmemBytes = kWarps * kStages * (kStageW + kStageS);  // 69632
static_assert(kWarps * 64 * 8 * kNT * 4 <= kSmemBytes, "the reduction (up to 64 rows) must fit in the ring");

// One 128-wide chunk of one warp: 4 scale groups x kNT tiles x MT m tiles. kFast: every scale
// byte of the chunk is in [1, 254], so the scale is a normal float built straight from the byte.
template <int MT, bool kLow8, bool kFast>
__device__ __forceinline__ void chunk_math(float (&acc)[kNT][MT][4], const uint32_t (&wv)[kNT][4], const uint2 (&sv)[kNT],
                                           const float* __restrict__ x, int m, int K, int kk0, int g) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int kk = kk0 + j * 32;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int r0 = mt * 16 + g, r1 = r0 + 8;
      float4 p0 = make_float4(0.f, 0.f, 0.f, 0.f), p1 = p0, q0 = p0, q1 = p0;
      if (r0 < m) {
        const float* px = x + int64_t(r0) * K + kk;
        p0 = ldg_f4(px);
        p1 = ldg_f4(px + 4);
      }
      if (!kLow8 && r1 < m) {
        const float* px = x + int64_t(r1) * K + kk;
        q0 = ldg_f4(px);
        q1 = ldg_f4(px + 4);
      }
      // physical k: p0 = kk+0..3, p1 = kk+4..7; pairs (0,1), (2,3) | (4,5), (6,7)
      const uint32_t a0 = h2(p0.x, p0.y), a2 = h2(p0.z, p0.w), a4 = h2(p1.x, p1.y), a6 = h2(p1.z, p1.w);
      const uint32_t a1 = kLow8 ? 0u : h2(q0.x, q0.y), a3 = kLow8 ? 0u : h2(q0.z, q0.w);
      const uint32_t a5 = kLow8 ? 0u : h2(q1.x, q1.y), a7 = kLow8 ? 0u : h2(q1.z, q1.w);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        float cf[4] = {0.f, 0.f, 0.f, 0.f};
        uint32_t b[4];
        e2m1_dev_pairs(wv[nt][j], kE2m1Lut0, kE2m1Lut1, b);
        mma_f16(cf, a0, a1, a2, a3, b[0], b[1]);
        mma_f16(cf, a4, a5, a6, a7, b[2], b[3]);
        if (kFast) {
          // byte << 23 = 2^(byte - 127) for a byte in [1, 254]
          const float s0 = __uint_as_float((j < 3 ? sv[nt].x << (23 - 8 * j) : sv[nt].x >> 1) & 0x7F800000u);
          const float s1 = __uint_as_float((j < 3 ? sv[nt].y << (23 - 8 * j) : sv[nt].y >> 1) & 0x7F800000u);
          acc[nt][mt][0] = fmaf(cf[0], s0, acc[nt][mt][0]);
          acc[nt][mt][1] = fmaf(cf[1], s1, acc[nt][mt][1]);
          acc[nt][mt][2] = fmaf(cf[2], s0, acc[nt][mt][2]);
          acc[nt][mt][3] = fmaf(cf[3], s1, acc[nt][mt][3]);
        } else {
          const float s0 = detail::e8m0_to_float((sv[nt].x >> (8 * j)) & 0xffu);
          const float s1 = detail::e8m0_to_float((sv[nt].y >> (8 * j)) & 0xffu);
          acc[nt][mt][0] = fmaf(cf[0], s0, acc[nt][mt][0]);
          acc[nt][mt][1] = fmaf(cf[1], s1, acc[nt][mt][1]);
          acc[nt][mt][2] = fmaf(cf[2], s0, acc[nt][mt][2]);
          acc[nt][mt][3] = fmaf(cf[3], s1, acc[nt][mt][3]);
        }
      }
    }
  }
}

// MT m tiles of 16 rows; kLow8: max_m <= 8 (rows 8..15 of the tile are never loaded).
template <int MT, bool kLow8>
__global__ void __launch_bounds__(256, MT == 1 ? 2 : 1)
    mxfp4_grouped_kernel(const Mxfp4Group* __restrict__ groups, int N, int K, bool tiled) {
  detail::pdl_entry();
  extern __shared__ __align__(16) unsigned char smem[];
  const Mxfp4Group gd = groups[blockIdx.z];
  const int m = gd.m;
  if (m <= 0) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * 8 * kNT;
  const int kg = K / 32;       // scale groups per row
  const int nchunk = K / 128;  // 4 groups per chunk
  const int nw = (nchunk - warp + kWarps - 1) / kWarps;  // chunks of this warp
  // The block's 32 rows: row_bytes apart, or 64 (tiled: n0 % 32 == 0, so one 64-row tile).
  const Mxfp4Rows L{K / 2, kg, tiled};
  const int64_t row_bytes = tiled ? 64 : K / 2, srow = tiled ? 4 : kg;
  const int wcs = L.wc(), scs = L.sc();
  const uint8_t* wsrc = gd.w + L.w(n0);
  const uint8_t* ssrc = gd.scale + L.s(n0);
  const uint32_t s_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t w_ring = s_base + warp * kStages * kStageW;
  const uint32_t s_ring = s_base + kWarps * kStages * kStageW + warp * kStages * kStageS;

  // Stage i % kStages <- chunk warp + 8 i (an empty commit past the end keeps the group count).
  auto issue = [&](int i) {
    if (i < nw) {
      const int c = warp + kWarps * i;
      const uint32_t st = w_ring + (i % kStages) * kStageW;
#pragma unroll
      for (int q = 0; q < kNT; ++q) {
        const int row = g + 8 * q;
        cp_async16(st + w64_off(row, t), wsrc + row * row_bytes + int64_t(c) * wcs + t * 16);
      }
      cp_async4(s_ring + (i % kStages) * kStageS + lane * 4, ssrc + int64_t(lane) * srow + int64_t(c) * scs);
    }
    cp_commit();
  };

  float acc[kNT][MT][4];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][mt][i] = 0.f;

#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i);
  // ldmatrix x4: lanes 8j..8j+7 address rows 0..7 of scale group j of a tile
  const uint32_t ld_off = w64_off(lane & 7, lane >> 3);
  for (int i = 0; i < nw; ++i) {
    issue(i + kStages - 1);
    cp_wait<kStages - 1>();
    __syncwarp();
    const int st = i % kStages;
    uint32_t wv[kNT][4];
    uint2 sv[kNT];
    uint32_t odd = 0;  // a scale byte 0 (2^-127, denormal) or 255 (NaN)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      ldsm_x4(wv[nt], w_ring + st * kStageW + nt * 8 * kRowBytes + ld_off);
      sv[nt] = lds_u2(s_ring + st * kStageS + (nt * 8 + 2 * t) * 4);
      odd |= __vcmpeq4(sv[nt].x, 0u) | __vcmpeq4(sv[nt].x, 0xffffffffu) | __vcmpeq4(sv[nt].y, 0u) |
             __vcmpeq4(sv[nt].y, 0xffffffffu);
    }
    __syncwarp();  // every lane has its fragments: the stage may be refilled next iteration
    const int kk0 = (warp + kWarps * i) * 128 + t * 8;
    // MT = 4 always takes the general path: one variant less keeps its spills at 68 B (136 with both).
    if (MT > 2 || __any_sync(0xffffffffu, odd)) {
      chunk_math<MT, kLow8, false>(acc, wv, sv, gd.x, m, K, kk0, g);
    } else {
      // A group of <= 8 rows under max_m 9..16 (the model's 16-row groups at m ~ 1-2) skips
      // rows 8..15 too: block-uniform branch, same per-row arithmetic.
      if (MT == 1 && !kLow8 && m <= 8)
        chunk_math<MT, true, true>(acc, wv, sv, gd.x, m, K, kk0, g);
      else
        chunk_math<MT, kLow8, true>(acc, wv, sv, gd.x, m, K, kk0, g);
    }
  }
  cp_wait<0>();
  __syncthreads();  // all warps are done with their rings: reuse them for the reduction
  float (*red)[MT * 16][8 * kNT] = reinterpret_cast<float (*)[MT * 16][8 * kNT]>(smem);
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int r0 = mt * 16 + g, r1 = r0 + 8;
      if (r0 < m) {
        red[warp][r0][nt * 8 + 2 * t] = acc[nt][mt][0];
        red[warp][r0][nt * 8 + 2 * t + 1] = acc[nt][mt][1];
      }
      if (!kLow8 && r1 < m) {
        red[warp][r1][nt * 8 + 2 * t] = acc[nt][mt][2];
        red[warp][r1][nt * 8 + 2 * t + 1] = acc[nt][mt][3];
      }
    }
  __syncthreads();
  const int rows = min(m, kLow8 ? 8 : MT * 16);
  for (int i = threadIdx.x; i < rows * 8 * kNT; i += 256) {
    const int r = i / (8 * kNT), col = i % (8 * kNT);
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) s += red[k][r][col];  // fixed order
    gd.y[int64_t(r) * N + n0 + col] = s;
  }
}

template <int MT, bool kLow8>
bool launch_grouped(const Mxfp4Group* groups, int n_groups, int N, int K, bool tiled, cudaStream_t s) {
  static std::atomic<uint64_t> smem_set{0};  // per instantiation: one bit per device
  if (!max_dynamic_smem_once(reinterpret_cast<const void*>(mxfp4_grouped_kernel<MT, kLow8>), kSmemBytes, smem_set,
                             "mxfp4_linear_grouped: shared-memory size"))
    return false;
  const dim3 grid(static_cast<unsigned>(N / (8 * kNT)), 1, static_cast<unsigned>(n_groups));
  detail::launch_pdl(mxfp4_grouped_kernel<MT, kLow8>, grid, 256, kSmemBytes, s, groups, N, K, tiled);
  return check_launch("mxfp4_grouped_kernel");
}

}  // namespace

bool mxfp4_linear_grouped(const Mxfp4Group* groups, int n_groups, int max_m, int64_t N, int64_t K,
                          Mxfp4Layout layout, void* stream) {
  const bool tiled = layout == Mxfp4Layout::tiles64;
  if (N % 32 || K % 128) return fail("mxfp4_linear_grouped: need N % 32 == 0 and K % 128 == 0");
  if (tiled && N % 64) return fail("mxfp4_linear_grouped: tiled weights need N % 64 == 0");
  if (max_m > 64) return fail("mxfp4_linear_grouped: max_m > 64");
  if (n_groups > 65535) return fail("mxfp4_linear_grouped: more than 65535 groups");
  if (n_groups <= 0 || max_m <= 0) return true;
  const cudaStream_t s = as_stream(stream);
  const int n = static_cast<int>(N), k = static_cast<int>(K);
  if (max_m <= 8) return launch_grouped<1, true>(groups, n_groups, n, k, tiled, s);
  if (max_m <= 16) return launch_grouped<1, false>(groups, n_groups, n, k, tiled, s);
  if (max_m <= 32) return launch_grouped<2, false>(groups, n_groups, n, k, tiled, s);
  return launch_grouped<4, false>(groups, n_groups, n, k, tiled, s);
}

}  // namespace deepinfer::cuda
