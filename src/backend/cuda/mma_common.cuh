// Tensor-core and async-copy building blocks shared by the MXFP4 expert kernels (device code only;
// never included outside backend/cuda).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace deepinfer::cuda::detail {

/// c += a . b on m16n8k16 f16 fragments, fp32 accumulate.
__device__ __forceinline__ void mma_f16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/// Nibbles p and p + 4 of a word of 8 e2m1 codes as a half2 (low, high) of value * 2^-14: the
/// code s|e1 e0|m moved to f16 bits 15 and 11..9 is that number exactly (normals and subnormal).
__device__ __forceinline__ uint32_t e2m1_pair(uint32_t w, int p) {
  const uint32_t v = w >> (4 * p);
  return ((v << 9) & 0x0E000E00u) | ((v << 12) & 0x80008000u);
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
