// FP8 block-scaled linear for decode batches of 1-256 rows on Hopper's warpgroup MMA (cuda_ops.h,
// fp8_linear_wgmma): y = x W^T with the operands swapped, so the weights fill wgmma's 64-row M side
// and the batch rows are its N (16, 32, 64 or 128 columns, the fewest that hold M; 129-256 rows as
// two halves of 128 that share each weight stage: one n128 fragment, promoted into each half's
// accumulators in turn, so the weights are read once where two 128-row launches read them twice).
//
// Why: at 32-64 rows the mma.sync GEMV (fp8_linear.cu) re-reads a warp's x rows for every 8 weight
// rows (at 64 rows, 8 bytes of x per byte of weights) and cuBLASLt takes about 15 us per call even
// for 4 MB of weights (ncu on the H200, the EP slice at batch 64). Here a block's x rows are read
// once per 128 weight rows, from shared memory, by the tensor cores.
//
// Block: 2 warpgroups, 128 weight rows of one group (warpgroup w: rows 64w..64w+63) x a run of
// `per` K blocks (128 wide). Per K block a cp.async ring stage holds the 128 weight rows and the
// x rows (128 B each, the 128-byte swizzle wgmma_desc_sw128 describes), the x rows' scales and the
// tile's weight scale; 4 wgmma (k32 slices) into a fresh fragment, added times sw * sx[column].
// The weights of the first stages are requested before the PDL wait (no kernel writes them).
// Split K: the grid's y dimension splits K into `splits` runs; the blocks of one tile form a
// cluster, each block owns 128 / splits of the tile's rows, receives the other blocks' partial sums
// of them in its shared memory and adds them in rank order (fixed order: a row's result follows
// from the shape and M's column width, never from timing).
#include <atomic>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/mma_common.cuh"
#include "backend/cuda/wgmma.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;
using namespace detail;

