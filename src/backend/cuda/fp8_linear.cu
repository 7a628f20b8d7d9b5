// FP8 block-scaled linear y = x W^T on tensor cores (mma.sync m16n8k32 e4m3, fp32 accumulate).
//
// K permutation: thread (g = lane/4, t = lane%4) loads 16 contiguous K bytes of a row, and one
// 64-wide K step is two mma: the first takes bytes 0-7 of each thread's 16 (as the fragment's
// K t*4..t*4+3 and 16+t*4..), the second bytes 8-15. A and B use the same mapping, so the dot
// product is unchanged and every fragment load is one 16-byte access.
// Scales: one per 128 along K for x, per 128x128 tile for W; each 128-wide K block is
// accumulated in a fresh fp32 fragment, then added to the result times sx * sw.
#include <cooperative_groups.h>

#include <algorithm>

#include "backend/cuda/cuda_common.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;
namespace cg = cooperative_groups;

namespace {

__device__ __forceinline__ void mma_e4m3(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float wscale(const void* s, bool f32, int64_t i) {
  return f32 ? static_cast<const float*>(s)[i] : detail::e8m0_to_float(static_cast<const uint8_t*>(s)[i]);
}

// ---------------- decode path: weight streaming, M <= 16 * MT ----------------
// One launch computes G groups (blockIdx.z; G = 1 for a plain linear): group g multiplies x's
// columns [g*K, (g+1)*K) by weight rows [g*N, (g+1)*N) into y's columns [g*N, (g+1)*N) (V4's
// grouped wo_a in one launch). grid (tile groups, ksplit, G), 8 warps (at most about one wave of
// blocks: a block runs tile groups x, x + gridDim.x, ...): a tile group is TB tiles of 8
// weight rows, 8/TB warps per tile; warp slice s = blockIdx.y * (8/TB) + its index in the tile
// takes K blocks s, s+S, ... (S = ksplit * 8/TB) in order, with the weights of kSkinnyInFlight
// blocks in flight (2; 4 took 106 registers and measured slower on the H200, wq_b 18.8 vs 17.9
// us). A tile's warp sums are added in warp order in shared memory; with
// ksplit > 1 the ksplit blocks of a tile form one thread-block cluster and block 0 adds the
// blocks' sums in block order through distributed shared memory (no workspace, no second launch).
// TB, ksplit follow from (G*N, K) and the SM count alone, so a row's sums never depend on M.
struct SkinnyArgs {
  const uint8_t* xq;
  const float* xs;
  int64_t ldx, ldxs;  // x row stride (bytes), scale row stride (floats)
  const uint8_t* w;
  const void* wsc;
  bool wsc_f32;
  int M, N, K;  // per group
  float* y;
  int64_t ldy;
};

constexpr int kPrefetchChunk = 4096;  // bytes per L2 bulk prefetch
constexpr int kSkinnyInFlight = 2;  // K blocks (1 KB of weights each per warp) in flight per warp

// One tile group (TB tiles of 8 weight rows, column block `tx` of group `grp`): the K loop of every
// warp, the fixed-order warp sums, and with a split K the cluster's sum (see above).
template <int MT, int TB>
__device__ __forceinline__ void skinny_tile_group(const SkinnyArgs& a, int tx, int grp, float (&red)[8][MT * 16][8],
                                                  float (&part)[TB][MT * 16][8]) {
  constexpr int WK = 8 / TB, U = kSkinnyInFlight;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tile = warp / WK, M = a.M, K = a.K;
  const int n0 = (tx * TB + tile) * 8, wn0 = grp * a.N + n0;
  const int nkb = K / 128;
  const int S = gridDim.y * WK, s0 = blockIdx.y * WK + warp % WK;
  const int mine = s0 < nkb ? (nkb - s0 + S - 1) / S : 0;  // this warp's K blocks s0, s0 + S, ...
  const uint8_t* xq = a.xq + int64_t(grp) * K;
  const float* xs = a.xs + int64_t(grp) * nkb;
  const uint8_t* wrow = a.w + int64_t(wn0 + g) * K + t * 16;
  const int64_t wsrow = int64_t(wn0 / 128) * nkb;
  float acc[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[mt][i] = 0.f;

  uint4 wc[U][2];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    wc[u][0] = wc[u][1] = make_uint4(0, 0, 0, 0);
    if (u < mine) {
      const uint8_t* p = wrow + (s0 + u * S) * 128;
      wc[u][0] = detail::ldg_nc_v4(p);
      wc[u][1] = detail::ldg_nc_v4(p + 64);
    }
  }
  detail::pdl_wait();  // no-op after the first call
  detail::pdl_trigger();
  for (int i0 = 0; i0 < mine; i0 += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + u;
      if (i >= mine) break;
      const int kb = s0 + i * S;
      const uint4 w0 = wc[u][0], w1 = wc[u][1];
      if (i + U < mine) {  // refill this slot with the warp's block U ahead
        const uint8_t* p = wrow + (kb + U * S) * 128;
        wc[u][0] = detail::ldg_nc_v4(p);
        wc[u][1] = detail::ldg_nc_v4(p + 64);
      }
      const float sw = wscale(a.wsc, a.wsc_f32, wsrow + kb);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int r0 = mt * 16 + g, r1 = r0 + 8;
        uint4 a00 = make_uint4(0, 0, 0, 0), a01 = a00, a10 = a00, a11 = a00;
        float x0 = 0.f, x1 = 0.f;
        if (r0 < M) {
          const uint8_t* p = xq + int64_t(r0) * a.ldx + kb * 128 + t * 16;
          a00 = *reinterpret_cast<const uint4*>(p);
          a01 = *reinterpret_cast<const uint4*>(p + 64);
          x0 = xs[int64_t(r0) * a.ldxs + kb];
        }
        if (r1 < M) {
          const uint8_t* p = xq + int64_t(r1) * a.ldx + kb * 128 + t * 16;
          a10 = *reinterpret_cast<const uint4*>(p);
          a11 = *reinterpret_cast<const uint4*>(p + 64);
          x1 = xs[int64_t(r1) * a.ldxs + kb];
        }
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        mma_e4m3(c, a00.x, a10.x, a00.y, a10.y, w0.x, w0.y);
        mma_e4m3(c, a00.z, a10.z, a00.w, a10.w, w0.z, w0.w);
        mma_e4m3(c, a01.x, a11.x, a01.y, a11.y, w1.x, w1.y);
        mma_e4m3(c, a01.z, a11.z, a01.w, a11.w, w1.z, w1.w);
        acc[mt][0] = fmaf(c[0], x0 * sw, acc[mt][0]);
        acc[mt][1] = fmaf(c[1], x0 * sw, acc[mt][1]);
        acc[mt][2] = fmaf(c[2], x1 * sw, acc[mt][2]);
        acc[mt][3] = fmaf(c[3], x1 * sw, acc[mt][3]);
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    red[warp][mt * 16 + g][2 * t] = acc[mt][0];
    red[warp][mt * 16 + g][2 * t + 1] = acc[mt][1];
    red[warp][mt * 16 + g + 8][2 * t] = acc[mt][2];
    red[warp][mt * 16 + g + 8][2 * t + 1] = acc[mt][3];
  }
  __syncthreads();
  constexpr int kOut = MT * 16 * 8;  // outputs per tile
  float* yg = a.y + int64_t(grp) * a.N + int64_t(tx) * TB * 8;
  const bool split = gridDim.y > 1;
  for (int i = threadIdx.x; i < TB * kOut; i += 256) {
    const int tl = i / kOut, r = i % kOut / 8, c = i % 8;
    if (r >= M) continue;
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < WK; ++k) s += red[tl * WK + k][r][c];  // fixed order
    if (split) {
      part[tl][r][c] = s;
    } else {
      yg[int64_t(r) * a.ldy + tl * 8 + c] = s;
    }
  }
  if (!split) {
    __syncthreads();  // red[] is read before the next tile group writes it
    return;
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's part[] written
  if (blockIdx.y == 0) {
    for (int i = threadIdx.x; i < TB * kOut; i += 256) {
      const int tl = i / kOut, r = i % kOut / 8, c = i % 8;
      if (r >= M) continue;
      float s = 0.f;
      for (int k = 0; k < int(gridDim.y); ++k) s += cluster.map_shared_rank(&part[0][0][0], k)[i];  // fixed order
      yg[int64_t(r) * a.ldy + tl * 8 + c] = s;
    }
  }
  cluster.sync();  // block 0 has read every part[] before any block exits
}


// grid (min(tile groups, about one wave), ksplit, G). Before waiting for the kernel it depends on
// (pdl_entry), a block prefetches into L2 the weights of every tile group it will run (its share
// of them when K is split) and loads its first K blocks: the weights are no kernel's output, so
// with programmatic dependent launch they stream in while the previous kernel drains. With more
// tile groups than blocks (ksplit is then 1) a block runs groups tx, tx + gridDim.x, ...
template <int MT, int TB>
__global__ void __launch_bounds__(256) fp8_skinny_kernel(SkinnyArgs a, int tile_groups) {
  __shared__ float red[8][MT * 16][8];
  __shared__ float part[TB][MT * 16][8];
  const int grp = blockIdx.z;
  if (threadIdx.x < 32) {
    const int64_t total = int64_t(TB) * 8 * a.K;  // one tile group's rows, contiguous
    const int64_t per = (total / 128 + gridDim.y - 1) / gridDim.y * 128, from = blockIdx.y * per;
    const int64_t bytes = from < total ? (total - from < per ? total - from : per) : 0;
    for (int tx = blockIdx.x; tx < tile_groups; tx += gridDim.x) {
      const uint8_t* base = a.w + int64_t(grp * a.N + tx * TB * 8) * a.K + from;
      for (int64_t off = int64_t(threadIdx.x) * kPrefetchChunk; off < bytes; off += 32 * kPrefetchChunk)
        detail::prefetch_l2(base + off, static_cast<uint32_t>(bytes - off < kPrefetchChunk ? bytes - off : kPrefetchChunk));
    }
  }
#pragma unroll 1
  for (int tx = blockIdx.x; tx < tile_groups; tx += gridDim.x) skinny_tile_group<MT, TB>(a, tx, grp, red, part);
}

constexpr int kMaxCluster = 8;  // portable thread-block cluster size
constexpr int kSkinnyBlocksPerSm = 2;  // resident blocks of 256 threads at 74-110 registers

// Tiles per block and blocks per tile along K, from the shape and the SM count alone (never M):
// about one wave of blocks (on the H200 a second wave cost more than it gained: shared.w1
// 2048x4096 split over 512 blocks took 8.9 us, over 256 blocks 6.1 us). Few tiles: split K over
// a cluster up to one wave (each warp keeps >= 1 K block); many tiles: several tiles per block.
struct SkinnyPlan {
  int tb = 1, ksplit = 1;
};
SkinnyPlan skinny_plan(int64_t tiles, int64_t nkb, int sms) {
  const int64_t wave = int64_t(sms) * kSkinnyBlocksPerSm;
  SkinnyPlan p;
  if (tiles <= wave) {
    p.ksplit = static_cast<int>(std::max<int64_t>(
        1, std::min<int64_t>(std::min<int64_t>(wave / tiles, kMaxCluster), std::max<int64_t>(nkb / 8, 1))));
  } else {
    while (p.tb < 8 && tiles / p.tb > wave) p.tb *= 2;
  }
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

template <int MT>
cudaError_t launch_skinny_mt(const cudaLaunchConfig_t& cfg, int tb, const SkinnyArgs& a, int tile_groups) {
  switch (tb) {
    case 1: return cudaLaunchKernelEx(&cfg, fp8_skinny_kernel<MT, 1>, a, tile_groups);
    case 2: return cudaLaunchKernelEx(&cfg, fp8_skinny_kernel<MT, 2>, a, tile_groups);
    case 4: return cudaLaunchKernelEx(&cfg, fp8_skinny_kernel<MT, 4>, a, tile_groups);
    default: return cudaLaunchKernelEx(&cfg, fp8_skinny_kernel<MT, 8>, a, tile_groups);
  }
}

bool launch_skinny(const SkinnyArgs& a, int groups, void* stream) {
  const SkinnyPlan p = skinny_plan(int64_t(a.N / 8) * groups, a.K / 128, detail::sm_count());
  // At most about one wave of blocks: each runs its tile groups in turn (ksplit is 1 whenever
  // there are more tile groups than that).
  const int64_t tile_groups = a.N / 8 / p.tb;
  const int64_t wave = int64_t(detail::sm_count()) * kSkinnyBlocksPerSm;
  const int64_t blocks_x = p.ksplit > 1 ? tile_groups : std::min<int64_t>(tile_groups, (wave + groups - 1) / groups);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks_x), static_cast<unsigned>(p.ksplit), static_cast<unsigned>(groups));
  cfg.blockDim = dim3(256);
  cfg.stream = as_stream(stream);
  cudaLaunchAttribute attr[2];
  attr[0] = detail::pdl_attribute();
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = 1, attr[1].val.clusterDim.y = static_cast<unsigned>(p.ksplit);
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = p.ksplit > 1 ? 2 : 1;
  const cudaError_t e = a.M <= 16   ? launch_skinny_mt<1>(cfg, p.tb, a, static_cast<int>(tile_groups))
                        : a.M <= 32 ? launch_skinny_mt<2>(cfg, p.tb, a, static_cast<int>(tile_groups))
                                    : launch_skinny_mt<4>(cfg, p.tb, a, static_cast<int>(tile_groups));
  return detail::check(e, "fp8_skinny_kernel");
}

}  // namespace

