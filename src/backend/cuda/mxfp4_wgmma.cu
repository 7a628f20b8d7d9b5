// MXFP4 routed experts on Hopper's warpgroup MMA (cuda_ops.h, "wgmma" variants of the wide
// kernels): the same inputs, outputs and scale handling as mxfp4_experts.cu, with the roles of the
// operands swapped so the weights never pass through a second shared-memory copy.
//
// Block: 128 weight rows of one group (two warpgroups x 64: warp w owns rows 16w..16w+15) and all of
// the group's <= NMAX rows. K is walked in 128-wide chunks through a cp.async ring of fixed bytes,
// 4-10 stages deep as the group's width allows (stages()): per stage the group's rows as fp16 (two
// panels of 64 columns, 128 B per row, 128-byte swizzle: the wgmma B operand, K-major, N = the
// group's rows rounded up to the wgmma width), 128 x 64 B of packed e2m1 (XOR-swizzled for ldmatrix)
// and 128 x 4 scale bytes. Each warp takes its weights with ldmatrix (lane (g, t): the
// device-layout word of codes 8t..8t+7 of rows g and g + 8, every scale group) and dequantises
// them in registers (e2m1_dev_pairs) straight into the A fragments: per 32 columns (one scale
// group) two m64 x N x k16 wgmma, A = {row g | row g + 8} x {pairs (8t, 8t+1) | (8t+2, 8t+3)},
// then (8t+4, 8t+5) | (8t+6, 8t+7). A chunk's 8 wgmma run on while the warpgroup dequantises the
// next chunk (two register sets of A fragments). The rows are stored pair-transposed
// (mxfp4_f16_pair_pos), so those permuted k orders meet the same permutation on the B side: the
// k16 slices of B are plain consecutive 16-column slices of the stored rows.
// Scales: as the wide kernels, folded into the lookup table (2^(s - 127 + 8)) when every scale byte
// of the chunk's 128 weight rows is in [106, 132]; otherwise per 32 along K two wgmma into a fresh
// accumulator, added times 2^8 * scale. The epilogue multiplies by 2^-8. Which path a chunk takes
// depends on the weights only. The unfolded path is compiled in only when the caller cannot
// promise foldable scales (mxfp4_scales_foldable, checked once per weight at upload): adding into
// the accumulators outside wgmma makes ptxas serialise every wgmma of the kernel.
// N (the wgmma width) follows the group's rows (16, 32, 48, 64, 96 or 128; block-uniform); columns
// past the group's rows compute on stale shared memory and are never stored (a column of D depends
// only on its own column of B).
// w13 variant: warp w's rows are w1 rows c0 + 8w .. + 7 (its rows g) and w3 rows c0 + 8w .. + 7
// (rows g + 8), c0 = 64 * block, so gate and up of one output sit in one thread and the clamped
// SwiGLU is the epilogue (fp16, pair-transposed, for the w2 kernel).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/mma_common.cuh"
#include "backend/cuda/wgmma.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;
using detail::max_dynamic_smem_once;
using namespace detail;

