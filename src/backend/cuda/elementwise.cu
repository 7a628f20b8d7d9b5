// Activation quantisation, RMSNorm and weight dequantisation kernels.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_quant.cuh"
#include "backend/cuda/norm_row.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;

namespace {

// One warp per (row, U consecutive 128-blocks), their loads issued together; lane j handles
// columns 4j..4j+3 of each block. (U = 1, one load per warp, took 16 us for the EP step's 256 x
// 32768 bf16 attention output on the H100: latency, not bytes; moe_rows_fp8 has the same shape.)
// kTransScale: scales written [kb * M + row] (cuBLASLt VEC128 layout) instead of [row * nkb + kb].
// kGroups (column groups of kg, a multiple of 128): 1, q is group-major [K / kg][M][kg] (x is
// [M][K]); 2, x is group-major and q [M][K]. The scales stay those of the [M][K] matrix: with
// kTransScale, group g's [M][kg] block has its own VEC128 scales at scales + g * (kg / 128) * M.
enum QuantGroups { kNoGroups = 0, kGroupsOut = 1, kGroupsIn = 2 };
__device__ __forceinline__ int64_t group_major(int64_t row, int64_t c, int64_t M, int64_t kg) {
  return c / kg * M * kg + row * kg + c % kg;
}
template <bool kBf16, bool kTransScale, int U, int kGroups = kNoGroups>
__global__ void quant_act_kernel(const void* __restrict__ x, int64_t M, int64_t K, uint8_t* __restrict__ q,
                                 float* __restrict__ scales, int64_t kg) {
  detail::pdl_entry();
  const int64_t nkb = K / 128, nu = nkb / U;
  const int64_t unit = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (unit >= M * nu) return;
  const int64_t row = unit / nu, kb0 = unit % nu * U;
  float v[U][4];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t c = (kb0 + u) * 128 + lane * 4;
    const int64_t off = kGroups == kGroupsIn ? group_major(row, c, M, kg) : row * K + c;
    if constexpr (kBf16) {
      detail::bf16x4_to_float(*reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(x) + off), v[u]);
    } else {
      const float4 f = *reinterpret_cast<const float4*>(static_cast<const float*>(x) + off);
      v[u][0] = f.x, v[u][1] = f.y, v[u][2] = f.z, v[u][3] = f.w;
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t kb = kb0 + u;
    uint32_t packed;
    const float s = detail::quant4_e4m3_pow2(v[u], packed);
    const int64_t c = kb * 128 + lane * 4;
    *reinterpret_cast<uint32_t*>(q + (kGroups == kGroupsOut ? group_major(row, c, M, kg) : row * K + c)) = packed;
    if (lane == 0) scales[kTransScale ? kb * M + row : row * nkb + kb] = s;
  }
}

// The quantisations' launch: 4 blocks a warp where K (and a group) allows.
template <bool kTransScale, int U, int kGroups>
void launch_quant_act_at(const void* x, bool x_is_bf16, int64_t M, int64_t K, uint8_t* q, float* scales, int64_t kg,
                         cudaStream_t s) {
  const int64_t warps = M * (K / (128 * U));
  const int threads = 256;
  const int64_t blocks = (warps * 32 + threads - 1) / threads;
  if (x_is_bf16)
    detail::launch_pdl(quant_act_kernel<true, kTransScale, U, kGroups>, blocks, threads, 0, s, x, M, K, q, scales, kg);
  else
    detail::launch_pdl(quant_act_kernel<false, kTransScale, U, kGroups>, blocks, threads, 0, s, x, M, K, q, scales, kg);
}
template <bool kTransScale, int kGroups = kNoGroups>
void launch_quant_act(const void* x, bool x_is_bf16, int64_t M, int64_t K, uint8_t* q, float* scales, cudaStream_t s,
                      int64_t kg = 0) {
  if (K % 512 == 0 && (kGroups == kNoGroups || kg % 512 == 0))
    launch_quant_act_at<kTransScale, 4, kGroups>(x, x_is_bf16, M, K, q, scales, kg, s);
  else
    launch_quant_act_at<kTransScale, 1, kGroups>(x, x_is_bf16, M, K, q, scales, kg, s);
}

// One block (256 threads) per row.
__global__ void rms_norm_kernel(const float* __restrict__ x, int64_t d, const float* __restrict__ w, float eps,
                                float* __restrict__ y) {
  detail::pdl_entry();
  const float* xi = x + blockIdx.x * d;
  float* yi = y + blockIdx.x * d;
  const float r = detail::row_rsqrt_mean_sq(xi, d, eps);
  for (int64_t k = threadIdx.x; k < d; k += 256) yi[k] = w ? w[k] * (xi[k] * r) : xi[k] * r;
}

// rms_norm_kernel's y (the same sum, tree and products, so the same bits) and, in the same pass,
// y's FP8 activation and / or its bf16 copy: detail::norm_pack_row (norm_row.cuh), one row a block.
__global__ void rms_norm_pack_kernel(const float* __restrict__ x, int64_t n, int64_t d, const float* __restrict__ w,
                                     float eps, float* __restrict__ y, uint8_t* __restrict__ q,
                                     float* __restrict__ scales, bool scales_t, uint16_t* __restrict__ y16) {
  detail::pdl_entry();
  const int64_t row = blockIdx.x;
  detail::norm_pack_row(x + row * d, row, n, d, w, eps, y, q, scales, scales_t, y16);
}

__device__ __forceinline__ float e4m3_to_float(uint8_t b) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(b, __NV_E4M3);
  return __half2float(__half(h));
}

