// load_cuda_model in a build without the CUDA backend (see device_models.h).
#include "model/device_models.h"

#include "model/model.h"

namespace deepinfer {

Result<std::unique_ptr<Model>> load_cuda_model(const std::string& dir, const LoadOptions&) {
  return Status::unsupported("--device cuda: this build has no CUDA backend (configure with -DDI_CUDA=ON on a "
                             "machine with nvcc); cannot load " + dir);
}

}  // namespace deepinfer