namespace {

constexpr int kTileRows = 128;            // weight rows per block (2 warpgroups x 64)
constexpr int kWBytes = kTileRows * 128;  // one K block of them: 16 KB
constexpr int kMaxSplit = 8;              // K runs per tile = the cluster size (the portable limit)
constexpr int kStages = 4;
// A stage: the weight rows, the NW x rows, their scales (NW floats, at least 512 B), then the
// tile's weight scale (4 B), padded so that stages stay 1024-aligned.
template <int NW>
constexpr int xs_bytes() { return NW * 4 > 512 ? NW * 4 : 512; }
template <int NW>
constexpr int sw_off() { return kWBytes + NW * 128 + xs_bytes<NW>(); }  // the weight scale's offset in a stage
template <int NW>
constexpr int stage_bytes() { return kWBytes + NW * 128 + (xs_bytes<NW>() + 512 + 1023) / 1024 * 1024; }
// wgmma's N: the x columns of one MMA (NW = 256: two halves of 128, one fragment reused).
template <int NW>
constexpr int mma_n() { return NW > 128 ? 128 : NW; }
template <int NW>
constexpr int smem_bytes() { return kStages * stage_bytes<NW>() + 1024; }  // + alignment slack
// Split K's receive buffer (the ring, once every block of the cluster is past it): a block's partial
// tile (128 rows x NW columns, fp32) from each of the cluster's blocks, 512 NW bytes in all.
template <int NW>
constexpr bool partials_fit() { return 512 * NW <= kStages * stage_bytes<NW>(); }
static_assert(partials_fit<16>() && partials_fit<32>() && partials_fit<64>() && partials_fit<128>() &&
                  partials_fit<256>(), "the partial tiles fit the ring");
static_assert(stage_bytes<256>() % 1024 == 0 && stage_bytes<128>() % 1024 == 0, "stages stay 1024-aligned");

struct Args {
  const uint8_t* xq;
  const float* xs;
  int64_t ldx, ldxs;  // x row stride (bytes), scale row stride (floats)
  const uint8_t* w;
  const void* wsc;
  bool wsc_f32;
  int M, N, K, G;  // N, K per group
  float* y;
  int64_t ldy;
  int per;  // K blocks per split
};

// Byte offset of (row, 16-byte chunk) in a tile of 128-byte rows with the 128-byte swizzle.
__device__ __forceinline__ uint32_t sw128(int row, int chunk) {
  return uint32_t(row * 128 + ((chunk ^ (row & 7)) << 4));
}


template <int NW>
__global__ void __launch_bounds__(256, NW <= 64 ? 2 : 1) fp8_wgmma_kernel(Args a0) {
  // Grid z > 1: the rows in halves of 128, half z here (x, its scales and y 128 rows on each).
  Args a = a0;
  if constexpr (NW == 128) {  // the only width launched in halves (run)
    if (gridDim.z > 1) {
      const int h = blockIdx.z;
      a.xq += int64_t(128) * h * a.ldx, a.xs += int64_t(128) * h * a.ldxs, a.y += int64_t(128) * h * a.ldy;
      a.M = min(128, a0.M - 128 * h);
    }
  }
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)), s_base = (raw + 1023u) & ~1023u;
  const unsigned char* s_ptr = smem_raw + (s_base - raw);  // the same, as a generic pointer (plain loads)
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int tiles = a.N / kTileRows, grp = blockIdx.x / tiles, n0 = blockIdx.x % tiles * kTileRows;
  const int nkb = a.K / 128, kb0 = blockIdx.y * a.per, nk = max(0, min(nkb, kb0 + a.per) - kb0);
  // This thread's copies: weight rows tid / 8 + 32q, chunk tid % 8; x chunks c = tid + 256q.
  const uint8_t* wsrc = a.w + (int64_t(grp) * a.N + n0 + (tid >> 3)) * a.K + int64_t(kb0) * 128 + (tid & 7) * 16;
  const int64_t sidx = int64_t(grp * a.N + n0) / 128 * nkb + kb0;  // the tile's weight scale at kb0
  auto issue_w = [&](int i) {
    if (i >= nk) return;
    const uint32_t st = s_base + (i % kStages) * stage_bytes<NW>();
#pragma unroll
    for (int q = 0; q < 4; ++q)
      cp_async16(st + sw128((tid >> 3) + 32 * q, tid & 7), wsrc + int64_t(32 * q) * a.K + int64_t(i) * 128);
    if (tid == 255) {
      const uint8_t* s = static_cast<const uint8_t*>(a.wsc);  // E8M0: the aligned word holding the byte
      cp_async4(st + sw_off<NW>(),
                a.wsc_f32 ? s + (sidx + i) * 4 : reinterpret_cast<const uint8_t*>(uintptr_t(s + sidx + i) & ~uintptr_t(3)));
    }
  };
  auto issue_x = [&](int i) {
    if (i < nk) {
      const uint32_t st = s_base + (i % kStages) * stage_bytes<NW>();
      const int kb = kb0 + i;
#pragma unroll
      for (int q = 0; q < (NW * 8 + 255) / 256; ++q) {
        const int c = tid + 256 * q, r = c >> 3;
        if (r < a.M)
          cp_async16(st + kWBytes + sw128(r, c & 7), a.xq + int64_t(r) * a.ldx + int64_t(grp) * a.K + kb * 128 + (c & 7) * 16);
      }
      if (tid < a.M) cp_async4(st + kWBytes + NW * 128 + tid * 4, a.xs + int64_t(tid) * a.ldxs + int64_t(grp) * nkb + kb);
    }
    cp_commit();
  };
  // The copies run kStages - 1 blocks ahead. (Overlapping block i's wgmma with block i - 1's
  // promotion, two fragments, makes ptxas serialise every wgmma: C7514, CUDA 13.0.)
  constexpr int D = kStages - 1;
#pragma unroll
  for (int i = 0; i < D; ++i) issue_w(i);
  pdl_wait();
  pdl_trigger();