namespace {

constexpr int kWarps = 8;
constexpr int kRows = kWarps * 16;       // 128 weight rows per block
constexpr int kStageW = kRows * 64;      // 8 KB of packed weights per stage
constexpr int kStageS = 1024;            // 512 B of scales, padded: the next stage's rows stay 1024-aligned
// A stage holds N fp16 rows (the width the block runs at), the weights and the scales.
template <int N>
constexpr int stage_bytes() { return N * 256 + kStageW + kStageS; }
// The ring's bytes, fixed per launch (NMAX): 4 stages at width 64 (two blocks per SM), 5 at 128
// (one block per SM).
template <int NMAX>
constexpr int ring_bytes() { return (NMAX <= 64 ? 4 : 5) * stage_bytes<NMAX>(); }
template <int NMAX>
constexpr int smem_bytes() { return ring_bytes<NMAX>() + 1024; }  // + alignment slack
// A block fills the ring with as many stages as fit at its own width (its group's rows): 4 at 64,
// 7 at 16, so narrow groups keep more weight bytes in flight. A stage is refilled two chunks after
// its wgmma were issued (each warpgroup leaves a chunk's wgmma running while it dequantises the
// next one), so the copies run stages - 2 chunks ahead.
template <int N, int NMAX>
constexpr int stages() { return ring_bytes<NMAX>() / stage_bytes<N>() < 10 ? ring_bytes<NMAX>() / stage_bytes<N>() : 10; }

// Row r, 16-byte segment seg (0..15) of a stage's rows: panel seg / 8 (N rows of 128 B each),
// chunk seg % 8 XOR (r & 7): the 128-byte swizzle wgmma_desc_sw128 describes.
template <int N>
__device__ __forceinline__ uint32_t x_off(int row, int seg) {
  return uint32_t((seg >> 3) * N * 128 + row * 128 + (((seg & 7) ^ (row & 7)) << 4));
}

// The A fragments of scale group j of a chunk, from this lane's words wv[nt][j] (nt 0: row g, 1:
// row g + 8) and their lookup tables: a[0] for the group's first k16 wgmma, a[1] for its second.
__device__ __forceinline__ void a_frags(uint32_t w0, uint32_t w1, uint32_t l00, uint32_t l01, uint32_t l10,
                                        uint32_t l11, uint32_t (&a)[2][4]) {
  uint32_t p0[4], p1[4];
  e2m1_dev_pairs(w0, l00, l01, p0);
  e2m1_dev_pairs(w1, l10, l11, p1);
  a[0][0] = p0[0], a[0][1] = p1[0], a[0][2] = p0[1], a[0][3] = p1[1];
  a[1][0] = p0[2], a[1][1] = p1[2], a[1][2] = p0[3], a[1][3] = p1[3];
}

// This lane's weights and scales of a stage: words wv[nt][j] (nt 0: row g, 1: row g + 8; scale
// group j), scale bytes sg[nt].
struct WFrag {
  uint32_t wv[2][4], sg[2];
};
template <int N>
__device__ __forceinline__ WFrag load_w(uint32_t st, int warp, int lane) {
  const int g = lane >> 2;
  const uint32_t wbase = st + N * 256 + warp * 16 * 64, sbase = st + N * 256 + kStageW + warp * 16 * 4;
  WFrag f;
  ldsm_x4(f.wv[0], wbase + w64_off(lane & 7, lane >> 3));
  ldsm_x4(f.wv[1], wbase + 8 * 64 + w64_off(lane & 7, lane >> 3));
  f.sg[0] = lds_u32(sbase + g * 4), f.sg[1] = lds_u32(sbase + (g + 8) * 4);
  return f;
}

// Descriptor of scale group j's k16 slice h of a stage's rows, from the stage's descriptor (the
// address field counts 16-byte units and never carries: shared addresses are < 2^18).
template <int N>
__device__ __forceinline__ uint64_t slice_desc(uint64_t d0, int j, int h) {
  return d0 + uint64_t(((j >> 1) * N * 128 + (j & 1) * 64 + h * 32) >> 4);
}

// A folded chunk: dequantise into a (the chunk's 4 scale groups x 2 k16 slices), then issue its 8
// wgmma and commit them as one group (not waited for here).
template <int N>
__device__ __forceinline__ void chunk_folded(float (&acc)[N / 2], const WFrag& w, uint64_t d0, uint32_t (&a)[4][2][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t l00, l01, l10, l11;
    mxfp4_lut<kMxfp4Bias>(__byte_perm(w.sg[0], 0u, 0x4440u + j), l00, l01);
    mxfp4_lut<kMxfp4Bias>(__byte_perm(w.sg[1], 0u, 0x4440u + j), l10, l11);
    a_frags(w.wv[0][j], w.wv[1][j], l00, l01, l10, l11, a[j]);
  }
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    wgmma_f16_rs<N>(acc, a[j][0], slice_desc<N>(d0, j, 0), 1);
    wgmma_f16_rs<N>(acc, a[j][1], slice_desc<N>(d0, j, 1), 1);
  }
  wgmma_commit();
}

