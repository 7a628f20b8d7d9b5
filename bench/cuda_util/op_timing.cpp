#include "op_timing.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <random>

namespace deepinfer::bench {

void* dalloc(size_t n, cudaStream_t s, bool fill) {
  void* p = nullptr;
  n = std::max<size_t>(n, 256);
  CK(cudaMalloc(&p, n));
  if (fill) {
    OK(deepinfer::cuda::fill_random_bytes(p, (n / 4) * 4, reinterpret_cast<uintptr_t>(p), s));
    CK(cudaStreamSynchronize(s));
  }
  return p;
}

double time_graph(cudaStream_t s, int reps, const std::function<void(int)>& body, bool use_graph, int replays) {
  for (int i = 0; i < 2; ++i) body(i);  // warm-up (module load, handles)
  CK(cudaStreamSynchronize(s));
  cudaGraphExec_t exec = nullptr;
  if (use_graph) {
    cudaGraph_t graph;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < reps; ++i) body(i);
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    CK(cudaGraphDestroy(graph));
    CK(cudaGraphLaunch(exec, s));
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < replays; ++r) {
    CK(cudaEventRecord(a, s));
    if (use_graph)
      CK(cudaGraphLaunch(exec, s));
    else
      for (int i = 0; i < reps; ++i) body(i);
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t / reps);
  }
  if (exec) CK(cudaGraphExecDestroy(exec));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int rotation(size_t bytes_per_call, int max_sets) {
  const size_t target = size_t(512) << 20;
  return static_cast<int>(std::clamp<size_t>((target + bytes_per_call - 1) / bytes_per_call, 1, max_sets));
}

double measure_copy_rate(cudaStream_t s) {
  const size_t n = size_t(2) << 30;
  void* a = dalloc(n, s);
  void* b = dalloc(n, s);
  const double ms = time_graph(s, 5, [&](int) { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s)); }, false);
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * n / (ms * 1e-3);
}

double measure_fp8_gemm_rate(cudaStream_t s) {
  const int n = 8192;
  std::vector<uint8_t> h(size_t(n) * n);
  std::mt19937 rng(5);
  for (auto& v : h) {
    v = static_cast<uint8_t>(rng());
    if ((v & 0x7f) == 0x7f) v ^= 1;  // no NaN codes
  }
  uint8_t* x8 = upload(h, s);
  uint8_t* w8 = upload(h, s);
  void* y = dalloc(size_t(n) * n * 2, s, false);
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  const cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
  const size_t wsz = size_t(64) << 20;
  const bool ok =
      cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof(tA)) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof(tB)) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, n, n, n) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, n, n, n) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, n, n) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof(wsz)) ==
          CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &heur, &found) == CUBLAS_STATUS_SUCCESS &&
      found > 0;
  double rate = 0;
  if (ok) {
    void* ws = dalloc(wsz, s, false);
    const float one = 1.f, zero = 0.f;
    const double ms = time_graph(
        s, 5,
        [&](int) { cublasLtMatmul(lt, desc, &one, w8, la, x8, lb, &zero, y, lc, y, lc, &heur.algo, ws, wsz, s); },
        false);
    rate = 2.0 * n * n * double(n) / (ms * 1e-3);
    CK(cudaFree(ws));
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  for (auto l : {la, lb, lc})
    if (l) cublasLtMatrixLayoutDestroy(l);
  if (desc) cublasLtMatmulDescDestroy(desc);
  if (lt) cublasLtDestroy(lt);
  for (void* p : {static_cast<void*>(x8), static_cast<void*>(w8), y}) CK(cudaFree(p));
  return rate;
}

}  // namespace deepinfer::bench
