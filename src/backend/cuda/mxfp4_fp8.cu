// MXFP4 routed experts on FP8 warpgroup MMA (cuda_ops.h, "fp8" variants of the wgmma expert
// kernels), as the official reference computes them: activations quantised to e4m3 per 128 along K
// with power-of-two scales (quantize_act_fp8's rule), e2m1 weights times their E8M0 scale per 32.
//
// Why: at decode widths the f16 wgmma kernels (mxfp4_wgmma.cu) are issue-bound (ncu, E32 x 12
// rows: issued IPC 2.2, 52% SM throughput at 38% of DRAM): turning a word of 8 codes into 4 half2
// takes 11 instructions plus a table per word. Here a word becomes 2 registers of 4 e4m3 in 7 (the
// table's bytes are the e4m3 encodings, no interleave), a table serves 4 words, and one k32 wgmma
// does the work of two k16.
//
// Block: 128 weight rows of one group (two warpgroups x 64; warp w owns rows 16w..16w+15) and all
// of its <= 64 rows (two blocks per SM; the MMA's width is the group's rows rounded up to 16, 32,
// 48 or 64: the EP step's groups of ~48 rows had paid a quarter of their MMA and promotion for
// nothing at 64), or <= 128 (prefill's 128-row groups: one block per SM, a ring twice the bytes,
// wgmma n128 so that each dequantised weight meets twice the rows), K in 128-wide chunks through a
// cp.async ring of fixed bytes (as deep as the width allows). Per stage: the group's e4m3 rows
// (N x 128 B, 128-byte swizzle: the wgmma B operand), 128 x 64 B of packed e2m1 (row r at 64 r),
// 128 x 4 scale bytes and the N rows' x scales.
// Thread (g, t) of warp w takes scale group t of its rows g and g + 8 (one 16-byte load each: the
// group's 4 words) and folds that group's scale into the table (2^(s - 127 + 8), exact while the
// scale byte lies in [114, 125]; mxfp4_scales_fp8_foldable tells per weight). Word q of the group
// becomes the A registers of the chunk's k32 slice q: codes 0-3 at the fragment's k 4t..4t+3,
// codes 4-7 at 16 + 4t... So logical k (slice q, position L) of the MMA is physical column
// 32t + 8q + 4 (L / 16) + L % 4 of the chunk, with t = (L % 16) / 4; the activation rows are stored
// in that order (moe_rows_fp8 writes them so): a column of B always meets its own weight.
// Per chunk the 4 wgmma go into a fresh accumulator, added times the columns' x scales (the
// reference's per-128 promotion); the epilogue multiplies by 2^-8.
// w13 variant: warp w's rows g are w1 rows c0 + 8w + g, rows g + 8 the w3 rows of the same
// outputs (c0 = 64 * block); the clamped SwiGLU is the epilogue (fp32 rows, quantised by
// moe_rows_fp8 for w2).
#include <cuda_fp8.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_quant.cuh"
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
constexpr int kRows = kWarps * 16;  // 128 weight rows per block
constexpr int kStageW = kRows * 64;  // 8 KB of packed weights per stage
constexpr int kStageS = 1024;        // 512 B of weight scales + up to 64 x scales: stages stay 1024-aligned
constexpr int kMaxM = 128;
template <int N>
constexpr int stage_bytes() { return N * 128 + kStageW + kStageS; }
// The ring of a kernel for groups of up to kMaxN rows: 6 stages of 64 rows (two blocks per SM),
// or 8 of 128 (one block per SM).
template <int kMaxN>
constexpr int ring_bytes() { return kMaxN == 64 ? 6 * stage_bytes<64>() : 8 * stage_bytes<128>(); }
template <int kMaxN>
constexpr int smem_bytes() { return ring_bytes<kMaxN>() + 1024; }  // + alignment slack
// As many stages as fit at the block's width (6 at 64 rows, 9 at 16 in the 64-row ring); a stage
// is refilled once the chunk that used it two steps earlier has retired, so the copies run
// stages - 2 ahead.
template <int N, int kRing>
constexpr int stages() { return kRing / stage_bytes<N>() < 10 ? kRing / stage_bytes<N>() : 10; }

