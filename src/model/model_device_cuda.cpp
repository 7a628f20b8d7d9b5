// load_cuda_model in a build with the CUDA backend (see device_models.h).
#include "model/device_models.h"

#include "model/deepseek_v4_gpu/gpu_model.h"

namespace deepinfer {

Result<std::unique_ptr<Model>> load_cuda_model(const std::string& dir, const LoadOptions& opt) {
  DI_ASSIGN_OR_RETURN(std::unique_ptr<v4gpu::V4GpuModel> m, v4gpu::V4GpuModel::load(dir, opt));
  return std::unique_ptr<Model>(std::move(m));
}

Result<std::unique_ptr<Model>> synthetic_cuda_model(const v4::V4Config& c, uint64_t seed, const LoadOptions& opt) {
  DI_ASSIGN_OR_RETURN(std::unique_ptr<v4gpu::V4GpuModel> m, v4gpu::V4GpuModel::synthetic(c, seed, opt));
  return std::unique_ptr<Model>(std::move(m));
}

Result<DecodeBytes> cuda_decode_bytes(const Model& model, int64_t batch, int64_t context) {
  const auto* m = dynamic_cast<const v4gpu::V4GpuModel*>(&model);
  if (!m) return Status::invalid_argument("the decode floor is computed for the deepseek_v4 CUDA model only");
  const v4::V4Config& c = m->config();
  const v4gpu::GpuWeights& w = m->weights();
  DecodeBytes b;
  const double B = static_cast<double>(batch);
  const double distinct = v4::expected_distinct_experts(c, batch);
  double all_experts = 0, tables = 0;
  for (const v4gpu::GpuLayer& L : w.layers) {
    double one = 0;
    for (const v4gpu::DeviceBuffer& e : L.experts) all_experts += static_cast<double>(e.bytes());
    if (!L.experts.empty()) one = static_cast<double>(L.experts.front().bytes());
    b.experts += distinct * one;
    tables += static_cast<double>(L.tid2eid.bytes());
  }
  b.dense = static_cast<double>(w.bytes) - all_experts - static_cast<double>(w.embed.bytes()) - tables;
  b.state = B * v4::decode_state_bytes_per_sequence(c, context);
  b.weights = static_cast<double>(w.bytes);
  return b;
}

Result<v4::PrefillFlops> cuda_prefill_flops(const Model& model, int64_t tokens_per_prompt) {
  const auto* m = dynamic_cast<const v4gpu::V4GpuModel*>(&model);
  if (!m) return Status::invalid_argument("the prefill floor is computed for the deepseek_v4 CUDA model only");
  return v4::prefill_flops(m->config(), tokens_per_prompt);
}

Result<v4::V4Config> cuda_v4_config(const Model& model) {
  const auto* m = dynamic_cast<const v4gpu::V4GpuModel*>(&model);
  if (!m) return Status::invalid_argument("not a deepseek_v4 CUDA model");
  return m->config();
}

Result<StepTimes> cuda_step_times(Model& model, bool reset) {
  auto* m = dynamic_cast<v4gpu::V4GpuModel*>(&model);
  if (!m) return Status::invalid_argument("step times are kept by the deepseek_v4 CUDA model only");
  const StepTimes t = m->step_times();
  if (reset) m->reset_step_times();
  return t;
}

Status cuda_set_tuning(Model& model, const CudaTuning& t) {
  auto* m = dynamic_cast<v4gpu::V4GpuModel*>(&model);
  if (!m) return Status::invalid_argument("tuning applies to the deepseek_v4 CUDA model only");
  return m->set_tuning(t);
}

}  // namespace deepinfer