#pragma unroll
  for (int i = 0; i < D; ++i) issue_x(i);

  constexpr int NH = mma_n<NW>(), kHalves = NW / NH;
  float acc[NW / 2];  // columns 8j + 2t (+1): acc[4j ..]; half h holds j in [NH / 8 h, NH / 8 (h + 1))
#pragma unroll
  for (int j = 0; j < NW / 2; ++j) acc[j] = 0.f;
  const int xs_col = kWBytes + NW * 128 + 2 * t * 4;  // scales of columns 8j + 2t, + 1: + 32j
  // Stage i in for every thread, and (barrier) every warpgroup past block i - 1's wgmma: its stage is refilled.
  auto head = [&](int i) {
    cp_wait<D - 1>();
    fence_proxy_async_shared();
    __syncthreads();
    issue_w(i + D);
    issue_x(i + D);
  };
  // x columns [NH h, NH (h + 1)) of block i: 128-byte rows, so half h starts NH * 128 B on.
  auto mma = [&](float (&f)[NH / 2], int i, int h) {
    const uint32_t st = s_base + (i % kStages) * stage_bytes<NW>();
    const uint64_t da = wgmma_desc_sw128(st + wg * 64 * 128), db = wgmma_desc_sw128(st + kWBytes + h * NH * 128);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) wgmma_e4m3_ss<NH>(f, da + 2 * k, db + 2 * k, k);  // + 32 B per k32 slice
    wgmma_commit();
  };
  // acc (half h) += f * sw * sx[column], the scales from block i's stage (plain loads: issued together)
  auto promote = [&](float (&f)[NH / 2], int i, int h) {
#pragma unroll
    for (int j = 0; j < NH / 2; ++j) wgmma_fence_operand(f[j]);
    const unsigned char* sp = s_ptr + (i % kStages) * stage_bytes<NW>();
    const uint32_t swv = *reinterpret_cast<const uint32_t*>(sp + sw_off<NW>());
    const int sb = int((uintptr_t(a.wsc) + sidx + i) & 3);
    const float sw = a.wsc_f32 ? __uint_as_float(swv) : e8m0_to_float((swv >> (8 * sb)) & 0xffu);
#pragma unroll
    for (int jj = 0; jj < NH / 8; ++jj) {
      const int j = h * (NH / 8) + jj;
      const float2 sx = *reinterpret_cast<const float2*>(sp + xs_col + 32 * j);
      const float s0 = sw * sx.x, s1 = sw * sx.y;
      acc[4 * j + 0] = fmaf(f[4 * jj + 0], s0, acc[4 * j + 0]);
      acc[4 * j + 1] = fmaf(f[4 * jj + 1], s1, acc[4 * j + 1]);
      acc[4 * j + 2] = fmaf(f[4 * jj + 2], s0, acc[4 * j + 2]);
      acc[4 * j + 3] = fmaf(f[4 * jj + 3], s1, acc[4 * j + 3]);
    }
  };
  float f[NH / 2];
#pragma unroll
  for (int j = 0; j < NH / 2; ++j) f[j] = 0.f;