// A chunk with any scales: everything in flight is waited for, then per scale group and 16
// columns of B two wgmma into a fresh fragment, added times the rows' scales (narrow slices keep
// this rare path's registers low).
template <int N>
__device__ __forceinline__ void chunk_exact(float (&acc)[N / 2], const WFrag& w, uint64_t d0) {
  wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t a[2][4];
    a_frags(w.wv[0][j], w.wv[1][j], kE2m1Lut0, kE2m1Lut1, kE2m1Lut0, kE2m1Lut1, a);
    const float s0 = e8m0_to_float((w.sg[0] >> (8 * j)) & 0xffu) * float(1 << kMxfp4Bias);
    const float s1 = e8m0_to_float((w.sg[1] >> (8 * j)) & 0xffu) * float(1 << kMxfp4Bias);
#pragma unroll
    for (int q = 0; q < N / 16; ++q) {
      float f[8];
      wgmma_fence();
      wgmma_f16_rs<16>(f, a[0], slice_desc<N>(d0, j, 0) + q * (2048 >> 4), 0);  // B rows 16q..16q+15
      wgmma_f16_rs<16>(f, a[1], slice_desc<N>(d0, j, 1) + q * (2048 >> 4), 1);
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float* o = acc + 8 * q + 4 * i;
        o[0] = fmaf(f[4 * i + 0], s0, o[0]);
        o[1] = fmaf(f[4 * i + 1], s0, o[1]);
        o[2] = fmaf(f[4 * i + 2], s1, o[2]);
        o[3] = fmaf(f[4 * i + 3], s1, o[3]);
      }
    }
  }
}

struct Job {
  ExpertWeightJob wj;  // weights and scales
  const __half* xsrc;  // the group's row tid / 16, segment tid % 16
  int m, K;
};

template <int N, int S>
__device__ __forceinline__ void issue(const Job& jb, uint32_t s_base, int c, int nchunk, int tid) {
  if (c < nchunk) {
    const uint32_t st = s_base + (c % S) * stage_bytes<N>();
    const uint32_t ws = st + N * 256;
#pragma unroll
    for (int q = 0; q < 2; ++q)
      cp_async16(ws + w64_off((tid >> 2) + 64 * q, tid & 3), jb.wj.weights(q, c));
    if (tid < kRows) cp_async4(ws + kStageW + tid * 4, jb.wj.scales(c));
    const int xr = tid >> 4, xseg = tid & 15;
#pragma unroll
    for (int q = 0; q < N / 16; ++q)
      if (xr + 16 * q < jb.m)
        cp_async16(st + x_off<N>(xr + 16 * q, xseg), jb.xsrc + int64_t(16 * q) * jb.K + c * 128);
  }
  cp_commit();
}

// The whole K loop and the epilogue at width N (>= the group's rows).
template <int N, int NMAX, bool kSwiglu, bool kExact>
__device__ __forceinline__ void run(const Job& jb, const Mxfp4Group& gd, uint32_t s_base, int Nout, float limit,
                                    __half* __restrict__ a16) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int nchunk = jb.K / 128;
  constexpr int S = stages<N, NMAX>();
  static_assert(S >= 4, "the ring holds at least 4 stages");
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
#pragma unroll
  for (int i = 0; i < S - 2; ++i) issue<N, S>(jb, s_base, i, nchunk, tid);
  // One step per chunk; a: the A registers of this chunk, prev: the previous chunk's (two sets,
  // alternating: the previous chunk's wgmma may still read theirs; they stay pinned until retired).
  auto step = [&](int c, uint32_t (&a)[4][2][4], uint32_t (&prev)[4][2][4]) {
    cp_wait<S - 3>();
    fence_proxy_async_shared();  // this thread's copies of stage c, visible to wgmma
    const uint32_t st = s_base + (c % S) * stage_bytes<N>();
    // One barrier: stage c is in for every thread, every warpgroup has finished chunk c - 2's
    // wgmma (so its stage may be refilled), and (kExact) the block decides from the chunk's scales
    // alone whether it folds them.
    bool fold = true;
    if constexpr (kExact) {
      fold = __syncthreads_and(tid >= kRows || mxfp4_foldable(lds_u32(st + N * 256 + kStageW + tid * 4)));
    } else {
      __syncthreads();
    }
    issue<N, S>(jb, s_base, c + S - 2, nchunk, tid);
    const WFrag w = load_w<N>(st, warp, lane);
    const uint64_t d0 = wgmma_desc_sw128(st);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) wgmma_fence_operand(acc[i]);
    if (fold) {
      chunk_folded<N>(acc, w, d0, a);
#pragma unroll
      for (int i = 0; i < N / 2; ++i) wgmma_fence_operand(acc[i]);
      wgmma_wait<1>();  // chunk c - 1 done; chunk c runs on
    } else if constexpr (kExact) {
      chunk_exact<N>(acc, w, d0);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 4; ++i) wgmma_fence_operand(prev[j][h][i]);
  };
  uint32_t a0[4][2][4] = {}, a1[4][2][4] = {};
  for (int c = 0; c < nchunk; c += 2) {  // nchunk is even (K % 256 == 0)
    step(c, a0, a1);
    step(c + 1, a1, a0);
  }
  wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < 4; ++i) wgmma_fence_operand(a1[j][h][i]), wgmma_fence_operand(a0[j][h][i]);