// |e2m1| = 0, .5, 1, 1.5, 2, 3, 4, 6 as e4m3 bytes (entries 0..3, 4..7).
constexpr uint32_t kE4m3Lut0 = 0x3C383000u, kE4m3Lut1 = 0x4C484440u;
// The table of |e2m1| * 2^(s - 127 + kMxfp4Bias): 8 per unit of exponent, entry 0 stays zero.
__device__ __forceinline__ void e4m3_lut(uint32_t s, uint32_t& l0, uint32_t& l1) {
  constexpr uint32_t k = 8u * uint32_t(127 - kMxfp4Bias);
  l0 = s * 0x08080800u + (kE4m3Lut0 - k * 0x01010100u);
  l1 = s * 0x08080808u + (kE4m3Lut1 - k * 0x01010101u);
}
// A device-layout word of 8 codes as two registers of 4 e4m3: codes 0-3 (lo), 4-7 (hi).
__device__ __forceinline__ void e2m1_dev_e4m3(uint32_t w, uint32_t l0, uint32_t l1, uint32_t& lo, uint32_t& hi) {
  const uint32_t mag = w & 0x77777777u;
  lo = __byte_perm(l0, l1, mag) | (w & 0x80808080u);
  hi = __byte_perm(l0, l1, mag >> 16) | ((w << 4) & 0x80808080u);
}

// Row r, 16-byte segment seg (0..7) of a stage's e4m3 rows (128 B each): the 128-byte swizzle.
__device__ __forceinline__ uint32_t x_off(int row, int seg) { return uint32_t(row * 128 + ((seg ^ (row & 7)) << 4)); }

// A launch's arguments. kSwiglu: groups is g13 (pairs w1, w3), Nout = I, out a32; else g2, Nout =
// d, out each group's fp32 y. Rows: x8 / xs with rows_total rows, each group row's x row by
// row_token (null: row0 + r).
struct Args {
  const Mxfp4Group* groups;
  const uint8_t* x8;
  const float* xs;
  int64_t rows_total;
  const int32_t* row_token;
  int Nout, K;
  float limit;
  float* a32;
  bool tiled;
};

struct Job {
  ExpertWeightJob wj;  // weights and scales (at the block's first chunk)
  const uint8_t* x8;   // e4m3 row 0, segment tid % 8, at the block's first chunk
  const float* xs;     // row 0's x scale at the block's first chunk (chunk-major: + c * rows_total)
  const int32_t* row_token;  // group row r's x row: row_token[row0 + r] (null: row0 + r)
  int64_t rows_total;
  int row0, m, K;
  int chunks;  // the block's K chunks: all K / 128, or its 1 / kSplit of them (split K)
  /// The x row of the group's row r.
  __device__ __forceinline__ int64_t x_row(int r) const { return row_token ? row_token[row0 + r] : row0 + r; }
};

// A thread's cp.async jobs, one stage a call: its sources and the ring's stage advance by a chunk
// after each, so the K loop does no index arithmetic (Nsight, EP shape: the copies had taken 62 of
// the 262 instructions a warp issued per chunk, recomputing 64-bit addresses from the chunk index
// and the stage from c % S). Jobs: the weight rows tid / 4 and tid / 4 + 64 (segment tid % 4),
// scale row tid (< 128), x scale tid (< m), the group's x rows tid / 8 + 32 q (segment tid % 8).
template <int N>
struct Copier {
  static constexpr int kXq = (N + 31) / 32;
  const uint8_t* w;   // the first weight row's segment at the next chunk (the second: + wstride)
  const uint8_t* s;   // the scale row
  const float* xs;    // the x scale of row tid
  const uint8_t* x[kXq];  // x row tid / 8 + 32 q, segment tid % 8
  int64_t wstride, xs_step;
  int wcs, scs;
  uint32_t st, ring0, ring_end;  // the next chunk's stage; the ring
  uint32_t o_x;                  // x row tid / 8's segment in a stage (row + 32 q: + 4096 q)
  int left;                      // chunks not yet issued
  bool p_s, p_xs, p_x[kXq];