#pragma unroll 1
  for (int i = 0; i < nk; ++i) {
    head(i);
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      mma(f, i, h);
      wgmma_wait<0>();
      promote(f, i, h);
    }
  }
  cp_wait<0>();
  const int splits = gridDim.y;
  float* y = a.y + int64_t(grp) * a.N + n0;
  const int r = wg * 64 + warp * 16 + g;  // this thread's rows r, r + 8; columns 8j + 2t, + 1
  if (splits == 1) {  // no partner blocks: straight from the registers
#pragma unroll
    for (int j = 0; j < NW / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = 8 * j + 2 * t + e;
        if (c < a.M) {
          y[int64_t(c) * a.ldy + r] = acc[4 * j + e];
          y[int64_t(c) * a.ldy + r + 8] = acc[4 * j + 2 + e];
        }
      }
    return;
  }
  // Split K: block `rank` owns rows [rank * rows, + rows) of the tile (rows >= 16, so a warp's 16
  // rows have one owner). Every block pushes its partial rows to their owner's shared memory in
  // its threads' register order, slot [rank][warp of the owner's rows][j][lane] of float4 (the
  // thread's acc[4j ..]: a warp's store is 512 contiguous bytes; nothing waits on remote stores),
  // then each owner sums its slots in rank order. (Scattered 8-byte pushes, one row's column pair
  // each, were 40% of the stall samples at wq_a's 256 rows, split 8: the LSU queue full, ncu.)
  cluster_sync();  // every block of the cluster is done with its ring: it becomes the receive buffer
  const int lr = 7 - (31 - __clz(splits)), rows = 1 << lr, wpo = rows >> 4;  // rows, warps' slots per owner
  constexpr int J = NW / 8;
  const uint32_t me = cluster_rank();
  {
    const int w0 = wg * 64 + warp * 16;  // the warp's first row
    const uint32_t slot = ((me * wpo + ((w0 & (rows - 1)) >> 4)) * J * 32 + lane) * 16;
    const uint32_t dst = dsmem_addr(s_base + slot, uint32_t(w0 >> lr));
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (8 * j < a.M) st_dsmem_f32x4(dst + j * 512, acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
  }
  cluster_sync();  // every partial row is in its owner's slots
  const float4* red = reinterpret_cast<const float4*>(s_ptr);
  for (int e = tid; e < wpo * J * 32; e += 256) {
    const int ln = e & 31, j = (e >> 5) % J, wi = (e >> 5) / J, c = 8 * j + 2 * (ln & 3);
    if (c >= a.M) continue;
    float4 v = red[e];
    for (int q = 1; q < splits; ++q) {
      const float4 u = red[q * wpo * J * 32 + e];
      v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
    }
    const int row = int(me) * rows + wi * 16 + (ln >> 2);  // and row + 8: v.z, v.w
    y[int64_t(c) * a.ldy + row] = v.x;
    y[int64_t(c) * a.ldy + row + 8] = v.z;
    if (c + 1 < a.M) {
      y[int64_t(c + 1) * a.ldy + row] = v.y;
      y[int64_t(c + 1) * a.ldy + row + 8] = v.w;
    }
  }
}

// Clusters of `s` blocks that fit on the device at once (cudaOccupancyMaxActiveClusters), asked once
// per device and s. On the H200 at 64 columns: 30 clusters of 8 (not 33), so 32 tiles split 8 ways
// ran as two waves (ncu: SMs idle 40% of the kernel).
template <int NW>
int max_clusters(int s) {
  static std::atomic<int> asked[64][4] = {};  // [device][log2 s]; 0: not asked yet
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 1;
  std::atomic<int>& slot = asked[dev & 63][s >= 8 ? 3 : s >= 4 ? 2 : s >= 2 ? 1 : 0];
  if (const int v = slot.load(std::memory_order_relaxed)) return v;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 1;
  attr.val.clusterDim.y = static_cast<unsigned>(s);
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1, static_cast<unsigned>(s));
  cfg.blockDim = dim3(256);
  cfg.dynamicSmemBytes = smem_bytes<NW>();
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, fp8_wgmma_kernel<NW>, &cfg) != cudaSuccess || n <= 0) {
    cudaGetLastError();  // unknown: plan as if one cluster fits (a split then needs the tiles to fit it too)
    n = 1;
  }
  slot.store(n, std::memory_order_relaxed);
  return n;
}

// K runs per tile: the most (up to kMaxSplit, each run at least 4 K blocks) whose clusters, one per
// tile, all fit on the device at once (one wave); else 1. From (tiles, K, NW) and the device.
template <int NW>
int split_plan(int64_t tiles, int nkb) {
  for (int s = kMaxSplit; s > 1; s /= 2)
    if (nkb >= 4 * s && tiles <= max_clusters<NW>(s)) return s;
  return 1;
}

