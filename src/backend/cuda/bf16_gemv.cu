// bf16_gemv (model_ops.h): decode's few-row bf16 linears (the compressors' wkv + wgate, the
// indexer's head weights; the head at 1-2 rows) without cuBLASLt's split-K GEMM and its separate
// reduction launch, the weights' first wave loaded before the PDL wait.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/model_ops.h"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;

namespace {

constexpr int kWarps = 8;       // output columns per block
constexpr int kMaxSteps = 16;   // 256-wide K steps a lane holds: K <= 4096 (bf16_gemv_fits)

__device__ __forceinline__ float bf16_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t v) { return __uint_as_float(v & 0xFFFF0000u); }

// Lane l's 8 columns of a 256-wide step: acc += x . w, columns in order.
__device__ __forceinline__ float dot8(float acc, uint4 x, uint4 w) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    acc = fmaf(bf16_lo(xs[j]), bf16_lo(ws[j]), acc);
    acc = fmaf(bf16_hi(xs[j]), bf16_hi(ws[j]), acc);
  }
  return acc;
}

template <int M>
__global__ void __launch_bounds__(kWarps * 32) bf16_gemv_kernel(const uint16_t* __restrict__ x, int K,
                                                               const uint16_t* __restrict__ w, int N,
                                                               float* __restrict__ y) {
  const int lane = threadIdx.x & 31, n = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int steps = K / 256;
  const bool live = n < N;
  const uint16_t* wr = w + int64_t(live ? n : 0) * K + lane * 8;
  uint4 wv[kMaxSteps];
#pragma unroll
  for (int i = 0; i < kMaxSteps; ++i)
    if (i < steps && live) wv[i] = detail::ldg_nc_v4(wr + i * 256);
  detail::pdl_wait();  // x comes from the kernels before
  detail::pdl_trigger_one_wave();
  if (!live) return;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxSteps; ++i) {
    if (i >= steps) break;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const uint4 xv = *reinterpret_cast<const uint4*>(x + int64_t(m) * K + i * 256 + lane * 8);
      acc[m] = dot8(acc[m], xv, wv[i]);
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
  if (lane == 0)
#pragma unroll
    for (int m = 0; m < M; ++m) y[int64_t(m) * N + n] = acc[m];
}

template <int M>
bool launch(const uint16_t* x, const uint16_t* w, int N, int K, float* y, cudaStream_t s) {
  detail::launch_pdl(bf16_gemv_kernel<M>, dim3(static_cast<unsigned>((N + kWarps - 1) / kWarps)), kWarps * 32, 0, s,
                     x, K, w, N, y);
  return check_launch("bf16_gemv_kernel");
}

}  // namespace

bool bf16_gemv(const uint16_t* x, int64_t M, const uint16_t* w, int64_t N, int64_t K, float* y, void* stream) {
  static_assert(bf16_gemv_fits(0, kMaxSteps * 256) && !bf16_gemv_fits(0, (kMaxSteps + 1) * 256));
  if (!bf16_gemv_fits(M, K) || N <= 0 || N > (int64_t(1) << 30))
    return fail("bf16_gemv: need 0 <= M <= 8, N > 0, K a multiple of 256 up to 4096 (M " + std::to_string(M) + ", N " +
                std::to_string(N) + ", K " + std::to_string(K) + ")");
  if (M == 0) return true;
  if (!x || !w || !y) return fail("bf16_gemv: null argument");
  const cudaStream_t s = as_stream(stream);
  const int n = static_cast<int>(N), k = static_cast<int>(K);
  switch (M) {
    case 1: return launch<1>(x, w, n, k, y, s);
    case 2: return launch<2>(x, w, n, k, y, s);
    case 3: return launch<3>(x, w, n, k, y, s);
    case 4: return launch<4>(x, w, n, k, y, s);
    case 5: return launch<5>(x, w, n, k, y, s);
    case 6: return launch<6>(x, w, n, k, y, s);
    case 7: return launch<7>(x, w, n, k, y, s);
    default: return launch<8>(x, w, n, k, y, s);
  }
}

}  // namespace deepinfer::cuda