  __device__ __forceinline__ void issue(int tid) {
    if (left > 0) {
      const uint32_t ws = st + N * 128, o_w = (tid >> 2) * 64 + (tid & 3) * 16;
      cp_async16(ws + o_w, w);
      cp_async16(ws + o_w + 64 * 64, w + wstride);
      if (p_s) cp_async4(ws + kStageW + tid * 4, s);
      if (p_xs) cp_async4(ws + kStageW + 512 + tid * 4, xs);
#pragma unroll
      for (int q = 0; q < kXq; ++q)
        if (p_x[q]) cp_async16(st + o_x + 4096 * q, x[q]);
      w += wcs, s += scs, xs += xs_step;
#pragma unroll
      for (int q = 0; q < kXq; ++q) x[q] += 128;
      st = next(st);
      --left;
    }
    cp_commit();
  }
  /// The ring's stage after `stage`.
  __device__ __forceinline__ uint32_t next(uint32_t stage) const {
    return stage + stage_bytes<N>() == ring_end ? ring0 : stage + stage_bytes<N>();
  }
};

template <int N>
__device__ __forceinline__ Copier<N> make_copier(const Job& jb, uint32_t s_base, int stages, int tid) {
  Copier<N> cp;
  cp.w = jb.wj.w, cp.wstride = jb.wj.wstride, cp.wcs = jb.wj.wcs;
  cp.s = jb.wj.s, cp.scs = jb.wj.scs;
  cp.xs_step = jb.rows_total;
  cp.st = cp.ring0 = s_base, cp.ring_end = s_base + stages * stage_bytes<N>();
  cp.o_x = x_off(tid >> 3, tid & 7);
  cp.left = jb.chunks;
  cp.p_s = tid < kRows, cp.p_xs = tid < N && tid < jb.m;
  cp.xs = jb.xs + (cp.p_xs ? jb.x_row(tid) : 0);
#pragma unroll
  for (int q = 0; q < Copier<N>::kXq; ++q) {
    const int r = (tid >> 3) + 32 * q;
    cp.p_x[q] = r < N && r < jb.m;
    cp.x[q] = jb.x8 + (cp.p_x[q] ? jb.x_row(r) : 0) * jb.K;
  }
  return cp;
}

