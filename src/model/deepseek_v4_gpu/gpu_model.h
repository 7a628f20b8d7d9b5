// V4GpuModel: DeepSeek-V4-Flash on one CUDA device, behind deepinfer::Model (model/model.h), so
// the engine, score, generate and serve run it through the same loop as the CPU V4Model.
// Weights come from the loader's host mapping (v4::V4Weights) and are uploaded in their stored
// formats (gpu_weights.h); per-sequence state lives on the device (gpu_state.h).
//
// forward(): one ragged batch. Row-wise work (linears, mHC, norms, routing, experts) runs over
// every token of the batch at once; the stateful parts (window rows, compressors, indexer,
// attention) and the bf16 cuBLASLt projections (compressors, weights_proj, head) run per
// sequence, so a sequence's rows see the same GEMM shapes whatever else is in the batch. The
// decoding sequences of a batch (one token each) run their stateful work as one launch per op;
// a decode-only batch is replayed from a CUDA graph (forward.h). Everything runs on the model's
// own stream; one device-to-host copy of the logits at the end.
//
// Registration: load_model (model/model.cpp) calls load_cuda_model() for LoadOptions::device ==
// "cuda"; the function comes from model_device_cuda.cpp when the CUDA backend is built and from
// model_device_none.cpp otherwise (chosen in src/model/CMakeLists.txt: no #if outside
// src/backend).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4_gpu/decode_inputs.h"
#include "model/deepseek_v4_gpu/gpu_state.h"
#include "model/deepseek_v4_gpu/gpu_weights.h"
#include "model/device_models.h"
#include "model/model.h"

namespace deepinfer::v4gpu {

class Forward;

class V4GpuModel final : public Model {
 public:
  static Result<std::unique_ptr<V4GpuModel>> load(const std::string& dir, const LoadOptions& opt = {});
  static Result<std::unique_ptr<V4GpuModel>> from_checkpoint(Checkpoint ck, const LoadOptions& opt = {});
  /// No checkpoint: GpuWeights::synthetic(cfg, seed) (random weights generated on the device).
  static Result<std::unique_ptr<V4GpuModel>> synthetic(v4::V4Config cfg, uint64_t seed, const LoadOptions& opt = {});
  ~V4GpuModel() override;

  const ModelSpec& info() const override { return info_; }
  /// nullptr when the device has no room for another sequence.
  std::unique_ptr<ModelState> new_state() const override;
  Status fill_synthetic_state(ModelState& state, int64_t length, uint64_t seed) override;
  Status forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) override;
  /// The device's memory now (cuda::device_memory_info: the ordered pool's idle blocks count as free).
  std::optional<DeviceMemory> device_memory() const override;
  bool samples_on_device() const override { return true; }
  /// launch_sample + collect_sample; an error while a launched step is not collected.
  Status forward_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                        std::vector<SampleResult>& out) override;
  /// Asynchronous (Forward::launch_sampled): returns once the step is queued on the model's
  /// stream; fed tokens are gathered on the device.
  Status launch_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                       std::span<const int32_t> feed = {}) override;
  Status collect_sample(std::vector<SampleResult>& out) override;
  int pending_samples() const override;

  const v4::V4Config& config() const { return cfg_; }
  size_t weight_bytes() const { return w_.bytes; }
  const GpuWeights& weights() const { return w_; }
  /// Decode-only batches replayed from CUDA graphs (default on); off runs every step eagerly.
  void set_decode_graphs(bool on);
  /// Steps replayed from a graph so far, and graphs captured.
  int64_t decode_graph_replays() const;
  int64_t decode_graphs_captured() const;
  /// Wall time of the forwards by part (model/device_models.h), since the last reset.
  StepTimes step_times() const;
  void reset_step_times();
  /// Speed knobs (model/device_models.h); an error for a group size not 0/16/32/64.
  Status set_tuning(const CudaTuning& t);

 private:
  V4GpuModel(v4::V4Config cfg, GpuWeights w);
  /// The batch as the forward's runs; an error for a foreign or repeated state or a bad token id.
  Result<std::vector<SeqRun>> runs_of(std::span<const ModelInput> batch) const;

  v4::V4Config cfg_;
  GpuWeights w_;
  ModelSpec info_;
  std::unique_ptr<Forward> fwd_;
};

/// Device bytes of one sequence's state: growing parts per token, fixed parts per sequence.
v4::StateSizes gpu_state_sizes(const v4::V4Config& c);

}  // namespace deepinfer::v4gpu
