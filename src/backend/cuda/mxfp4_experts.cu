// MXFP4 routed experts with many rows per expert (cuda_ops.h, "wide"): prefill chunks and large
// decode batches, where mxfp4_linear_grouped's 16-row groups would re-read each expert's weights.
//
// Block: one group (<= 64 rows, MT m16 tiles) x 256 weight rows; 8 warps, warp w owns weight rows
// 32w..32w+31 as four 8-row n tiles. K is walked in 128-wide chunks through a 3-deep ring filled
// by all 256 threads with cp.async: per stage 256 x 64 B of packed e2m1 (XOR-swizzled for
// ldmatrix, as in mxfp4_linear.cu), 256 x 4 scale bytes and the group's rows as fp16 (256 B per
// row, 16-byte segments XOR (row & 7), so the 8 rows of one ldmatrix phase hit distinct banks).
// Fragments: ldmatrix x4 gives lane (g, t) its device-layout word (codes 8t..8t+7) of weight row g
// in each of the 4 scale groups; e2m1_dev_pairs (mma_common.cuh) makes it the half2 of codes
// (8t, 8t+1), (8t+2, 8t+3) | (8t+4, 8t+5), (8t+6, 8t+7): the B registers of the group's two k16
// mma. The fp16 rows are stored pair-transposed (cuda_ops.h, mxfp4_f16_pair_pos: the pair of
// codes (8t + 2c, 8t + 2c + 1) sits at pair 4c + t of the group), so segment 4j + c holds exactly
// what lane t needs as pair c, and the A registers come straight from ldmatrix x4 (no shuffles).
// Scales: when every scale byte of a chunk's 256 weight rows lies in [106, 132] (one
// __syncthreads_and per chunk, from the weights alone), each folds into the lookup table as
// 2^(s - 127 + 8) (exact fp16 weights, see foldable) and the mma accumulate straight into the
// result; otherwise per 32 along K two mma of the plain e2m1 values go into a fresh fragment,
// added times 2^8 * scale (the narrow kernel's arithmetic). Both carry 2^8 (kMxfp4Bias, so the table
// reaches the small scales real weights have); the epilogue multiplies by 2^-8, exactly. No split
// K: a row's sum is one thread's sequential sum, and which path a chunk takes depends on the
// weights only, so a row's result never depends on the other rows of its group.
// w13 variant: warp w's rows are w1 rows c0..c0+15 and w3 rows c0..c0+15 (c0 = 128 * block + 16 w),
// so gate and up of one output sit in one thread and the clamped SwiGLU is the epilogue (fp16 out).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/mma_common.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;
using detail::max_dynamic_smem_once;
using namespace detail;  // the mma / cp.async building blocks

namespace {

constexpr int kWarps = 8;
constexpr int kNT = 4;                       // 8-row weight tiles per warp
constexpr int kRows = kWarps * kNT * 8;      // 256 weight rows per block
constexpr int kStageW = kRows * 64;          // 16 KB of packed weights per stage
constexpr int kStageS = kRows * 4;           // 1 KB of scales (4 groups of 32 per row)
template <int MT>
constexpr int stages() { return 3; }  // two blocks per SM (2 x 101 KB at MT = 4)
template <int MT>
constexpr int stage_bytes() { return kStageW + kStageS + MT * 16 * 256; }
template <int MT>
constexpr int smem_bytes() { return stages<MT>() * stage_bytes<MT>(); }

// Row r of the stage's fp16 rows (256 B: 16 segments of 8 columns), segment seg: XOR (r & 7), so
// the 8 rows of one ldmatrix phase hit 8 distinct 16-byte bank slots.
__device__ __forceinline__ uint32_t x_off(int row, int seg) { return uint32_t(row * 256 + ((seg ^ (row & 7)) << 4)); }

// The A fragments of m tile mt for scale group j (columns 32j..32j+31, pair-transposed): two
// ldmatrix x4, each the four registers of one k16 mma. Lane l points at row
// mt*16 + (l & 7) + 8 ((l >> 3) & 1), segment 4j + (l >> 4) (+ 2 for the second mma).
struct XFrag {
  uint32_t a[4], b[4];  // first mma, second mma
};
__device__ __forceinline__ XFrag x_frag(uint32_t xs, int mt, int j, int lane) {
  const int row = mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, seg = 4 * j + (lane >> 4);
  XFrag f;
  ldsm_x4(f.a, xs + x_off(row, seg));
  ldsm_x4(f.b, xs + x_off(row, seg + 2));
  return f;
}

// One 128-wide chunk, scales folded into the weights: the mma accumulate straight into acc.
template <int MT>
__device__ __forceinline__ void chunk_folded(float (&acc)[kNT][MT][4], const uint32_t (&wv)[kNT][4],
                                             const uint32_t (&sg)[kNT], uint32_t xs, int m, int lane) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t b[kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      uint32_t l0, l1;
      mxfp4_lut<kMxfp4Bias>(__byte_perm(sg[nt], 0u, 0x4440u + j), l0, l1);  // scale byte j, zero-extended
      e2m1_dev_pairs(wv[nt][j], l0, l1, b[nt]);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (mt * 16 >= m) break;  // block-uniform
      const XFrag x = x_frag(xs, mt, j, lane);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        mma_f16(acc[nt][mt], x.a[0], x.a[1], x.a[2], x.a[3], b[nt][0], b[nt][1]);
        mma_f16(acc[nt][mt], x.b[0], x.b[1], x.b[2], x.b[3], b[nt][2], b[nt][3]);
      }
    }
  }
}