// The K loop and the epilogue at width N (>= the group's rows) in a ring of kRing bytes.
template <int N, bool kSwiglu, int kRing, int kSplit = 1>
__device__ __forceinline__ void run(const Job& jb, const Mxfp4Group& gd, uint32_t s_base, const Args& args) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int nchunk = jb.chunks;
  constexpr int S = stages<N, kRing>();
  static_assert(S >= 4, "the ring holds at least 4 stages");
  float acc[N / 2], tmp[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.f, tmp[i] = 0.f;
  Copier<N> cp = make_copier<N>(jb, s_base, S, tid);
#pragma unroll
  for (int i = 0; i < S - 2; ++i) cp.issue(tid);
  // prepare: chunk c's stage in for every thread, and every warp past chunk c - 1's wgmma (waited
  // for at the end of its step), so the stage chunk c - 1 used may be refilled (chunk c + S - 2):
  // then chunk c's A registers. Called for c = 0, 1, ... in order; st_prep is chunk c's stage.
  uint32_t st_prep = s_base;
  auto prepare = [&](uint32_t (&a)[4][4]) {
    cp_wait<S - 3>();
    fence_proxy_async_shared();  // this thread's copies of stage c, visible to wgmma
    __syncthreads();
    cp.issue(tid);
    const uint32_t ws = st_prep + N * 128;
    st_prep = cp.next(st_prep);
    const uint4 w0 = lds_u4(ws + (warp * 16 + g) * 64 + t * 16), w1 = lds_u4(ws + (warp * 16 + g + 8) * 64 + t * 16);
    uint32_t l00, l01, l10, l11;
    e4m3_lut(__byte_perm(lds_u32(ws + kStageW + (warp * 16 + g) * 4), 0u, 0x4440u + t), l00, l01);
    e4m3_lut(__byte_perm(lds_u32(ws + kStageW + (warp * 16 + g + 8) * 4), 0u, 0x4440u + t), l10, l11);
    const uint32_t r0[4] = {w0.x, w0.y, w0.z, w0.w}, r1[4] = {w1.x, w1.y, w1.z, w1.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      e2m1_dev_e4m3(r0[q], l00, l01, a[q][0], a[q][2]);
      e2m1_dev_e4m3(r1[q], l10, l11, a[q][1], a[q][3]);
    }
  };
  // One step: chunk c's 4 wgmma (A in a) into a fresh fragment; chunk c + 1's A registers (next)
  // while they run; then the fragment added times the columns' x scales.
  uint32_t st_step = s_base;  // chunk c's stage
  auto step = [&](int c, uint32_t (&a)[4][4], uint32_t (&next)[4][4]) {
    const uint32_t st = st_step;
    st_step = cp.next(st_step);
    const uint64_t d0 = wgmma_desc_sw128(st);
    wgmma_fence();
#pragma unroll
    for (int q = 0; q < 4; ++q) wgmma_e4m3_rs<N>(tmp, a[q], d0 + uint64_t(q * 2), q > 0);
    wgmma_commit();
    if (c + 1 < nchunk) prepare(next);
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < N / 2; ++i) wgmma_fence_operand(tmp[i]);
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i) wgmma_fence_operand(a[q][i]);
    const uint32_t xs = st + N * 128 + kStageW + 512;