#pragma unroll
  for (int i = 0; i < N / 2; ++i) wgmma_fence_operand(acc[i]);
  cp_wait<0>();

  const int m = gd.m;
  if (kSwiglu) {
    const int f = blockIdx.x * 64 + warp * 8 + g;  // output column: gate in rows g, up in rows g + 8
    const int p = f >> 1;
    const int col = 2 * ((p & ~15) + mxfp4_f16_pair_pos(p & 15)) + (f & 1);
#pragma unroll
    for (int i = 0; i < N / 8; ++i) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = 8 * i + 2 * t + e;
        if (r < m) {
          const float v = swiglu_clamped(acc[4 * i + e] * kMxfp4Unbias, acc[4 * i + 2 + e] * kMxfp4Unbias, limit);
          a16[int64_t(gd.row0 + r) * Nout + col] = __float2half_rn(v);
        }
      }
    }
  } else {
    const int f0 = blockIdx.x * kRows + warp * 16 + g;
#pragma unroll
    for (int i = 0; i < N / 8; ++i) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = 8 * i + 2 * t + e;
        if (r < m) {
          gd.y[int64_t(r) * Nout + f0] = acc[4 * i + e] * kMxfp4Unbias;
          gd.y[int64_t(r) * Nout + f0 + 8] = acc[4 * i + 2 + e] * kMxfp4Unbias;
        }
      }
    }
  }
}

// kSwiglu: g is g13 (pairs w1, w3), Nout = I, out a16; else g is g2, Nout = d, out the fp32 y.
// kExact: any scales (the unfolded path compiled in); else every scale byte must be foldable.
template <int NMAX, bool kSwiglu, bool kExact>
__global__ void __launch_bounds__(256, NMAX <= 64 ? 2 : 1)
    mxfp4_wgmma_kernel(const Mxfp4Group* __restrict__ groups, const __half* __restrict__ x16, int Nout, int K,
                       float limit, __half* __restrict__ a16, bool tiled) {
  detail::pdl_entry();
  extern __shared__ unsigned char smem_raw[];
  const Mxfp4Group gd = groups[kSwiglu ? 2 * blockIdx.y : blockIdx.y];
  const int m = gd.m;
  if (m <= 0) return;
  const int tid = threadIdx.x;
  Job jb;
  jb.m = m, jb.K = K;
  jb.wj = expert_weight_job<kSwiglu>(groups, gd, K, tiled, tid);
  jb.xsrc = x16 + (int64_t(gd.row0) + (tid >> 4)) * K + (tid & 15) * 8;
  const uint32_t s_base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  if (m <= 16) return run<16, NMAX, kSwiglu, kExact>(jb, gd, s_base, Nout, limit, a16);
  if (m <= 32) return run<32, NMAX, kSwiglu, kExact>(jb, gd, s_base, Nout, limit, a16);
  if (m <= 48) return run<48, NMAX, kSwiglu, kExact>(jb, gd, s_base, Nout, limit, a16);
  if (NMAX <= 64 || m <= 64) return run<64, NMAX, kSwiglu, kExact>(jb, gd, s_base, Nout, limit, a16);
  if (m <= 96) return run<(NMAX > 64 ? 96 : 64), NMAX, kSwiglu, kExact>(jb, gd, s_base, Nout, limit, a16);
  return run<NMAX, NMAX, kSwiglu, kExact>(jb, gd, s_base, Nout, limit, a16);
}

template <int NMAX, bool kSwiglu, bool kExact>
bool launch1(const Mxfp4Group* groups, int n_groups, const uint16_t* x16, int Nout, int K, float limit, uint16_t* a16,
             bool tiled, cudaStream_t s) {
  static std::atomic<uint64_t> smem_set{0};  // per instantiation: one bit per device
  if (!max_dynamic_smem_once(reinterpret_cast<const void*>(mxfp4_wgmma_kernel<NMAX, kSwiglu, kExact>), smem_bytes<NMAX>(),
                             smem_set, "mxfp4 wgmma experts: shared-memory size"))
    return false;
  const dim3 grid(static_cast<unsigned>(kSwiglu ? Nout / 64 : Nout / kRows), static_cast<unsigned>(n_groups));
  detail::launch_pdl(mxfp4_wgmma_kernel<NMAX, kSwiglu, kExact>, grid, 256, smem_bytes<NMAX>(), s, groups, reinterpret_cast<const __half*>(x16), Nout, K, limit, reinterpret_cast<__half*>(a16), tiled);
  return check_launch("mxfp4_wgmma_kernel");
}

