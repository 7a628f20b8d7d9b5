// CUDA device discovery for the backend registry, and the device rates `deepinfer bench` puts its
// floors on (copy bandwidth, FP8 and bf16 tensor rates), measured in the same run.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/layer_ops.h"
#include "backend/cuda/model_ops.h"

namespace deepinfer::cuda {

std::vector<std::string> list_devices() {
  std::vector<std::string> out;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    char buf[256];
    std::snprintf(buf, sizeof(buf), "cuda:%d %s (sm_%d%d, %.1f GiB)", i, p.name, p.major, p.minor,
                  static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    out.emplace_back(buf);
  }
  return out;
}

// Device-to-device copy bandwidth of the current device (GB/s, bytes read + written): 1 GiB
// copied between two buffers, best of 3 after a warm-up copy, timed with events. 0 on failure
// (no device, no room for 2 GiB).
double measure_copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  double best = 0;
  if (cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
      cudaMemset(a, 1, bytes) == cudaSuccess && cudaEventCreate(&e0) == cudaSuccess &&
      cudaEventCreate(&e1) == cudaSuccess && cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess) {
    for (int rep = 0; rep < 3; ++rep) {
      float ms = 0;
      if (cudaEventRecord(e0) != cudaSuccess || cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice) != cudaSuccess ||
          cudaEventRecord(e1) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
          cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess || ms <= 0)
        break;
      best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
    }
  }
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (a) cudaFree(a);
  if (b) cudaFree(b);
  cudaGetLastError();  // a failed allocation must not stay as the next call's error
  return best;
}

namespace {

constexpr int64_t kRateN = 8192;  // the rates' GEMM: kRateN^3

// Best TFLOP/s of one kRateN^3 GEMM (`run`) over 10 runs timed with events after 3 warm-ups (the
// first builds the cuBLASLt plan; a plan for this shape stays in the process's cache). 0 when a
// run fails.
template <class Run>
double best_gemm_tflops(Run&& run) {
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  double best = 0;
  bool ok = cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess;
  for (int rep = 0; ok && rep < 3; ++rep) ok = run();
  ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  for (int rep = 0; ok && rep < 10; ++rep) {
    float ms = 0;
    ok = cudaEventRecord(e0) == cudaSuccess && run() && cudaEventRecord(e1) == cudaSuccess &&
         cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms > 0;
    const double n = static_cast<double>(kRateN);
    if (ok) best = std::max(best, 2.0 * n * n * n / (ms * 1e-3) / 1e12);
  }
  cudaDeviceSynchronize();  // nothing may still run when the caller frees the buffers
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  return ok ? best : 0.0;
}

void free_all(std::initializer_list<void*> ptrs) {
  for (void* p : ptrs)
    if (p) cudaFree(p);
  cudaGetLastError();  // a failed allocation must not stay as the next call's error
}

}  // namespace

// Dense FP8 tensor rate of the current device (TFLOP/s): y[n, n] = x . W^T at n = 8192 through
// fp8_linear_lt (the prefill path's block-scaled cuBLASLt GEMM), random E4M3 weight with E8M0
// 128x128 scales, a bf16 activation quantised by quantize_act_fp8_t, bf16 out (best_gemm_tflops).
// As bench/cuda_model/floors.cpp measure_fp8_rate, with buffers of its own (cudaMalloc, ~0.5 GB,
// freed). 0 on failure (no device, no memory, no cuBLASLt algorithm).
double measure_fp8_tflops() {
  const int64_t n = kRateN, nb = n / 128;
  const size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n), nbb = static_cast<size_t>(nb * nb);
  if (!device_available()) return 0;
  uint8_t *wd = nullptr, *ws = nullptr, *q = nullptr;
  float *wf = nullptr, *qs = nullptr;
  uint16_t *x = nullptr, *y = nullptr;
  void* lt_ws = nullptr;
  bool ok = cudaMalloc(&wd, nn) == cudaSuccess && cudaMalloc(&ws, nbb) == cudaSuccess &&
            cudaMalloc(&wf, nbb * sizeof(float)) == cudaSuccess && cudaMalloc(&x, nn * 2) == cudaSuccess &&
            cudaMalloc(&q, nn) == cudaSuccess && cudaMalloc(&qs, nn / 128 * sizeof(float)) == cudaSuccess &&
            cudaMalloc(&y, nn * 2) == cudaSuccess && cudaMalloc(&lt_ws, fp8_linear_lt_workspace_bytes()) == cudaSuccess;
  Fp8Weight w;
  w.data = wd, w.scale = ws, w.n = n, w.k = n;
  ok = ok && fill_random(wd, n * n, RandomKind::kE4M3, 1.f, 0.f, 11) &&
       fill_random(ws, nb * nb, RandomKind::kE8M0, 120, 122, 12) && fp8_scales_to_f32(w, wf);
  w.scale = wf, w.scale_is_f32 = true;
  ok = ok && fill_random(x, n * n, RandomKind::kBf16, 1.f, 0.f, 13) && quantize_act_fp8_t(x, true, n, n, q, qs);
  const double best = ok ? best_gemm_tflops([&] { return fp8_linear_lt(q, qs, n, w, y, true, lt_ws); }) : 0.0;
  free_all({wd, ws, wf, x, q, qs, y, lt_ws});
  return best;
}

// Dense bf16 tensor rate of the current device (TFLOP/s): y[n, n] = x . W^T at n = 8192 through
// bf16_linear_lt (the bf16 projections' cuBLASLt GEMM), random bf16 operands, bf16 out
// (best_gemm_tflops; ~0.4 GB of buffers, freed). 0 on failure.
double measure_bf16_tflops() {
  const int64_t n = kRateN;
  const size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n);
  if (!device_available()) return 0;
  uint16_t *x = nullptr, *w = nullptr, *y = nullptr;
  void* lt_ws = nullptr;
  bool ok = cudaMalloc(&x, nn * 2) == cudaSuccess && cudaMalloc(&w, nn * 2) == cudaSuccess &&
            cudaMalloc(&y, nn * 2) == cudaSuccess && cudaMalloc(&lt_ws, fp8_linear_lt_workspace_bytes()) == cudaSuccess;
  ok = ok && fill_random(x, n * n, RandomKind::kBf16, 1.f, 0.f, 21) && fill_random(w, n * n, RandomKind::kBf16, 0.02f, 0.f, 22);
  const double best = ok ? best_gemm_tflops([&] { return bf16_linear_lt(x, n, w, n, n, y, true, lt_ws); }) : 0.0;
  free_all({x, w, y, lt_ws});
  return best;
}

// The profiler's recording span (registry.h cuda_profiler_range); errors (no device) are dropped.
void profiler_range(bool start) {
  if (start ? cudaProfilerStart() != cudaSuccess : cudaProfilerStop() != cudaSuccess) cudaGetLastError();
}

}  // namespace deepinfer::cuda