#pragma unroll
    for (int i = 0; i < N / 8; ++i) {
      const uint2 sc = lds_u2(xs + (8 * i + 2 * t) * 4);
      const float s0 = __uint_as_float(sc.x), s1 = __uint_as_float(sc.y);
      acc[4 * i + 0] = fmaf(tmp[4 * i + 0], s0, acc[4 * i + 0]);
      acc[4 * i + 1] = fmaf(tmp[4 * i + 1], s1, acc[4 * i + 1]);
      acc[4 * i + 2] = fmaf(tmp[4 * i + 2], s0, acc[4 * i + 2]);
      acc[4 * i + 3] = fmaf(tmp[4 * i + 3], s1, acc[4 * i + 3]);
    }
  };
  uint32_t a0[4][4], a1[4][4];
  prepare(a0);
  for (int c = 0; c < nchunk; c += 2) {  // two steps per turn: the A sets alternate
    step(c, a0, a1);
    if (c + 1 < nchunk) step(c + 1, a1, a0);
  }
  cp_wait<0>();
  if constexpr (kSplit > 1) {
    // Split K over the cluster (blockIdx.z = rank, chunks [rank, rank + 1) * nchunk): ranks 1..S-1
    // push their partial sums, thread by thread (acc's N / 2 floats as float4s), into rank 0's ring,
    // free once every block is past its loop; rank 0 adds them in rank order, then the epilogue.
    static_assert(N % 8 == 0 && (kSplit - 1) * 256 * (N / 2) * 4 <= kRing, "the partials fit the ring");
    cluster_sync();  // every block of the cluster is done with its ring
    const uint32_t rank = cluster_rank();
    if (rank != 0) {
      const uint32_t dst = dsmem_addr(s_base + ((rank - 1) * 256 + tid) * (N / 2) * 4, 0);
#pragma unroll
      for (int i = 0; i < N / 2; i += 4) st_dsmem_f32x4(dst + i * 4, acc[i], acc[i + 1], acc[i + 2], acc[i + 3]);
    }
    cluster_sync();  // every partial in rank 0's ring
    if (rank != 0) return;
#pragma unroll 1
    for (int q = 1; q < kSplit; ++q) {
      const uint32_t src = s_base + ((q - 1) * 256 + tid) * (N / 2) * 4;
#pragma unroll
      for (int i = 0; i < N / 2; i += 4) {
        const uint4 v = lds_u4(src + i * 4);
        acc[i] += __uint_as_float(v.x), acc[i + 1] += __uint_as_float(v.y);
        acc[i + 2] += __uint_as_float(v.z), acc[i + 3] += __uint_as_float(v.w);
      }
    }
  }

  const int m = gd.m, Nout = args.Nout;
  float* const a32 = args.a32;
  if (kSwiglu) {
    const int f = blockIdx.x * 64 + warp * 8 + g;  // output column: gate in rows g, up in rows g + 8
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = 8 * i + 2 * t + e;
        if (r < m)
          a32[int64_t(gd.row0 + r) * Nout + f] =
              swiglu_clamped(acc[4 * i + e] * kMxfp4Unbias, acc[4 * i + 2 + e] * kMxfp4Unbias, args.limit);
      }
  } else {
    const int f0 = blockIdx.x * kRows + warp * 16 + g;
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
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

// The block's job: group gd's weights, x rows and x scales from chunk `part` * K / 128 / `parts` on,
// K / 128 / parts chunks.
template <bool kSwiglu>
__device__ __forceinline__ Job make_job(const Args& a, const Mxfp4Group& gd, int parts, int part) {
  const int tid = threadIdx.x;
  Job jb;
  jb.row0 = gd.row0, jb.m = gd.m, jb.K = a.K, jb.rows_total = a.rows_total, jb.row_token = a.row_token;
  jb.chunks = a.K / 128 / parts;
  const int c0 = part * jb.chunks;
  jb.wj = expert_weight_job<kSwiglu>(a.groups, gd, a.K, a.tiled, tid);
  jb.wj.w += int64_t(c0) * jb.wj.wcs, jb.wj.s += int64_t(c0) * jb.wj.scs;
  jb.x8 = a.x8 + (tid & 7) * 16 + c0 * 128;
  jb.xs = a.xs + int64_t(c0) * a.rows_total;
  return jb;
}

// Decode widths (groups of <= 16 rows) with few groups: K split over clusters of kSplit blocks
// (blockIdx.z = the rank, cluster (1, 1, kSplit)), each running 1 / kSplit of the chunks, in a ring
// of 6 stages at width 16 (three blocks an SM). At batch 1 the 6 experts' w13 are 192 blocks of 32
// chunks each: one partial wave whose blocks each run a serial chain of 32 chunks (29 us for 50 MB,
// ~1.7 TB/s, H100 ncu); split 2, 384 blocks of 16 chunks. The partial sums are added in rank order
// (run<>): deterministic, not the unsplit kernel's bits (default mode only, as every wide kernel).
constexpr int kSplitRing = 6 * stage_bytes<16>();
template <bool kSwiglu, int kSplit>
__global__ void __launch_bounds__(256, 3)
    mxfp4_fp8_split_kernel(const __grid_constant__ Args a) {
  detail::pdl_entry();
  extern __shared__ unsigned char smem_raw[];
  const Mxfp4Group gd = a.groups[kSwiglu ? 2 * blockIdx.y : blockIdx.y];
  if (gd.m <= 0) return;  // the whole cluster (one group) leaves together
  const Job jb = make_job<kSwiglu>(a, gd, kSplit, int(blockIdx.z));
  const uint32_t s_base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  run<16, kSwiglu, kSplitRing, kSplit>(jb, gd, s_base, a);
}

// kMaxN: the launch's group rows (64 or 128).
template <int kMaxN, bool kSwiglu>
__global__ void __launch_bounds__(256, kMaxN == 64 ? 2 : 1) mxfp4_fp8_kernel(const __grid_constant__ Args a) {
  detail::pdl_entry();
  extern __shared__ unsigned char smem_raw[];
  const Mxfp4Group gd = a.groups[kSwiglu ? 2 * blockIdx.y : blockIdx.y];
  const int m = gd.m;
  if (m <= 0) return;
  const Job jb = make_job<kSwiglu>(a, gd, 1, 0);
  const uint32_t s_base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  constexpr int kRing = ring_bytes<kMaxN>();
  if constexpr (kMaxN == 64) {
    if (m <= 16) return run<16, kSwiglu, kRing>(jb, gd, s_base, a);
    if (m <= 32) return run<32, kSwiglu, kRing>(jb, gd, s_base, a);
    if (m <= 48) return run<48, kSwiglu, kRing>(jb, gd, s_base, a);
    return run<64, kSwiglu, kRing>(jb, gd, s_base, a);
  } else {  // a 128-row launch: its groups' tails (<= 64 rows) at width 64
    if (m <= 64) return run<64, kSwiglu, kRing>(jb, gd, s_base, a);
    return run<128, kSwiglu, kRing>(jb, gd, s_base, a);
  }
}

template <int kMaxN, bool kSwiglu>
bool launch_at(const Args& a, int n_groups, cudaStream_t s) {
  static std::atomic<uint64_t> smem_set{0};  // per instantiation: one bit per device
  const auto kernel = mxfp4_fp8_kernel<kMaxN, kSwiglu>;
  if (!max_dynamic_smem_once(reinterpret_cast<const void*>(kernel), smem_bytes<kMaxN>(), smem_set,
                             "mxfp4 fp8 experts: shared-memory size"))
    return false;
  const dim3 grid(static_cast<unsigned>(kSwiglu ? a.Nout / 64 : a.Nout / kRows), static_cast<unsigned>(n_groups));
  detail::launch_pdl(kernel, grid, 256, smem_bytes<kMaxN>(), s, a);
  return check_launch("mxfp4_fp8_kernel");
}

// The split kernel's launch: grid (tiles, groups, kSplit), clusters along z.
template <bool kSwiglu, int kSplit>
bool launch_split(const Args& a, int n_groups, cudaStream_t s) {
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel = mxfp4_fp8_split_kernel<kSwiglu, kSplit>;
  constexpr int bytes = kSplitRing + 1024;
  if (!max_dynamic_smem_once(reinterpret_cast<const void*>(kernel), bytes, smem_set, "mxfp4 fp8 experts: shared-memory size"))
    return false;
  const dim3 grid(static_cast<unsigned>(kSwiglu ? a.Nout / 64 : a.Nout / kRows), static_cast<unsigned>(n_groups), kSplit);
  detail::launch_pdl_cluster(kernel, grid, 256, bytes, s, dim3(1, 1, kSplit), a);
  return check_launch("mxfp4_fp8_split_kernel");
}

// K split 2 ways where the groups are of decode width (<= 16 rows), so few that twice their
// blocks still fit the GPU at once (three an SM), and K long enough (>= 32 chunks) that half of it
// outweighs the rank-order sum; K's chunks split evenly. Split 0: by that rule, 1: never, 2:
// always where the shapes allow (tests). Measured at batch 1 (H100 ncu, 6 groups of one row): w13
// (K 4096, 32 chunks) 29.3 -> 26.2 us, w2 (K 2048, 16 chunks) 15.4 -> 16.6 us, hence the length.
bool split_fits(int n_groups, int max_m, int tiles, int K, int split) {
  if (split == 1 || max_m > 16 || (K / 128) % 2 != 0 || K / 128 < 8) return false;
  return split == 2 || (K / 128 >= 32 && int64_t(tiles) * n_groups * 2 <= int64_t(3) * detail::sm_count());
}

template <bool kSwiglu>
bool launch(const Args& a, int n_groups, int max_m, cudaStream_t s, int split) {
  const int tiles = kSwiglu ? a.Nout / 64 : a.Nout / kRows;
  if (split_fits(n_groups, max_m, tiles, a.K, split)) return launch_split<kSwiglu, 2>(a, n_groups, s);
  return max_m > 64 ? launch_at<128, kSwiglu>(a, n_groups, s) : launch_at<64, kSwiglu>(a, n_groups, s);
}

// One warp per (token, U consecutive 128-column blocks), the U loads issued together: lane j
// quantises physical columns 4j..4j+3 of each block (quantize_act_fp8's rule) and stores them, to
// each of the token's k slots, at the block's logical word 8 q + 4 h + t (j = 8 t + 2 q + h); the
// scale goes to xs[block * rows_total + row]. Slot i = t * k + j goes to row slot_pos[i] (null:
// row i). (U = 1, one 16-byte load per warp, took 15 us for the EP step's 1,536 x 4096 rows on
// the H100: latency, not bytes. A warp per slot, as before, loaded and quantised each token row
// k times.)
template <int U>
__global__ void rows_fp8_kernel(const float* __restrict__ src, int64_t T, int k, int64_t K,
                                const int32_t* __restrict__ slot_pos, uint8_t* __restrict__ x8, float* __restrict__ xs,
                                int64_t rows_total) {
  detail::pdl_entry();
  const int64_t nu = K / (128 * U);
  const int64_t unit = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (unit >= T * nu) return;
  const int64_t t = unit / nu, kb0 = unit % nu * U;
  float4 f[U];
#pragma unroll
  for (int u = 0; u < U; ++u) f[u] = *reinterpret_cast<const float4*>(src + t * K + (kb0 + u) * 128 + lane * 4);
  // The slots' rows, kSlots at a time, loaded together (the first batch under the row loads): one
  // round trip, not one per slot before its stores (8 tokens x top-6 had been 3.25 us, 2.97 as a
  // warp per slot).
  constexpr int kSlots = 8;
  int64_t rows[kSlots];
  auto load_rows = [&](int j0) {
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      const int64_t i = t * k + j0 + j;
      rows[j] = j0 + j < k ? (slot_pos ? slot_pos[i] : i) : 0;
    }
  };
  load_rows(0);
  const int word = fp8_expert_word(lane);
  uint32_t packed[U];
  float sc[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const float v[4] = {f[u].x, f[u].y, f[u].z, f[u].w};
    sc[u] = quant4_e4m3_pow2(v, packed[u]);
  }
  for (int j0 = 0; j0 < k; j0 += kSlots) {
    if (j0 > 0) load_rows(j0);
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      if (j0 + j >= k) break;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        *reinterpret_cast<uint32_t*>(x8 + rows[j] * K + (kb0 + u) * 128 + word * 4) = packed[u];
        if (lane == 0) xs[(kb0 + u) * rows_total + rows[j]] = sc[u];
      }
    }
  }
}