template <bool kSwiglu>
bool launch(bool foldable, int max_m, const Mxfp4Group* groups, int n_groups, const uint16_t* x16, int Nout, int K,
            float limit, uint16_t* a16, bool tiled, cudaStream_t s) {
  if (max_m <= 64)
    return foldable ? launch1<64, kSwiglu, false>(groups, n_groups, x16, Nout, K, limit, a16, tiled, s)
                    : launch1<64, kSwiglu, true>(groups, n_groups, x16, Nout, K, limit, a16, tiled, s);
  return foldable ? launch1<128, kSwiglu, false>(groups, n_groups, x16, Nout, K, limit, a16, tiled, s)
                  : launch1<128, kSwiglu, true>(groups, n_groups, x16, Nout, K, limit, a16, tiled, s);
}

}  // namespace

bool mxfp4_experts_w13_swiglu_wgmma(const Mxfp4Group* g13, int n_groups, int max_m, const uint16_t* x16, int64_t I,
                                    int64_t K, float limit, uint16_t* a16, Mxfp4Scales scales,
                                    Mxfp4Layout layout, void* stream) {
  if (!check_wide_launch("mxfp4_experts_w13_swiglu_wgmma", n_groups, max_m, 128, I, 64, K, 256)) return false;
  if (n_groups <= 0 || max_m <= 0) return true;
  return launch<true>(scales == Mxfp4Scales::foldable, max_m, g13, n_groups, x16, static_cast<int>(I),
                      static_cast<int>(K), limit, a16, layout == Mxfp4Layout::tiles64, as_stream(stream));
}

bool mxfp4_experts_w2_wgmma(const Mxfp4Group* g2, int n_groups, int max_m, const uint16_t* a16, int64_t N, int64_t K,
                            Mxfp4Scales scales, Mxfp4Layout layout, void* stream) {
  if (!check_wide_launch("mxfp4_experts_w2_wgmma", n_groups, max_m, 128, N, kRows, K, 256)) return false;
  if (n_groups <= 0 || max_m <= 0) return true;
  return launch<false>(scales == Mxfp4Scales::foldable, max_m, g2, n_groups, a16, static_cast<int>(N),
                       static_cast<int>(K), 0.f, nullptr, layout == Mxfp4Layout::tiles64, as_stream(stream));
}

namespace {
__global__ void scales_in_range_kernel(const uint8_t* __restrict__ scale, int64_t n, uint32_t lo, uint32_t hi,
                                       int32_t* __restrict__ foldable) {
  bool ok = true;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += stride)
    ok &= scale[i] >= lo && scale[i] <= hi;
  if (!__syncthreads_and(ok) && threadIdx.x == 0) *foldable = 0;
}

bool scales_in_range(const char* what, const uint8_t* scale, int64_t n, uint32_t lo, uint32_t hi, int32_t* foldable,
                     void* stream) {
  if (n <= 0) return true;
  if (!scale || !foldable) return fail(std::string(what) + ": null argument");
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 1024);
  scales_in_range_kernel<<<static_cast<unsigned>(blocks), 256, 0, as_stream(stream)>>>(scale, n, lo, hi, foldable);
  return check_launch("scales_in_range_kernel");
}
}  // namespace

bool mxfp4_scales_foldable(const uint8_t* scale, int64_t n, int32_t* foldable, void* stream) {
  return scales_in_range("mxfp4_scales_foldable", scale, n, kMxfp4FoldMin, kMxfp4FoldMax, foldable, stream);
}

bool mxfp4_scales_fp8_foldable(const uint8_t* scale, int64_t n, int32_t* foldable, void* stream) {
  return scales_in_range("mxfp4_scales_fp8_foldable", scale, n, kMxfp4Fp8FoldMin, kMxfp4Fp8FoldMax, foldable, stream);
}

}  // namespace deepinfer::cuda
