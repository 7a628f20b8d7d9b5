// Tensor-core and async-copy building blocks shared by the MXFP4 expert kernels, and their launch
// checks (never included outside backend/cuda).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

namespace deepinfer::cuda::detail {

/// c += a . b on m16n8k16 f16 fragments, fp32 accumulate.
__device__ __forceinline__ void mma_f16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// ---- MXFP4 on the device: the "device layout" of packed e2m1 ----
// Stored (checkpoint) layout: each byte holds two e2m1 codes s|e1 e0|m, low nibble first, so
// code c of a little-endian 32-bit word (8 codes) sits at bits 4c..4c+3. The device layout
// (cuda_ops.h's mxfp4_word_to_device, done once at upload) keeps every magnitude e1 e0 m where it is
// (bits 4c..4c+2) and moves the sign bits: code c < 4 to bit 8c + 7, code c >= 4 to bit
// 8(c - 4) + 3. Then the magnitudes of codes 0..3 and 4..7 are the 16-bit halves of w & 0x77777777
// (4-bit PRMT selectors), and their signs are already at each byte's bit 7 in w (codes 0..3)
// and in w << 4 (codes 4..7).
//
// Dequantisation is a table lookup in registers: PRMT picks, per code, one byte of an 8-entry
// table of f16 high bytes (|e2m1| = 0, .5, 1, 1.5, 2, 3, 4, 6 are f16 numbers whose low byte is
// zero), the sign goes in with the same LOP3 that masks it, and two more PRMT per register put
// each byte over a zero byte: a word of 8 codes is 4 half2 in 11 instructions. A power-of-two
// scale 2^d (|d| <= 13) folds into the table by adding 4d to the exponent field of its 7 nonzero
// entries (mxfp4_lut), so scaled fp16 weights cost nothing extra per code.

/// The table (entries 0..3, 4..7) of |e2m1| as f16 high bytes.
constexpr uint32_t kE2m1Lut0 = 0x3E3C3800u, kE2m1Lut1 = 0x46444240u;

/// The table of |e2m1| * 2^(s - 127 + bias) for an E8M0 byte s, valid (exact, normal fp16) when
/// s - 127 + bias lies in [-13, 13]: one IMAD per register.
template <int kBias>
__device__ __forceinline__ void mxfp4_lut(uint32_t s, uint32_t& l0, uint32_t& l1) {
  constexpr uint32_t k = 4u * uint32_t(127 - kBias);
  l0 = s * 0x04040400u + (kE2m1Lut0 - k * 0x01010100u);
  l1 = s * 0x04040404u + (kE2m1Lut1 - k * 0x01010101u);
}

/// The wide expert kernels' folded tables carry 2^kMxfp4Bias (|e2m1| * 2^(s - 127 + bias)), so
/// the table reaches the small scales real weights have; their epilogues multiply by
/// kMxfp4Unbias = 2^-kMxfp4Bias, exactly.
constexpr int kMxfp4Bias = 8;
constexpr float kMxfp4Unbias = 1.f / 256.f;
static_assert(kMxfp4Unbias * (1 << kMxfp4Bias) == 1.f, "kMxfp4Unbias is 2^-kMxfp4Bias");

/// Folding the scale into the table is exact when every scale byte s of a chunk is in
/// [106, 132]: d = s - 127 + 8 lies in [-13, 13], so every |e2m1| * 2^d (0.5 * 2^-13 .. 6 * 2^13) is
/// a normal fp16 number with a zero low byte (mxfp4_lut).
constexpr uint32_t kMxfp4FoldMin = 127 - kMxfp4Bias - 13, kMxfp4FoldMax = 127 - kMxfp4Bias + 13;
static_assert(kMxfp4FoldMin == 106 && kMxfp4FoldMax == 132, "the fold range");
/// The FP8 expert kernels' e4m3 tables (mxfp4_fp8.cu): exact for scale bytes s in [114, 125], where
/// every |e2m1| * 2^d, d = s - 127 + 8 in [-5, 6], is a normal e4m3 number (0.5 * 2^-5 .. 6 * 2^6).
constexpr uint32_t kMxfp4Fp8FoldMin = 127 - kMxfp4Bias - 5, kMxfp4Fp8FoldMax = 127 - kMxfp4Bias + 6;
static_assert(kMxfp4Fp8FoldMin == 114 && kMxfp4Fp8FoldMax == 125, "the e4m3 fold range");
/// Whether each of the four scale bytes of s4 lies in [kMxfp4FoldMin, kMxfp4FoldMax].
__device__ __forceinline__ bool mxfp4_foldable(uint32_t s4) {
  return (__vcmpgeu4(s4, kMxfp4FoldMin * 0x01010101u) & __vcmpleu4(s4, kMxfp4FoldMax * 0x01010101u)) == 0xffffffffu;
}

/// Where the bytes of an MXFP4 weight [N, K] lie: row n's first weight byte w(n) and scale byte
/// s(n), and the steps wc / sc from one 128-code chunk to the next, in the device layout (rows of
/// K / 2 bytes and K / 32 scale bytes) or in its 64-row tiles (mxfp4_tile64: per 64 rows and 128
/// codes, the 64 x 64 weight bytes and the 64 x 4 scale bytes contiguous). Rows n0..n0+63 of a tile
/// (n0 % 64 == 0) are 64 bytes apart there.
struct Mxfp4Rows {
  int64_t rb, kg;  // K / 2, K / 32
  bool tiled;
  __device__ __forceinline__ int64_t w(int64_t n) const { return tiled ? (n >> 6) * 64 * rb + (n & 63) * 64 : n * rb; }
  __device__ __forceinline__ int64_t s(int64_t n) const { return tiled ? (n >> 6) * 64 * kg + (n & 63) * 4 : n * kg; }
  __device__ __forceinline__ int wc() const { return tiled ? 4096 : 64; }
  __device__ __forceinline__ int sc() const { return tiled ? 256 : 4; }
};

/// A thread's weight copy jobs in a wgmma expert block (mxfp4_wgmma.cu, mxfp4_fp8.cu: 128 weight
/// rows, 256 threads): 16-byte segment tid % 4 of block rows tid / 4 and tid / 4 + 64 (one tensor,
/// wstride apart), and the scale row tid % 128, each at chunk c of 128 codes.
struct ExpertWeightJob {
  const uint8_t* w;  // the first row's segment, chunk 0
  int64_t wstride;   // to the second row
  const uint8_t* s;  // the scale row, chunk 0
  int wcs, scs;      // from one chunk to the next (Mxfp4Rows)
  __device__ __forceinline__ const uint8_t* weights(int q, int c) const { return w + q * wstride + int64_t(c) * wcs; }
  __device__ __forceinline__ const uint8_t* scales(int c) const { return s + int64_t(c) * scs; }
};
/// Block row r -> tensor row: w13 (groups[2 y] = w1, groups[2 y + 1] = w3, gd = w1's): w1 for
/// r % 16 < 8, else w3, row 64 * block + 8 (r / 16) + r % 8, so gate and up of one output sit in
/// one thread; w2 (gd): row 128 * block + r. Either layout (tiled: mxfp4_tile64).
template <bool kSwiglu>
__device__ __forceinline__ ExpertWeightJob expert_weight_job(const Mxfp4Group* groups, const Mxfp4Group& gd, int K,
                                                             bool tiled, int tid) {
  const Mxfp4Rows L{K / 2, K / 32, tiled};
  auto row = [&](int r, const uint8_t*& w, const uint8_t*& s) {
    const bool up = kSwiglu && (r & 15) >= 8;
    const int64_t col = kSwiglu ? blockIdx.x * 64 + (r >> 4) * 8 + (r & 7) : blockIdx.x * 128 + r;
    w = (up ? groups[2 * blockIdx.y + 1].w : gd.w) + L.w(col);
    s = (up ? groups[2 * blockIdx.y + 1].scale : gd.scale) + L.s(col);
  };
  ExpertWeightJob j;
  const uint8_t *s, *w2;
  row(tid >> 2, j.w, s);
  row((tid >> 2) + 64, w2, s);
  j.wstride = w2 - j.w;
  j.w += (tid & 3) * 16;
  row(tid & 127, w2, j.s);
  j.wcs = L.wc(), j.scs = L.sc();
  return j;
}

/// The wide expert kernels' launch checks (false with `what`'s message): N % n_align, K % k_align,
/// groups of at most max_rows rows, at most 65535 groups (grid y).
inline bool check_wide_launch(const char* what, int n_groups, int max_m, int max_rows, int64_t N, int64_t n_align,
                              int64_t K, int64_t k_align) {
  if (N % n_align || K % k_align)
    return fail(std::string(what) + ": need N % " + std::to_string(n_align) + " == 0 and K % " +
                std::to_string(k_align) + " == 0");
  if (max_m > max_rows) return fail(std::string(what) + ": max_m > " + std::to_string(max_rows));
  if (n_groups > 65535) return fail(std::string(what) + ": more than 65535 groups");
  return true;
}

/// The 8 codes of a device-layout word as 4 half2: (code 0, 1), (2, 3), (4, 5), (6, 7), each
/// |code| looked up in the table (l0, l1).
__device__ __forceinline__ void e2m1_dev_pairs(uint32_t w, uint32_t l0, uint32_t l1, uint32_t (&p)[4]) {
  const uint32_t mag = w & 0x77777777u;
  const uint32_t b0 = __byte_perm(l0, l1, mag) | (w & 0x80808080u);
  const uint32_t b1 = __byte_perm(l0, l1, mag >> 16) | ((w << 4) & 0x80808080u);
  p[0] = __byte_perm(b0, 0u, 0x1404u), p[1] = __byte_perm(b0, 0u, 0x3424u);
  p[2] = __byte_perm(b1, 0u, 0x1404u), p[3] = __byte_perm(b1, 0u, 0x3424u);
}

__device__ __forceinline__ void cp_async16(uint32_t saddr, const void* g) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(saddr), "l"(g));
}
__device__ __forceinline__ void cp_async4(uint32_t saddr, const void* g) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(saddr), "l"(g));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t saddr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(saddr)
               : "memory");
}
__device__ __forceinline__ uint32_t lds_u32(uint32_t saddr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(saddr) : "memory");
  return v;
}
__device__ __forceinline__ uint2 lds_u2(uint32_t saddr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(saddr) : "memory");
  return v;
}
__device__ __forceinline__ uint4 lds_u4(uint32_t saddr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(saddr) : "memory");
  return v;
}

/// Byte offset of (row, 16-byte segment) in a shared-memory tile of 64-byte weight rows (one
/// 128-code chunk per row): segment XOR (row / 2) % 4, so rows 0..7 of one segment land on 8
/// distinct 16-byte bank slots (ldmatrix reads them conflict-free).
__device__ __forceinline__ uint32_t w64_off(int row, int seg) {
  return uint32_t(row * 64 + ((seg ^ ((row >> 1) & 3)) << 4));
}

/// The routed experts' clamped SwiGLU of one element (limit <= 0: no clamp).
__device__ __forceinline__ float swiglu_clamped(float g, float u, float limit) {
  if (limit > 0.f) {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
  }
  return g / (1.f + expf(-g)) * u;
}

}  // namespace deepinfer::cuda::detail
