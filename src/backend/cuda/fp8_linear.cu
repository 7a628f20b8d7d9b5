// FP8 block-scaled linear y = x W^T on tensor cores (mma.sync m16n8k32 e4m3, fp32 accumulate).
//
// K permutation: thread (g = lane/4, t = lane%4) loads 16 contiguous K bytes of a row, and one
// 64-wide K step is two mma: the first takes bytes 0-7 of each thread's 16 (as the fragment's
// K t*4..t*4+3 and 16+t*4..), the second bytes 8-15. A and B use the same mapping, so the dot
// product is unchanged and every fragment load is one 16-byte access.
// Scales: one per 128 along K for x, per 128x128 tile for W; each 128-wide K block is
// accumulated in a fresh fp32 fragment, then added to the result times sx * sw.

#include <algorithm>

#include "backend/cuda/cuda_common.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;

namespace {

__device__ __forceinline__ void mma_e4m3(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// x fragments: volatile, so the compiler keeps them next to their mma (hoisting a round's x loads
// ahead of its mma is what made the wider variants spill).
__device__ __forceinline__ uint4 ld_x16(const uint8_t* p) {
  uint4 r;
  asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

__device__ __forceinline__ float wscale(const void* s, bool f32, int64_t i) {
  return f32 ? static_cast<const float*>(s)[i] : detail::e8m0_to_float(static_cast<const uint8_t*>(s)[i]);
}

// ---------------- decode path: weight streaming, M <= 16 * MT ----------------
// One launch computes G groups (G = 1 for a plain linear): group g multiplies x's columns
// [g*K, (g+1)*K) by weight rows [g*N, (g+1)*N) into y's columns [g*N, (g+1)*N) (V4's grouped wo_a
// in one launch). A tile is 8 weight rows of one group; its K blocks (128 wide) are split over
// `wpt` warps in contiguous runs of `per` blocks, and a block holds `tpb` tiles (wpt * tpb = 8
// warps). A warp streams its run in rounds of 2 K blocks (4 x 16 bytes per lane), the next round's
// loads issued before the current one's mma (two register sets), the first round before the PDL
// wait (weights are no kernel's output). Per K block, 4 mma (lane (g, t) takes bytes t*16.. and
// 64 + t*16.. of weight row g, A the same bytes of its x rows) into a fresh fragment, added times
// sx * sw. A tile's warp sums are added in warp order. wpt and per follow from (G*N, K) alone
// (gemv_plan), so a row's result never depends on M.
struct GemvArgs {
  const uint8_t* xq;
  const float* xs;
  int64_t ldx, ldxs;  // x row stride (bytes), scale row stride (floats)
  const uint8_t* w;
  const void* wsc;
  bool wsc_f32;
  int M, N, K, G;  // N, K per group
  float* y;
  int64_t ldy;
};

template <int MT, bool kLow8>
__global__ void __launch_bounds__(256, MT == 4 ? 1 : 2) fp8_gemv_kernel(GemvArgs a, int wpt, int per) {
  __shared__ float red[8][MT * 16][8];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tpb = 8 / wpt, tl = warp / wpt, ws = warp % wpt;
  const int tiles = a.N / 8, tile = blockIdx.x * tpb + tl;
  const bool live = tile < a.G * tiles;
  const int grp = live ? tile / tiles : 0, n0 = live ? tile % tiles * 8 : 0;
  const int nkb = a.K / 128, kb0 = ws * per, kb1 = live ? min(nkb, kb0 + per) : 0;
  const uint8_t* wrow = a.w + (int64_t(grp) * a.N + n0 + g) * a.K + t * 16;
  const int wsrow = (grp * a.N + n0) / 128 * nkb;
  auto load = [&](uint4 (&w)[2][2], int kb) {
#pragma unroll
    for (int u = 0; u < 2; ++u)
      if (kb + u < kb1) {
        w[u][0] = detail::ldg_nc_v4(wrow + (kb + u) * 128);
        w[u][1] = detail::ldg_nc_v4(wrow + (kb + u) * 128 + 64);
      }
  };
  uint4 wa[2][2], wb[2][2];
  load(wa, kb0);
  detail::pdl_wait();
  detail::pdl_trigger();
  // x rows of this lane as 32-bit offsets (rows past M read row M - 1 and are never stored)
  const uint8_t* xb = a.xq + int64_t(grp) * a.K + t * 16;
  const float* xsb = a.xs + int64_t(grp) * nkb;
  int xo[MT][2], xso[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = min(mt * 16 + g + 8 * h, a.M - 1);
      xo[mt][h] = r * int(a.ldx);
      xso[mt][h] = r * int(a.ldxs);
    }
  float acc[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[mt][i] = 0.f;
  auto compute = [&](const uint4 (&w)[2][2], int kb0r) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int kb = kb0r + u;
      if (kb >= kb1) break;
      const float sw = wscale(a.wsc, a.wsc_f32, wsrow + kb);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const uint4 a00 = ld_x16(xb + xo[mt][0] + kb * 128), a01 = ld_x16(xb + xo[mt][0] + kb * 128 + 64);
        const float x0 = xsb[xso[mt][0] + kb] * sw;
        uint4 a10 = make_uint4(0, 0, 0, 0), a11 = a10;
        float x1 = 0.f;
        if (!kLow8) {
          a10 = ld_x16(xb + xo[mt][1] + kb * 128);
          a11 = ld_x16(xb + xo[mt][1] + kb * 128 + 64);
          x1 = xsb[xso[mt][1] + kb] * sw;
        }
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        mma_e4m3(c, a00.x, a10.x, a00.y, a10.y, w[u][0].x, w[u][0].y);
        mma_e4m3(c, a00.z, a10.z, a00.w, a10.w, w[u][0].z, w[u][0].w);
        mma_e4m3(c, a01.x, a11.x, a01.y, a11.y, w[u][1].x, w[u][1].y);
        mma_e4m3(c, a01.z, a11.z, a01.w, a11.w, w[u][1].z, w[u][1].w);
        acc[mt][0] = fmaf(c[0], x0, acc[mt][0]);
        acc[mt][1] = fmaf(c[1], x0, acc[mt][1]);
        acc[mt][2] = fmaf(c[2], x1, acc[mt][2]);
        acc[mt][3] = fmaf(c[3], x1, acc[mt][3]);
      }
    }
  };
#pragma unroll 1
  for (int r = kb0; r < kb1; r += 4) {  // two rounds per pass: wa holds round r, wb round r + 2
    load(wb, r + 2);
    compute(wa, r);
    load(wa, r + 4);
    compute(wb, r + 2);
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    red[warp][mt * 16 + g][2 * t] = acc[mt][0];
    red[warp][mt * 16 + g][2 * t + 1] = acc[mt][1];
    if (!kLow8) {
      red[warp][mt * 16 + g + 8][2 * t] = acc[mt][2];
      red[warp][mt * 16 + g + 8][2 * t + 1] = acc[mt][3];
    }
  }
  __syncthreads();
  const int rows = min(a.M, kLow8 ? 8 : MT * 16);
  for (int i = threadIdx.x; i < tpb * rows * 8; i += 256) {
    const int tq = i / (rows * 8), r = i % (rows * 8) / 8, c = i % 8;
    const int tile_q = blockIdx.x * tpb + tq;
    if (tile_q >= a.G * tiles) continue;
    float s = 0.f;
    for (int k = 0; k < wpt; ++k) s += red[tq * wpt + k][r][c];  // fixed order
    a.y[int64_t(r) * a.ldy + int64_t(tile_q / tiles) * a.N + tile_q % tiles * 8 + c] = s;
  }
}

// Warps per tile (1, 2, 4 or 8) and K blocks per warp, from the shape alone: the fewest warps per
// tile that still give about 4096 warps in all (about two waves on the H200 at 2 blocks of 8 warps
// per SM), each with at least 2 K blocks; long runs amortise a warp's set-up (the read probes' rate
// needs few instructions per byte), split runs keep small shapes spread over the SMs.
struct GemvPlan {
  int wpt = 1, per = 1;
};
GemvPlan gemv_plan(int64_t tiles, int nkb) {
  GemvPlan p;
  while (p.wpt < 8 && tiles * p.wpt < 4096 && nkb >= 4 * p.wpt) p.wpt *= 2;
  p.per = (nkb + p.wpt - 1) / p.wpt;
  return p;
}

// ---------------- prefill path: 128x128x128 tiles, 3-stage cp.async ----------------
constexpr int kBM = 128, kBN = 128, kBK = 128, kStages = 3, kLds = 192;  // row stride 192 B: conflict-free
constexpr int kTileBytes = kBM * kLds;
constexpr int kSmemBytes = kStages * 2 * kTileBytes;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(n));
}

