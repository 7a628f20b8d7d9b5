// load_cuda_model in a build without the CUDA backend (see device_models.h).
#include "model/device_models.h"

#include "model/model.h"

namespace deepinfer {

Result<std::unique_ptr<Model>> load_cuda_model(const std::string& dir, const LoadOptions&) {
  return Status::unsupported("--device cuda: this build has no CUDA backend (configure with -DDI_CUDA=ON on a "
                             "machine with nvcc); cannot load " + dir);
}

Result<std::unique_ptr<Model>> synthetic_cuda_model(const v4::V4Config&, uint64_t, const LoadOptions&) {
  return Status::unsupported("a synthetic model needs the CUDA backend (configure with -DDI_CUDA=ON on a machine "
                             "with nvcc)");
}

Result<DecodeBytes> cuda_decode_bytes(const Model&, int64_t, int64_t) {
  return Status::unsupported("the decode floor of a CUDA model needs the CUDA backend");
}

Result<v4::PrefillFlops> cuda_prefill_flops(const Model&, int64_t) {
  return Status::unsupported("the prefill floor of a CUDA model needs the CUDA backend");
}

Result<v4::V4Config> cuda_v4_config(const Model&) {
  return Status::unsupported("the config of a CUDA model needs the CUDA backend");
}

Result<StepTimes> cuda_step_times(Model&, bool) {
  return Status::unsupported("step times of a CUDA model need the CUDA backend");
}

Status cuda_set_tuning(Model&, const CudaTuning&) {
  return Status::unsupported("tuning a CUDA model needs the CUDA backend");
}

}  // namespace deepinfer