bool fp8_linear_skinny(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, float* y, void*,
                       void* stream) {
  if (!check_shapes("fp8_linear_skinny", M, w)) return false;
  if (M > 64) return fail("fp8_linear_skinny: M > 64");
  if (M == 0) return true;
  const SkinnyArgs a{xq, xs, w.k, w.k / 128, w.data, w.scale, w.scale_is_f32,
                     static_cast<int>(M), static_cast<int>(w.n), static_cast<int>(w.k), y, w.n};
  return launch_skinny(a, 1, stream);
}

bool fp8_linear_grouped_skinny(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, int groups,
                               float* y, void* stream) {
  if (!check_shapes("fp8_linear_grouped_skinny", M, w)) return false;
  if (M > 64) return fail("fp8_linear_grouped_skinny: M > 64");
  if (groups < 1 || w.n % (int64_t(groups) * 128)) return fail("fp8_linear_grouped_skinny: N / groups must be a multiple of 128");
  if (M == 0) return true;
  const int64_t n = w.n / groups;
  const SkinnyArgs a{xq, xs, w.k * groups, w.k / 128 * groups, w.data, w.scale, w.scale_is_f32,
                     static_cast<int>(M), static_cast<int>(n), static_cast<int>(w.k), y, w.n};
  return launch_skinny(a, groups, stream);
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