__global__ void __launch_bounds__(256, 1) fp8_tiled_kernel(const uint8_t* __restrict__ xq, const float* __restrict__ xs,
                                                           int M, const uint8_t* __restrict__ w,
                                                           const void* __restrict__ wsc, bool wsc_f32, int N, int K,
                                                           float* __restrict__ y) {
  detail::pdl_entry();
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int wm = warp >> 2, wn = warp & 3;  // 2 x 4 warps, each 64 x 32
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  const int nkb = K / kBK;

  auto load_tile = [&](int stage, int kb) {
    uint8_t* sa = smem + stage * 2 * kTileBytes;
    uint8_t* sb = sa + kTileBytes;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = tid + i * 256, row = c >> 3, col = (c & 7) * 16;
      const bool ok = m0 + row < M;
      const uint8_t* src = xq + int64_t(ok ? m0 + row : 0) * K + kb * kBK + col;
      cp_async16(sa + row * kLds + col, src, ok);
      cp_async16(sb + row * kLds + col, w + int64_t(n0 + row) * K + kb * kBK + col, true);
    }
  };

  float acc[4][4][4];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[a][b][i] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nkb) load_tile(s, s);
    asm volatile("cp.async.commit_group;");
  }
  for (int kb = 0; kb < nkb; ++kb) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 2));
    __syncthreads();
    if (kb + kStages - 1 < nkb) load_tile((kb + kStages - 1) % kStages, kb + kStages - 1);
    asm volatile("cp.async.commit_group;");

    const uint8_t* sa = smem + (kb % kStages) * 2 * kTileBytes;
    const uint8_t* sb = sa + kTileBytes;
    float c[4][4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b)
