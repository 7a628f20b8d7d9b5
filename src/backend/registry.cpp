// The only file that knows whether the CUDA backend was compiled in (DI_HAS_CUDA).
#include "backend/registry.h"

#if DI_HAS_CUDA
namespace deepinfer::cuda {
std::vector<std::string> list_devices();
double measure_copy_bandwidth();
void profiler_range(bool start);
double measure_fp8_tflops();
double measure_bf16_tflops();
}
#endif

namespace deepinfer {

bool cuda_compiled_in() { return DI_HAS_CUDA != 0; }

std::vector<std::string> list_devices() {
  std::vector<std::string> out{"cpu"};
#if DI_HAS_CUDA
  for (auto& d : cuda::list_devices()) out.push_back(std::move(d));
#endif
  return out;
}

double cuda_copy_bandwidth_gb_s() {
#if DI_HAS_CUDA
  return cuda::measure_copy_bandwidth();
#else
  return 0.0;
#endif
}

double cuda_fp8_tflops() {
#if DI_HAS_CUDA
  return cuda::measure_fp8_tflops();
#else
  return 0.0;
#endif
}

double cuda_bf16_tflops() {
#if DI_HAS_CUDA
  return cuda::measure_bf16_tflops();
#else
  return 0.0;
#endif
}

void cuda_profiler_range(bool start) {
#if DI_HAS_CUDA
  cuda::profiler_range(start);
#else
  (void)start;
#endif
}

}  // namespace deepinfer