// One thread per 16 bytes of weights: (row n, segment j of K / 32) to its tiled place; the thread
// of the chunk's first segment also moves the row's 4 scale bytes of that chunk.
__global__ void tile64_kernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ scale, int64_t N, int64_t K,
                              uint8_t* __restrict__ wt, uint8_t* __restrict__ st) {
  const int64_t rb = K / 2, kg = K / 32, segs = rb / 16;
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= N * segs) return;
  const int64_t n = i / segs, j = i % segs, c = j / 4;
  const int64_t tile = (n >> 6) * 64, r = n & 63;
  *reinterpret_cast<uint4*>(wt + tile * rb + c * 4096 + r * 64 + (j % 4) * 16) =
      *reinterpret_cast<const uint4*>(w + n * rb + j * 16);
  if (j % 4 == 0)
    *reinterpret_cast<uint32_t*>(st + tile * kg + c * 256 + r * 4) = *reinterpret_cast<const uint32_t*>(scale + n * kg + c * 4);
}

}  // namespace

bool mxfp4_tile64(const uint8_t* w, const uint8_t* scale, int64_t N, int64_t K, uint8_t* wt, uint8_t* st, void* stream) {
  if (N % 64 || K % 128) return fail("mxfp4_tile64: need N % 64 == 0 and K % 128 == 0");
  if (N <= 0) return true;
  if (!w || !scale || !wt || !st) return fail("mxfp4_tile64: null argument");
  const int64_t n = N * (K / 32);
  detail::launch_pdl(tile64_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, as_stream(stream), w, scale, N, K, wt,
                     st);
  return check_launch("tile64_kernel");
}

