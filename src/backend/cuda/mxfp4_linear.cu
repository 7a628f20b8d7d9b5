// MXFP4 expert linear for decode: y = x W^T per expert group, W packed e2m1 with E8M0 per 32.
//
// Dequantisation is a bit move, no table: an e2m1 code s|e1 e0|m placed at f16 bits 15 and
// 11..9 is the f16 number value * 2^-14 exactly (normals and the one subnormal alike), so a word
// of 8 codes becomes 4 half2 with 2 shifts and one LOP3 each, pairing nibble p with nibble p+4.
// The mma (m16n8k16 f16, fp32 accumulate) takes x in the same pairing, so the dot is unchanged.
// Each 32-wide K group (one E8M0 scale per weight row) is two mma into a fresh fragment, then
// added times 2^14 * scale. 4 threads of a row cover one group: 4-byte loads, coalesced per row.
#include <cuda_fp16.h>

#include "backend/cuda/cuda_common.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;

namespace {

__device__ __forceinline__ void mma_f16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t e2m1_pair(uint32_t w, int p) {
  const uint32_t v = w >> (4 * p);
  return ((v << 9) & 0x0E000E00u) | ((v << 12) & 0x80008000u);
}

__device__ __forceinline__ uint32_t h2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

constexpr int kWarps = 8;
constexpr int kNT = 4;  // 8-row weight tiles per block (32 rows): x fragments are reused across them

template <int MT>
__global__ void __launch_bounds__(256) mxfp4_grouped_kernel(const Mxfp4Group* __restrict__ groups, int N, int K) {
  constexpr int MH = MT < 2 ? MT : 2;  // m tiles reduced per pass (keeps smem at 32 KB)
  __shared__ float red[kWarps][MH * 16][8 * kNT];
  const Mxfp4Group gd = groups[blockIdx.z];
  const int m = gd.m;
  if (m <= 0) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * 8 * kNT;
  const int kg = K / 32;       // scale groups per row
  const int nchunk = K / 128;  // 4 groups per chunk
  const int64_t wstride = int64_t(8) * (K / 2) / 4;  // words between tiles
  const uint32_t* wrow = reinterpret_cast<const uint32_t*>(gd.w + int64_t(n0 + g) * (K / 2)) + t;
  const uint32_t* srow0 = reinterpret_cast<const uint32_t*>(gd.scale + int64_t(n0 + 2 * t) * kg);
  const int64_t sstride = int64_t(8) * kg / 4;
  const int64_t srow1 = kg / 4;  // next row

  float acc[kNT][MT][4];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][mt][i] = 0.f;

  for (int c = warp; c < nchunk; c += kWarps) {
    uint32_t wv[kNT][4], sv0[kNT], sv1[kNT];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) wv[nt][j] = __ldg(wrow + nt * wstride + (c * 4 + j) * 4);
      sv0[nt] = __ldg(srow0 + nt * sstride + c);
      sv1[nt] = __ldg(srow0 + nt * sstride + srow1 + c);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int kk = (c * 4 + j) * 32 + t * 8;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int r0 = mt * 16 + g, r1 = r0 + 8;
        float4 p0 = make_float4(0.f, 0.f, 0.f, 0.f), p1 = p0, q0 = p0, q1 = p0;
        if (r0 < m) {
          const float4* px = reinterpret_cast<const float4*>(gd.x + int64_t(r0) * K + kk);
          p0 = px[0];
          p1 = px[1];
        }
        if (r1 < m) {
          const float4* px = reinterpret_cast<const float4*>(gd.x + int64_t(r1) * K + kk);
          q0 = px[0];
          q1 = px[1];
        }
        // physical k: p0 = kk+0..3, p1 = kk+4..7; pairs (0,4), (1,5) | (2,6), (3,7)
        const uint32_t a0 = h2(p0.x, p1.x), a1 = h2(q0.x, q1.x), a2 = h2(p0.y, p1.y), a3 = h2(q0.y, q1.y);
        const uint32_t a4 = h2(p0.z, p1.z), a5 = h2(q0.z, q1.z), a6 = h2(p0.w, p1.w), a7 = h2(q0.w, q1.w);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const float s0 = detail::e8m0_to_float((sv0[nt] >> (8 * j)) & 0xffu);
          const float s1 = detail::e8m0_to_float((sv1[nt] >> (8 * j)) & 0xffu);
          float cf[4] = {0.f, 0.f, 0.f, 0.f};
          mma_f16(cf, a0, a1, a2, a3, e2m1_pair(wv[nt][j], 0), e2m1_pair(wv[nt][j], 1));
          mma_f16(cf, a4, a5, a6, a7, e2m1_pair(wv[nt][j], 2), e2m1_pair(wv[nt][j], 3));
          acc[nt][mt][0] = fmaf(cf[0] * 16384.f, s0, acc[nt][mt][0]);
          acc[nt][mt][1] = fmaf(cf[1] * 16384.f, s1, acc[nt][mt][1]);
          acc[nt][mt][2] = fmaf(cf[2] * 16384.f, s0, acc[nt][mt][2]);
          acc[nt][mt][3] = fmaf(cf[3] * 16384.f, s1, acc[nt][mt][3]);
        }
      }
    }
  }
#pragma unroll
  for (int mh = 0; mh < MT; mh += MH) {
    if (mh) __syncthreads();
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int q = 0; q < MH; ++q) {
        red[warp][q * 16 + g][nt * 8 + 2 * t] = acc[nt][mh + q][0];
        red[warp][q * 16 + g][nt * 8 + 2 * t + 1] = acc[nt][mh + q][1];
        red[warp][q * 16 + g + 8][nt * 8 + 2 * t] = acc[nt][mh + q][2];
        red[warp][q * 16 + g + 8][nt * 8 + 2 * t + 1] = acc[nt][mh + q][3];
      }
    __syncthreads();
    for (int i = threadIdx.x; i < MH * 16 * 8 * kNT; i += 256) {
      const int rl = i / (8 * kNT), col = i % (8 * kNT), r = mh * 16 + rl;
      if (r >= m) continue;
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < kWarps; ++k) s += red[k][rl][col];  // fixed order
      gd.y[int64_t(r) * N + n0 + col] = s;
    }
  }
}

}  // namespace

bool mxfp4_linear_grouped(const Mxfp4Group* groups, int n_groups, int max_m, int64_t N, int64_t K, void* stream) {
  if (N % 32 || K % 128) return fail("mxfp4_linear_grouped: need N % 32 == 0 and K % 128 == 0");
  if (max_m > 64) return fail("mxfp4_linear_grouped: max_m > 64");
  if (n_groups <= 0 || max_m <= 0) return true;
  const dim3 grid(static_cast<unsigned>(N / (8 * kNT)), 1, static_cast<unsigned>(n_groups));
  const cudaStream_t s = as_stream(stream);
  const int n = static_cast<int>(N), k = static_cast<int>(K);
  if (max_m <= 16)
    mxfp4_grouped_kernel<1><<<grid, 256, 0, s>>>(groups, n, k);
  else if (max_m <= 32)
    mxfp4_grouped_kernel<2><<<grid, 256, 0, s>>>(groups, n, k);
  else
    mxfp4_grouped_kernel<4><<<grid, 256, 0, s>>>(groups, n, k);
  return check_launch("mxfp4_grouped_kernel");
}

}  // namespace deepinfer::cuda