#pragma unroll
        for (int i = 0; i < 4; ++i) c[a][b][i] = 0.f;
#pragma unroll
    for (int step = 0; step < 2; ++step) {
      uint4 af[4][2], bf[4];
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        const int r = wm * 64 + mt * 16 + g;
        af[mt][0] = *reinterpret_cast<const uint4*>(sa + r * kLds + step * 64 + t * 16);
        af[mt][1] = *reinterpret_cast<const uint4*>(sa + (r + 8) * kLds + step * 64 + t * 16);
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int r = wn * 32 + nt * 8 + g;
        bf[nt] = *reinterpret_cast<const uint4*>(sb + r * kLds + step * 64 + t * 16);
      }
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          mma_e4m3(c[mt][nt], af[mt][0].x, af[mt][1].x, af[mt][0].y, af[mt][1].y, bf[nt].x, bf[nt].y);
          mma_e4m3(c[mt][nt], af[mt][0].z, af[mt][1].z, af[mt][0].w, af[mt][1].w, bf[nt].z, bf[nt].w);
        }
    }
    const float sw = wscale(wsc, wsc_f32, int64_t(n0 / 128) * nkb + kb);
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
      const int r0 = m0 + wm * 64 + mt * 16 + g, r1 = r0 + 8;
      const float s0 = r0 < M ? xs[int64_t(r0) * nkb + kb] * sw : 0.f;
      const float s1 = r1 < M ? xs[int64_t(r1) * nkb + kb] * sw : 0.f;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        acc[mt][nt][0] = fmaf(c[mt][nt][0], s0, acc[mt][nt][0]);
        acc[mt][nt][1] = fmaf(c[mt][nt][1], s0, acc[mt][nt][1]);
        acc[mt][nt][2] = fmaf(c[mt][nt][2], s1, acc[mt][nt][2]);
        acc[mt][nt][3] = fmaf(c[mt][nt][3], s1, acc[mt][nt][3]);
      }
    }
  }
  asm volatile("cp.async.wait_group 0;");
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
    const int r0 = m0 + wm * 64 + mt * 16 + g, r1 = r0 + 8;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int col = n0 + wn * 32 + nt * 8 + 2 * t;
      if (r0 < M) *reinterpret_cast<float2*>(y + int64_t(r0) * N + col) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
      if (r1 < M) *reinterpret_cast<float2*>(y + int64_t(r1) * N + col) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
}

