// CUDA device discovery for the backend registry. The CUDA op set arrives with issue D; this
// target exists so every build with nvcc compiles CUDA code (CI has nvcc, no GPU).
#include <cuda_runtime.h>

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

}  // namespace deepinfer::cuda