__global__ void dequant_fp8_kernel(const uint8_t* __restrict__ w, const void* __restrict__ scale, bool f32,
                                   int64_t N, int64_t K, uint16_t* __restrict__ out) {
  const int64_t total = N * K;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / K, k = i % K;
    const int64_t si = (n / 128) * (K / 128) + k / 128;
    const float s = f32 ? static_cast<const float*>(scale)[si]
                        : detail::e8m0_to_float(static_cast<const uint8_t*>(scale)[si]);
    const __nv_bfloat16 b = __float2bfloat16_rn(e4m3_to_float(w[i]) * s);
    out[i] = *reinterpret_cast<const uint16_t*>(&b);
  }
}

__global__ void dequant_mxfp4_kernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ scale, int64_t N,
                                     int64_t K, uint16_t* __restrict__ out) {
  constexpr float kLut[16] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f, -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};
  const int64_t total = N * K;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / K, k = i % K;
    const uint32_t word = reinterpret_cast<const uint32_t*>(w + n * (K / 2))[k / 8];  // device layout
    const uint32_t code = mxfp4_dev_code(word, static_cast<int>(k % 8));
    const float s = detail::e8m0_to_float(scale[n * (K / 32) + k / 32]);
    const __nv_bfloat16 b = __float2bfloat16_rn(kLut[code] * s);
    out[i] = *reinterpret_cast<const uint16_t*>(&b);
  }
}

__global__ void mxfp4_to_device_layout_kernel(uint32_t* __restrict__ w, int64_t words) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < words; i += int64_t(gridDim.x) * blockDim.x)
    w[i] = mxfp4_word_to_device(w[i]);
}

}  // namespace

bool mxfp4_to_device_layout(uint8_t* w, int64_t bytes, void* stream) {
  if (bytes % 4 || reinterpret_cast<uintptr_t>(w) % 4) return fail("mxfp4_to_device_layout: need whole, aligned 32-bit words");
  if (bytes <= 0) return true;
  mxfp4_to_device_layout_kernel<<<1024, 256, 0, as_stream(stream)>>>(reinterpret_cast<uint32_t*>(w), bytes / 4);
  return check_launch("mxfp4_to_device_layout");
}

bool quantize_act_fp8(const void* x, bool x_is_bf16, int64_t M, int64_t K, uint8_t* q, float* scales, void* stream) {
  if (K % 128 != 0) return fail("quantize_act_fp8: K % 128 != 0");
  if (M <= 0) return true;
  launch_quant_act<false>(x, x_is_bf16, M, K, q, scales, as_stream(stream));
  return check_launch("quantize_act_fp8");
}

bool quantize_act_fp8_t(const void* x, bool x_is_bf16, int64_t M, int64_t K, uint8_t* q, float* scales_t,
                        void* stream) {
  if (K % 128 != 0) return fail("quantize_act_fp8_t: K % 128 != 0");
  if (M <= 0) return true;
  launch_quant_act<true>(x, x_is_bf16, M, K, q, scales_t, as_stream(stream));
  return check_launch("quantize_act_fp8_t");
}

bool quantize_act_fp8_t_grouped(const void* x, bool x_is_bf16, int64_t M, int64_t K, int64_t group_k, bool groups_in,
                                uint8_t* q, float* scales_t, void* stream) {
  if (group_k <= 0 || group_k % 128 || K % group_k) return fail("quantize_act_fp8_t_grouped: need K % group_k == 0, group_k % 128 == 0");
  if (M <= 0) return true;
  if (!x || !q || !scales_t) return fail("quantize_act_fp8_t_grouped: null argument");
  if (groups_in)
    launch_quant_act<true, kGroupsIn>(x, x_is_bf16, M, K, q, scales_t, as_stream(stream), group_k);
  else
    launch_quant_act<true, kGroupsOut>(x, x_is_bf16, M, K, q, scales_t, as_stream(stream), group_k);
  return check_launch("quantize_act_fp8_t_grouped");
}

bool rms_norm(const float* x, int64_t n, int64_t d, const float* weight, float eps, float* y, void* stream) {
  if (n <= 0) return true;
  detail::launch_pdl(rms_norm_kernel, n, 256, 0, as_stream(stream), x, d, weight, eps, y);
  return check_launch("rms_norm");
}

bool rms_norm_pack(const float* x, int64_t n, int64_t d, const float* weight, float eps, float* y, uint8_t* q,
                   float* scales, bool scales_t, uint16_t* y16, void* stream) {
  if (d % 128) return fail("rms_norm_pack: d % 128 != 0");
  if (q && !scales) return fail("rms_norm_pack: q without scales");
  if (n <= 0) return true;
  detail::launch_pdl(rms_norm_pack_kernel, n, 256, 0, as_stream(stream), x, n, d, weight, eps, y, q, scales, scales_t,
                     y16);
  return check_launch("rms_norm_pack");
}

bool dequant_fp8_to_bf16(const Fp8Weight& w, uint16_t* out, void* stream) {
  if (w.n % 128 || w.k % 128) return fail("dequant_fp8_to_bf16: N, K must be multiples of 128");
  dequant_fp8_kernel<<<2048, 256, 0, as_stream(stream)>>>(w.data, w.scale, w.scale_is_f32, w.n, w.k, out);
  return check_launch("dequant_fp8_to_bf16");
}

bool dequant_mxfp4_to_bf16(const uint8_t* w, const uint8_t* scale, int64_t N, int64_t K, uint16_t* out, void* stream) {
  if (K % 32) return fail("dequant_mxfp4_to_bf16: K % 32 != 0");
  dequant_mxfp4_kernel<<<2048, 256, 0, as_stream(stream)>>>(w, scale, N, K, out);
  return check_launch("dequant_mxfp4_to_bf16");
}

}  // namespace deepinfer::cuda