// One chunk with any scales: per 32 a fresh fragment of the plain e2m1 values, added times
// 2^kMxfp4Bias * scale (one fma: the narrow kernel's rounding, times 2^kMxfp4Bias).
template <int MT>
__device__ __forceinline__ void chunk_exact(float (&acc)[kNT][MT][4], const uint32_t (&wv)[kNT][4],
                                            const uint2 (&sv)[kNT], uint32_t xs, int m, int lane) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (mt * 16 >= m) break;  // block-uniform
      const XFrag x = x_frag(xs, mt, j, lane);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        float cf[4] = {0.f, 0.f, 0.f, 0.f};
        uint32_t b[4];
        e2m1_dev_pairs(wv[nt][j], kE2m1Lut0, kE2m1Lut1, b);
        mma_f16(cf, x.a[0], x.a[1], x.a[2], x.a[3], b[0], b[1]);
        mma_f16(cf, x.b[0], x.b[1], x.b[2], x.b[3], b[2], b[3]);
        const float s0 = e8m0_to_float((sv[nt].x >> (8 * j)) & 0xffu) * float(1 << kMxfp4Bias);
        const float s1 = e8m0_to_float((sv[nt].y >> (8 * j)) & 0xffu) * float(1 << kMxfp4Bias);
        acc[nt][mt][0] = fmaf(cf[0], s0, acc[nt][mt][0]);
        acc[nt][mt][1] = fmaf(cf[1], s1, acc[nt][mt][1]);
        acc[nt][mt][2] = fmaf(cf[2], s0, acc[nt][mt][2]);
        acc[nt][mt][3] = fmaf(cf[3], s1, acc[nt][mt][3]);
      }
    }
  }
}