bool moe_rows_fp8(const float* src, int64_t T, int k, int64_t K, const int32_t* slot_pos, uint8_t* x8, float* xs,
                  int64_t rows_total, void* stream) {
  if (K % 128) return fail("moe_rows_fp8: K % 128 != 0");
  if (T * k > rows_total) return fail("moe_rows_fp8: more rows than rows_total");
  if (T <= 0) return true;
  if (K % 512 == 0) {
    const int64_t warps = T * (K / 512);
    detail::launch_pdl(rows_fp8_kernel<4>, static_cast<unsigned>((warps + 7) / 8), 256, 0, as_stream(stream), src, T, k, K,
                       slot_pos, x8, xs, rows_total);
  } else {
    const int64_t warps = T * (K / 128);
    detail::launch_pdl(rows_fp8_kernel<1>, static_cast<unsigned>((warps + 7) / 8), 256, 0, as_stream(stream), src, T, k, K,
                       slot_pos, x8, xs, rows_total);
  }
  return check_launch("rows_fp8_kernel");
}

bool mxfp4_experts_w13_swiglu_fp8(const Mxfp4Group* g13, int n_groups, int max_m, const uint8_t* x8, const float* xs,
                                  int64_t rows_total, int64_t I, int64_t K, float limit, float* a32,
                                  Mxfp4Layout layout, void* stream, int split, const int32_t* row_token) {
  if (!check_wide_launch("mxfp4_experts_w13_swiglu_fp8", n_groups, max_m, kMaxM, I, 64, K, 128)) return false;
  if (split < 0 || split > 2) return fail("mxfp4_experts_w13_swiglu_fp8: split must be 0, 1 or 2");
  if (n_groups <= 0 || max_m <= 0) return true;
  const Args a{g13, x8, xs, rows_total, row_token, static_cast<int>(I), static_cast<int>(K), limit, a32,
               layout == Mxfp4Layout::tiles64};
  return launch<true>(a, n_groups, max_m, as_stream(stream), split);
}

bool mxfp4_experts_w2_fp8(const Mxfp4Group* g2, int n_groups, int max_m, const uint8_t* a8, const float* as,
                          int64_t rows_total, int64_t N, int64_t K, Mxfp4Layout layout, void* stream, int split) {
  if (!check_wide_launch("mxfp4_experts_w2_fp8", n_groups, max_m, kMaxM, N, kRows, K, 128)) return false;
  if (split < 0 || split > 2) return fail("mxfp4_experts_w2_fp8: split must be 0, 1 or 2");
  if (n_groups <= 0 || max_m <= 0) return true;
  const Args a{g2, a8, as, rows_total, nullptr, static_cast<int>(N), static_cast<int>(K), 0.f, nullptr,
               layout == Mxfp4Layout::tiles64};
  return launch<false>(a, n_groups, max_m, as_stream(stream), split);
}

}  // namespace deepinfer::cuda
