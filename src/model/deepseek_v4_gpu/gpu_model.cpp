#include "model/deepseek_v4_gpu/gpu_model.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "model/deepseek_v4/batch.h"
#include "model/deepseek_v4/weights.h"
#include "model/deepseek_v4_gpu/forward.h"

namespace deepinfer::v4gpu {

namespace {

int64_t prefix_block(const std::vector<int64_t>& ratios) {
  int64_t b = 1;
  for (int64_t r : ratios)
    if (r > 0) b = std::lcm(b, r);
  return std::max<int64_t>(b, 16);
}

}  // namespace

v4::StateSizes gpu_state_sizes(const v4::V4Config& c) {
  v4::StateSizes s;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    s.bytes_per_sequence += static_cast<size_t>(c.window * c.head_dim) * 2;  // bf16 ring
    const int64_t r = c.ratios[l];
    if (c.attn_kinds[l] == v4::AttnKind::kSliding) continue;
    const bool csa = c.attn_kinds[l] == v4::AttnKind::kCsa;
    s.bytes_per_token += 2.0 * static_cast<double>(c.head_dim) / static_cast<double>(r);
    s.bytes_per_sequence += static_cast<size_t>(r * c.head_dim * (csa ? 2 + 2 + 2 : 2)) * 4;
    if (csa) {
      s.bytes_per_token += 2.0 * static_cast<double>(c.index_head_dim) / static_cast<double>(r);
      s.bytes_per_sequence += static_cast<size_t>(r * c.index_head_dim * 6) * 4;
    }
  }
  return s;
}

V4GpuModel::V4GpuModel(v4::V4Config cfg, GpuWeights w)
    : cfg_(std::move(cfg)), w_(std::move(w)), fwd_(std::make_unique<Forward>(cfg_, w_)) {
  info_ = {"deepseek_v4", cfg_.vocab_size, cfg_.bos_token_id, cfg_.eos_token_id, gpu_state_sizes(cfg_),
           prefix_block(cfg_.ratios)};
}

V4GpuModel::~V4GpuModel() = default;

void V4GpuModel::set_decode_graphs(bool on) { fwd_->set_graphs(on); }
Status V4GpuModel::set_tuning(const CudaTuning& t) {
  DI_TRY(t.check());
  fwd_->set_tuning(t);
  return Status::ok();
}
int64_t V4GpuModel::decode_graph_replays() const { return fwd_->graph_replays(); }
int64_t V4GpuModel::decode_graphs_captured() const { return fwd_->graphs_captured(); }
StepTimes V4GpuModel::step_times() const { return fwd_->times(); }
void V4GpuModel::reset_step_times() { fwd_->reset_times(); }

Result<std::unique_ptr<V4GpuModel>> V4GpuModel::load(const std::string& dir, const LoadOptions& opt) {
  DI_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir));
  return from_checkpoint(std::move(ck), opt);
}

Result<std::unique_ptr<V4GpuModel>> V4GpuModel::from_checkpoint(Checkpoint ck, const LoadOptions& opt) {
  if (!cuda::device_available())
    return Status::unsupported("--device cuda: no usable CUDA device on this machine");
  DI_ASSIGN_OR_RETURN(v4::V4Config cfg, v4::V4Config::from_json(ck.config(), ck.dir() + "/config.json"));
  cfg.numerics = opt.numerics;
  DI_TRY(check_gpu_config(cfg));
  // The host mapping is only read during the upload; the checkpoint is closed afterwards.
  DI_ASSIGN_OR_RETURN(v4::V4Weights hw, v4::V4Weights::load(ck, cfg));
  DI_ASSIGN_OR_RETURN(GpuWeights gw, GpuWeights::upload(hw, cfg));
  if (!cuda::synchronize()) return device_error("weight upload");
  return std::unique_ptr<V4GpuModel>(new V4GpuModel(std::move(cfg), std::move(gw)));
}

Result<std::unique_ptr<V4GpuModel>> V4GpuModel::synthetic(v4::V4Config cfg, uint64_t seed, const LoadOptions& opt) {
  if (!cuda::device_available())
    return Status::unsupported("--device cuda: no usable CUDA device on this machine");
  cfg.numerics = opt.numerics;
  DI_TRY(check_gpu_config(cfg));
  DI_ASSIGN_OR_RETURN(GpuWeights gw, GpuWeights::synthetic(cfg, seed));
  if (!cuda::synchronize()) return device_error("synthetic weights");
  return std::unique_ptr<V4GpuModel>(new V4GpuModel(std::move(cfg), std::move(gw)));
}

std::unique_ptr<ModelState> V4GpuModel::new_state() const {
  auto s = GpuSequenceState::create(cfg_);
  if (!s.is_ok()) return nullptr;
  return std::move(s).value();
}

std::optional<DeviceMemory> V4GpuModel::device_memory() const {
  size_t free = 0, total = 0;
  if (!cuda::device_memory_info(&free, &total)) return std::nullopt;
  return DeviceMemory{static_cast<int64_t>(free), static_cast<int64_t>(total)};
}

Status V4GpuModel::fill_synthetic_state(ModelState& state, int64_t length, uint64_t seed) {
  auto* st = dynamic_cast<GpuSequenceState*>(&state);
  if (!st) return Status::invalid_argument("sequence state does not belong to this deepseek_v4 CUDA model");
  return st->fill_synthetic(length, seed);
}

Result<std::vector<SeqRun>> V4GpuModel::runs_of(std::span<const ModelInput> batch) const {
  if (batch.empty()) return Status::invalid_argument("empty batch");
  std::vector<SeqRun> runs;
  std::unordered_set<const ModelState*> seen;
  for (size_t s = 0; s < batch.size(); ++s) {
    auto* st = dynamic_cast<GpuSequenceState*>(batch[s].state);
    if (!st) return Status::invalid_argument("sequence state does not belong to this deepseek_v4 CUDA model");
    if (!seen.insert(st).second)
      return Status::invalid_argument("sequence " + std::to_string(s) + ": the same state twice in one batch");
    DI_TRY(v4::check_token_ids(batch[s].tokens, cfg_.vocab_size).with_context("sequence " + std::to_string(s)));
    runs.push_back({st, batch[s].tokens, batch[s].all_logits});
  }
  return runs;
}

Status V4GpuModel::forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) {
  DI_ASSIGN_OR_RETURN(std::vector<SeqRun> runs, runs_of(batch));
  out.final_streams.clear();
  out.lent_logits = {};
  return fwd_->run(runs, out.logits, out.row_offsets, out.allow_lent_logits ? &out.lent_logits : nullptr);
}

Status V4GpuModel::forward_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                                  std::vector<SampleResult>& out) {
  if (fwd_->pending() > 0) return Status::internal("forward_sample while a launched step is not collected");
  DI_TRY(launch_sample(batch, rows));
  return collect_sample(out);
}

Status V4GpuModel::launch_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                                 std::span<const int32_t> feed) {
  DI_ASSIGN_OR_RETURN(std::vector<SeqRun> runs, runs_of(batch));
  if (rows.size() != runs.size()) return Status::invalid_argument("forward_sample needs one sampling row per sequence");
  DI_ASSIGN_OR_RETURN(HostSampling s, host_sampling(rows, cfg_.vocab_size));
  return fwd_->launch_sampled(runs, s, feed);
}

Status V4GpuModel::collect_sample(std::vector<SampleResult>& out) { return fwd_->collect_sampled(out); }

int V4GpuModel::pending_samples() const { return fwd_->pending(); }

}  // namespace deepinfer::v4gpu