// kSwiglu: g is g13 (pairs w1, w3), out a16 fp16 [., N] with N = I; else g is g2, out the fp32 y.
template <int MT, bool kSwiglu>
__global__ void __launch_bounds__(256, 2)
    mxfp4_wide_kernel(const Mxfp4Group* __restrict__ groups, const __half* __restrict__ x16, int N, int K, float limit,
                      __half* __restrict__ a16, bool tiled) {
  detail::pdl_entry();
  extern __shared__ __align__(16) unsigned char smem[];
  const Mxfp4Group gd = groups[kSwiglu ? 2 * blockIdx.y : blockIdx.y];
  const int m = gd.m;
  if (m <= 0) return;
  const uint8_t* w3 = nullptr;
  const uint8_t* s3 = nullptr;
  if (kSwiglu) {
    const Mxfp4Group gu = groups[2 * blockIdx.y + 1];
    w3 = gu.w, s3 = gu.scale;
  }
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int nchunk = K / 128, kg = K / 32;
  const Mxfp4Rows L{K / 2, kg, tiled};
  // Weight row r of the block (0..255) -> its global row pointer (packed, scales).
  auto wrow = [&](int r, const uint8_t*& w, const uint8_t*& s) {
    if (kSwiglu) {
      const int wr = r & 31, col = blockIdx.x * 128 + (r >> 5) * 16 + (wr & 15);
      w = (wr < 16 ? gd.w : w3) + L.w(col);
      s = (wr < 16 ? gd.scale : s3) + L.s(col);
    } else {
      const int col = blockIdx.x * kRows + r;
      w = gd.w + L.w(col);
      s = gd.scale + L.s(col);
    }
  };
  // This thread's copy jobs: weight rows tid / 4 + 64 q (segment tid % 4), which lie in one tensor
  // (w1 / w3 and the column block do not change with q) wdelta[q] bytes from the first, scale row
  // tid, and x rows tid / 16 + 16 q (segment tid % 16).
  const uint8_t* wsrc;
  const uint8_t* ssrc;
  int wdelta[4];
  {
    const uint8_t *s, *w;
    wrow(tid >> 2, wsrc, s);
#pragma unroll
    for (int q = 0; q < 4; ++q) wrow((tid >> 2) + 64 * q, w, s), wdelta[q] = static_cast<int>(w - wsrc);
    wsrc += (tid & 3) * 16;
    wrow(tid, w, ssrc);
  }
  const int wcs = L.wc(), scs = L.sc();
  const __half* xsrc = x16 + (int64_t(gd.row0) + (tid >> 4)) * K + (tid & 15) * 8;
  const int xr = tid >> 4, xseg = tid & 15;
  const uint32_t s_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

  auto issue = [&](int c) {
    if (c < nchunk) {
      const uint32_t st = s_base + (c % stages<MT>()) * stage_bytes<MT>();
#pragma unroll
      for (int q = 0; q < 4; ++q)
        cp_async16(st + w64_off((tid >> 2) + 64 * q, tid & 3), wsrc + wdelta[q] + int64_t(c) * wcs);
      cp_async4(st + kStageW + tid * 4, ssrc + int64_t(c) * scs);
#pragma unroll
      for (int q = 0; q < MT; ++q)
        if (xr + 16 * q < m)
          cp_async16(st + kStageW + kStageS + x_off(xr + 16 * q, xseg), xsrc + int64_t(16 * q) * K + c * 128);
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
  for (int i = 0; i < stages<MT>() - 1; ++i) issue(i);
  const uint32_t ld_off = w64_off(lane & 7, lane >> 3);
  for (int c = 0; c < nchunk; ++c) {
    cp_wait<stages<MT>() - 2>();
    const uint32_t st = s_base + (c % stages<MT>()) * stage_bytes<MT>();
    // This thread's own copy of stage c is complete: its scale row (tid) decides with the others'
    // whether the block folds this chunk (a property of the block's weights only).
    const bool fold = __syncthreads_and(mxfp4_foldable(lds_u32(st + kStageW + tid * 4)));
    // (the barrier: stage c is in for every thread; stage c - 1 is free for everyone)
    issue(c + stages<MT>() - 1);
    uint32_t wv[kNT][4], sg[kNT];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      ldsm_x4(wv[nt], st + (warp * 32 + nt * 8) * 64 + ld_off);
      sg[nt] = lds_u32(st + kStageW + (warp * 32 + nt * 8 + g) * 4);  // the 4 scales of this lane's weight row
    }
    const uint32_t xs = st + kStageW + kStageS;
    if (fold) {
      chunk_folded<MT>(acc, wv, sg, xs, m, lane);
    } else {
      uint2 sv[kNT];  // the scales of the accumulator's columns: rows 2t, 2t + 1 of each tile
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) sv[nt] = lds_u2(st + kStageW + (warp * 32 + nt * 8 + 2 * t) * 4);
      chunk_exact<MT>(acc, wv, sv, xs, m, lane);
    }
  }
  cp_wait<0>();

#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int r0 = mt * 16 + g, r1 = r0 + 8;
    if (kSwiglu) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {  // tiles q (w1) and q + 2 (w3) hold the same outputs
        // columns 2t, 2t + 1 of an 8-column block, stored pair-transposed for the w2 kernel
        const int p = (blockIdx.x * 128 + warp * 16 + q * 8) / 2 + t;  // column pair
        const int c0 = 2 * ((p & ~15) + mxfp4_f16_pair_pos(p & 15));
        const float* ga = acc[q][mt];
        const float* ua = acc[q + 2][mt];
        auto act = [&](int i) { return swiglu_clamped(ga[i] * kMxfp4Unbias, ua[i] * kMxfp4Unbias, limit); };
        if (r0 < m) *reinterpret_cast<__half2*>(a16 + int64_t(gd.row0 + r0) * N + c0) = __floats2half2_rn(act(0), act(1));
        if (r1 < m) *reinterpret_cast<__half2*>(a16 + int64_t(gd.row0 + r1) * N + c0) = __floats2half2_rn(act(2), act(3));
      }
    } else {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int col = blockIdx.x * kRows + warp * 32 + nt * 8 + 2 * t;
        const float* a = acc[nt][mt];
        if (r0 < m) *reinterpret_cast<float2*>(gd.y + int64_t(r0) * N + col) = make_float2(a[0] * kMxfp4Unbias, a[1] * kMxfp4Unbias);
        if (r1 < m) *reinterpret_cast<float2*>(gd.y + int64_t(r1) * N + col) = make_float2(a[2] * kMxfp4Unbias, a[3] * kMxfp4Unbias);
      }
    }
  }
}

