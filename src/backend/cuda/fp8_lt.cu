// FP8 block-scaled GEMM through cuBLASLt (SM90): the DeepSeek scaling, activations per 1x128
// (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F) and weights per 128x128 (BLK128x128_32F), fp32
// scales, fp32 accumulation with the scales applied per 128-wide K block (no fast accumulation).
//
// Column-major view (cuBLAS): D[N, M] = op(A)[N, K] . B[K, M] with A = W stored [N][K] row-major
// (K x N column-major, op T) and B = x stored [M][K] row-major (K x M column-major, op N); D is
// y[M][N] row-major. Scale layouts (as PyTorch's _scaled_mm passes them on SM90): A's 128x128
// scales [N/128][K/128] row-major (the checkpoint's order), B's 1x128 scales [K/128][M] ("M-major").
#include "backend/cuda/lt_plan.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;
using detail::kLtWorkspace;

namespace {

// The descriptors of one shape (the cache asks the heuristic for the algorithm).
cublasStatus_t build_fp8_plan(detail::LtPlan& p, int64_t M, int64_t N, int64_t K, bool y_bf16, const void* sa,
                              const void* sb) {
  const cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
  const int32_t modeA = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, modeB = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const cudaDataType_t dt = y_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasStatus_t st;
  if ((st = cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS) return st;
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof(tA));
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof(tB));
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &modeA, sizeof(modeA));
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &modeB, sizeof(modeB));
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa));
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb));
  if ((st = cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, K, N, K)) != CUBLAS_STATUS_SUCCESS) return st;
  if ((st = cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, K, M, K)) != CUBLAS_STATUS_SUCCESS) return st;
  return cublasLtMatrixLayoutCreate(&p.d, dt, N, M, N);
}

__global__ void scales_to_f32_kernel(const uint8_t* __restrict__ s, int64_t n, float* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = detail::e8m0_to_float(s[i]);
}

}  // namespace

size_t fp8_linear_lt_workspace_bytes() { return kLtWorkspace; }

bool fp8_scales_to_f32(const Fp8Weight& w, float* out, void* stream) {
  if (w.n % 128 || w.k % 128) return fail("fp8_scales_to_f32: N, K must be multiples of 128");
  const int64_t n = (w.n / 128) * (w.k / 128);
  if (w.scale_is_f32)
    return detail::check(cudaMemcpyAsync(out, w.scale, n * 4, cudaMemcpyDeviceToDevice, as_stream(stream)),
                         "fp8_scales_to_f32");
  scales_to_f32_kernel<<<int((n + 255) / 256), 256, 0, as_stream(stream)>>>(static_cast<const uint8_t*>(w.scale), n,
                                                                             out);
  return check_launch("fp8_scales_to_f32");
}

bool fp8_linear_lt(const uint8_t* xq, const float* xs_t, int64_t M, const Fp8Weight& w, void* y, bool y_bf16,
                   void* workspace, void* stream, bool timed) {
  if (M <= 0) return true;
  if (!w.scale_is_f32) return fail("fp8_linear_lt: weight scales must be fp32 (fp8_scales_to_f32)");
  if (w.n % 128 || w.k % 128) return fail("fp8_linear_lt: N, K must be multiples of 128");
  if (!workspace) return fail("fp8_linear_lt: workspace (fp8_linear_lt_workspace_bytes) required");
  detail::LtCache& c = detail::lt_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  detail::LtPlan* p = nullptr;
  const detail::LtKind kind = timed ? detail::LtKind::kFp8BlockTimed : detail::LtKind::kFp8Block;
  const detail::LtKey key{int(kind), M, w.n, w.k, y_bf16};
  auto build = [&](detail::LtPlan& np) { return build_fp8_plan(np, M, w.n, w.k, y_bf16, w.scale, xs_t); };
  const cudaStream_t s = as_stream(stream);
  auto matmul = [&](const detail::LtPlan& np, const cublasLtMatmulAlgo_t& algo) {
    const float one = 1.f, zero = 0.f;
    return cublasLtMatmul(c.handle, np.desc, &one, w.data, np.a, xq, np.b, &zero, y, np.d, y, np.d, &algo, workspace,
                          kLtWorkspace, s);
  };
  // One warm-up and 3 timed runs of a candidate on the caller's operands (y is written again below).
  const detail::LtTimer timer = [&](const detail::LtPlan& np, const cublasLtMatmulAlgo_t& algo) -> float {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return -1.f;
    auto run = [&] { return matmul(np, algo) == CUBLAS_STATUS_SUCCESS; };
    if (!run()) return cudaGetLastError(), -1.f;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    float ms = -1.f;
    if (cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
        cudaEventRecord(e0, s) == cudaSuccess && run() && run() && run() && cudaEventRecord(e1, s) == cudaSuccess &&
        cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
      ms = -1.f;
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaGetLastError();
    return ms;
  };
  if (!detail::lt_get_plan(c, key, "fp8_linear_lt", build, &p, timed ? &timer : nullptr)) return false;
  const void* sa = w.scale;
  const void* sb = xs_t;
  cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa));
  cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb));
  const cublasStatus_t st = matmul(*p, p->algo);
  if (st != CUBLAS_STATUS_SUCCESS) return detail::lt_fail("fp8_linear_lt", "cublasLtMatmul", st);
  return true;
}

std::string fp8_linear_lt_algo(int64_t M, int64_t N, int64_t K, bool y_bf16, bool timed) {
  detail::LtCache& c = detail::lt_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  const detail::LtKind kind = timed ? detail::LtKind::kFp8BlockTimed : detail::LtKind::kFp8Block;
  const auto it = c.plans.find(detail::LtKey{int(kind), M, N, K, y_bf16});
  return it == c.plans.end() ? std::string() : detail::lt_algo_text(it->second.algo);
}

}  // namespace deepinfer::cuda
