// CUDA device discovery for the backend registry. The CUDA op set arrives with issue D; this
// target exists so every build with nvcc compiles CUDA code (CI has nvcc, no GPU).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

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

}  // namespace deepinfer::cuda