template <int MT, bool kSwiglu>
bool launch_wide(const Mxfp4Group* groups, int n_groups, const uint16_t* x16, int N, int K, float limit, uint16_t* a16,
                 bool tiled, cudaStream_t s) {
  static std::atomic<uint64_t> smem_set{0};  // per instantiation: one bit per device
  if (!max_dynamic_smem_once(reinterpret_cast<const void*>(mxfp4_wide_kernel<MT, kSwiglu>), smem_bytes<MT>(), smem_set,
                             "mxfp4 wide experts: shared-memory size"))
    return false;
  const dim3 grid(static_cast<unsigned>(kSwiglu ? N / 128 : N / kRows), static_cast<unsigned>(n_groups));
  detail::launch_pdl(mxfp4_wide_kernel<MT, kSwiglu>, grid, 256, smem_bytes<MT>(), s, groups, reinterpret_cast<const __half*>(x16), N, K, limit, reinterpret_cast<__half*>(a16), tiled);
  return check_launch("mxfp4_wide_kernel");
}

template <bool kSwiglu>
bool dispatch_wide(const Mxfp4Group* groups, int n_groups, int max_m, const uint16_t* x16, int N, int K, float limit,
                   uint16_t* a16, bool tiled, cudaStream_t s) {
  if (max_m <= 16) return launch_wide<1, kSwiglu>(groups, n_groups, x16, N, K, limit, a16, tiled, s);
  if (max_m <= 32) return launch_wide<2, kSwiglu>(groups, n_groups, x16, N, K, limit, a16, tiled, s);
  return launch_wide<4, kSwiglu>(groups, n_groups, x16, N, K, limit, a16, tiled, s);
}

__global__ void moe_permute_f16_kernel(const float* __restrict__ h, int k, int d, const int32_t* __restrict__ slot_pos,
                                       __half* __restrict__ x16) {
  detail::pdl_entry();
  const int i = blockIdx.x;
  const float4* src = reinterpret_cast<const float4*>(h + int64_t(i / k) * d);
  __half2* dst = reinterpret_cast<__half2*>(x16 + int64_t(slot_pos[i]) * d);
  for (int c = threadIdx.x; c < d / 4; c += blockDim.x) {  // column pairs 2c, 2c + 1 -> pair-transposed
    const float4 v = src[c];
    const int p = 2 * c, base = p & ~15;
    dst[base + mxfp4_f16_pair_pos(p & 15)] = __floats2half2_rn(v.x, v.y);
    dst[base + mxfp4_f16_pair_pos((p + 1) & 15)] = __floats2half2_rn(v.z, v.w);
  }
}

}  // namespace

bool mxfp4_experts_w13_swiglu(const Mxfp4Group* g13, int n_groups, int max_m, const uint16_t* x16, int64_t I,
                              int64_t K, float limit, uint16_t* a16, Mxfp4Layout layout, void* stream) {
  if (!check_wide_launch("mxfp4_experts_w13_swiglu", n_groups, max_m, 64, I, 128, K, 128)) return false;
  if (n_groups <= 0 || max_m <= 0) return true;
  return dispatch_wide<true>(g13, n_groups, max_m, x16, static_cast<int>(I), static_cast<int>(K), limit, a16,
                             layout == Mxfp4Layout::tiles64, as_stream(stream));
}

bool mxfp4_experts_w2(const Mxfp4Group* g2, int n_groups, int max_m, const uint16_t* a16, int64_t N, int64_t K,
                      Mxfp4Layout layout, void* stream) {
  if (!check_wide_launch("mxfp4_experts_w2", n_groups, max_m, 64, N, kRows, K, 128)) return false;
  if (n_groups <= 0 || max_m <= 0) return true;
  return dispatch_wide<false>(g2, n_groups, max_m, a16, static_cast<int>(N), static_cast<int>(K), 0.f, nullptr,
                              layout == Mxfp4Layout::tiles64, as_stream(stream));
}

bool moe_permute_f16(const float* h, int64_t T, int k, int64_t d, const int32_t* slot_pos, uint16_t* x16,
                     void* stream) {
  if (d % 32) return fail("moe_permute_f16: d % 32 != 0 (whole 32-column groups)");
  if (T <= 0) return true;
  detail::launch_pdl(moe_permute_f16_kernel, static_cast<unsigned>(T * k), 256, 0, as_stream(stream), h, k, static_cast<int>(d), slot_pos, reinterpret_cast<__half*>(x16));
  return check_launch("moe_permute_f16_kernel");
}

}  // namespace deepinfer::cuda
