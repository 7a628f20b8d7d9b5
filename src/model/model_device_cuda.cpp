// load_cuda_model in a build with the CUDA backend (see device_models.h).
#include "model/device_models.h"

#include "model/deepseek_v4_gpu/gpu_model.h"

namespace deepinfer {

Result<std::unique_ptr<Model>> load_cuda_model(const std::string& dir, const LoadOptions& opt) {
  DI_ASSIGN_OR_RETURN(std::unique_ptr<v4gpu::V4GpuModel> m, v4gpu::V4GpuModel::load(dir, opt));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace deepinfer