bool check_shapes(const char* what, int64_t M, const Fp8Weight& w) {
  if (!w.data || !w.scale) return fail(std::string(what) + ": null weight");
  if (w.n % 128 || w.k % 128) return fail(std::string(what) + ": N and K must be multiples of 128");
  if (M < 0 || M > (int64_t(1) << 30)) return fail(std::string(what) + ": bad M");
  return true;
}

}  // namespace

size_t fp8_linear_workspace_bytes(int64_t, int64_t, int64_t) { return 0; }

namespace {

template <int MT, bool kLow8>
void launch_gemv_mt(dim3 grid, dim3 block, cudaStream_t s, const GemvArgs& a, const GemvPlan& p) {
  detail::launch_pdl(fp8_gemv_kernel<MT, kLow8>, grid, block, 0, s, a, p.wpt, p.per);
}

bool launch_skinny(const GemvArgs& a, void* stream) {
  const int64_t tiles = int64_t(a.G) * (a.N / 8);
  const GemvPlan p = gemv_plan(tiles, a.K / 128);
  const int tpb = 8 / p.wpt;
  const dim3 grid(static_cast<unsigned>((tiles + tpb - 1) / tpb)), block(256);
  const cudaStream_t s = as_stream(stream);
  if (a.M <= 8) launch_gemv_mt<1, true>(grid, block, s, a, p);
  else if (a.M <= 16) launch_gemv_mt<1, false>(grid, block, s, a, p);
  else if (a.M <= 32) launch_gemv_mt<2, false>(grid, block, s, a, p);
  else launch_gemv_mt<4, false>(grid, block, s, a, p);
  return check_launch("fp8_gemv_kernel");
}

}  // namespace

bool fp8_linear_skinny(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, float* y, void*,
                       void* stream) {
  if (!check_shapes("fp8_linear_skinny", M, w)) return false;
  if (M > 64) return fail("fp8_linear_skinny: M > 64");
  if (M == 0) return true;
  const GemvArgs a{xq, xs, w.k, w.k / 128, w.data, w.scale, w.scale_is_f32,
                   static_cast<int>(M), static_cast<int>(w.n), static_cast<int>(w.k), 1, y, w.n};
  return launch_skinny(a, stream);
}

bool fp8_linear_grouped_skinny(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, int groups,
                               float* y, void* stream) {
  if (!check_shapes("fp8_linear_grouped_skinny", M, w)) return false;
  if (M > 64) return fail("fp8_linear_grouped_skinny: M > 64");
  if (groups < 1 || w.n % (int64_t(groups) * 128)) return fail("fp8_linear_grouped_skinny: N / groups must be a multiple of 128");
  if (M == 0) return true;
  const int64_t n = w.n / groups;
  const GemvArgs a{xq, xs, w.k * groups, w.k / 128 * groups, w.data, w.scale, w.scale_is_f32,
                   static_cast<int>(M), static_cast<int>(n), static_cast<int>(w.k), groups, y, w.n};
  return launch_skinny(a, stream);
}

bool fp8_linear_tiled(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, float* y, void* stream) {
  if (!check_shapes("fp8_linear_tiled", M, w)) return false;
  if (M == 0) return true;
  static bool attr_set = false;
  if (!attr_set) {
    if (!detail::check(cudaFuncSetAttribute(fp8_tiled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes),
                       "cudaFuncSetAttribute(fp8_tiled_kernel)"))
      return false;
    attr_set = true;
  }
  const dim3 grid(static_cast<unsigned>(w.n / kBN), static_cast<unsigned>((M + kBM - 1) / kBM));
  detail::launch_pdl(fp8_tiled_kernel, grid, 256, kSmemBytes, as_stream(stream), xq, xs, static_cast<int>(M), w.data, w.scale,
                                                                  w.scale_is_f32, static_cast<int>(w.n),
                                                                  static_cast<int>(w.k), y);
  return check_launch("fp8_tiled_kernel");
}

bool fp8_linear(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, float* y, void* workspace,
                void* stream) {
  if (M <= 64) return fp8_linear_skinny(xq, xs, M, w, y, workspace, stream);
  return fp8_linear_tiled(xq, xs, M, w, y, stream);
}

}  // namespace deepinfer::cuda