template <int NW>
bool launch(const Args& a0, cudaStream_t stream, int halves = 1) {
  static std::atomic<uint64_t> smem_set{0};  // per instantiation: one bit per device
  if (!max_dynamic_smem_once(reinterpret_cast<const void*>(fp8_wgmma_kernel<NW>), smem_bytes<NW>(), smem_set,
                             "fp8 wgmma linear: shared-memory size"))
    return false;
  const int64_t tiles = int64_t(a0.G) * (a0.N / kTileRows);
  const int nkb = a0.K / 128, splits = split_plan<NW>(tiles * halves, nkb);
  Args a = a0;
  a.per = (nkb + splits - 1) / splits;
  cudaLaunchAttribute attr[2] = {pdl_attribute(), {}};
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = 1;
  attr[1].val.clusterDim.y = static_cast<unsigned>(splits);
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits), static_cast<unsigned>(halves));
  cfg.blockDim = dim3(256);
  cfg.dynamicSmemBytes = smem_bytes<NW>();
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  (void)cudaLaunchKernelEx(&cfg, fp8_wgmma_kernel<NW>, a);
  return check_launch("fp8_wgmma_kernel");
}

bool run(const char* what, const Args& a, void* stream) {
  if (!a.w || !a.wsc || !a.xq || !a.xs || !a.y) return fail(std::string(what) + ": null argument");
  if (a.M < 0 || a.M > kFp8WgmmaMaxRows) return fail(std::string(what) + ": M must be in [0, 256]");
  if (a.M == 0) return true;
  const cudaStream_t s = as_stream(stream);
  if (a.M <= 16) return launch<16>(a, s);
  if (a.M <= 32) return launch<32>(a, s);
  if (a.M <= 64) return launch<64>(a, s);
  if (a.M <= 128) return launch<128>(a, s);
  // Grouped (wo_a) past 128 rows: both halves of 128 in one launch, side by side (no split of K
  // where the tiles fill the GPU): the NW = 256 kernel's split-K reduction and serial halves were
  // ~30% of its stall samples (ncu, the grouped wo_a at 256 rows). H100 op bench: 8 x 1024 x 4096
  // at 144 / 192 / 224 / 256 rows 43.3 / 42.2 / 44.5 / 44.5 -> 39.5 / 40.3 / 39.4 / 40.7 us; of 9
  // row counts from 129 to 256 only 200 was slower (40.6 -> 41.6).
  if (a.G > 1) return launch<128>(a, s, 2);
  return launch<256>(a, s);
}

}  // namespace

bool fp8_linear_wgmma(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, float* y, void* stream) {
  if (w.n % 128 || w.k % 128 || w.n <= 0 || w.k <= 0) return fail("fp8_linear_wgmma: N and K must be positive multiples of 128");
  const Args a{xq, xs, w.k, w.k / 128, w.data, w.scale, w.scale_is_f32, static_cast<int>(M), static_cast<int>(w.n),
               static_cast<int>(w.k), 1, y, w.n, 0};
  return run("fp8_linear_wgmma", a, stream);
}

bool fp8_linear_grouped_wgmma(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, int groups, float* y,
                              void* stream) {
  if (groups < 1 || w.n % (int64_t(groups) * 128) || w.k % 128 || w.k <= 0)
    return fail("fp8_linear_grouped_wgmma: N / groups and K must be multiples of 128");
  const int64_t n = w.n / groups;
  const Args a{xq, xs, w.k * groups, w.k / 128 * groups, w.data, w.scale, w.scale_is_f32, static_cast<int>(M),
               static_cast<int>(n), static_cast<int>(w.k), groups, y, w.n, 0};
  return run("fp8_linear_grouped_wgmma", a, stream);
}

}  // namespace deepinfer::cuda
