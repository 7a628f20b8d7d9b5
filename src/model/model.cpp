#include "model/model.h"

#include "model/device_models.h"

#include <algorithm>
#include <numeric>

namespace deepinfer {

Status host_forward_sample(Model& m, std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                           std::vector<SampleResult>& out) {
  if (rows.size() != batch.size()) return Status::invalid_argument("forward_sample needs one sampling row per sequence");
  for (const ModelInput& b : batch)
    if (b.all_logits) return Status::invalid_argument("forward_sample takes the last logits row of each sequence only");
  v4::ForwardOutput fo;
  fo.allow_lent_logits = true;
  DI_TRY(m.forward(batch, fo));
  const size_t V = static_cast<size_t>(m.info().vocab_size);
  const std::span<const float> logits = fo.rows();
  out.assign(rows.size(), {});
  for (size_t i = 0; i < rows.size(); ++i) {
    SampleRow row = rows[i];
    row.logits = logits.subspan(static_cast<size_t>(fo.row_offsets[i]) * V, V);
    out[i] = sample_row(row);
  }
  return Status::ok();
}

namespace {

template <class State>
class StateOf final : public ModelState {
 public:
  explicit StateOf(State s) : s_(std::move(s)) {}
  int64_t length() const override { return s_.length; }
  size_t bytes() const override { return s_.bytes(); }
  std::unique_ptr<ModelState> clone() const override { return std::make_unique<StateOf>(s_); }
  State& get() { return s_; }

 private:
  State s_;
};

// Adapts a concrete model (V4Model, V41Model) to Model; owns it or not.
template <class M, class State, class Input>
class ModelOf final : public Model {
 public:
  ModelOf(M* m, std::unique_ptr<M> owned, ModelSpec info) : m_(m), owned_(std::move(owned)), info_(std::move(info)) {}
  const ModelSpec& info() const override { return info_; }
  std::unique_ptr<ModelState> new_state() const override { return std::make_unique<StateOf<State>>(m_->new_sequence()); }
  Status forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) override {
    std::vector<Input> in;
    in.reserve(batch.size());
    for (const ModelInput& b : batch) {
      auto* s = dynamic_cast<StateOf<State>*>(b.state);
      if (!s) return Status::invalid_argument("sequence state does not belong to this " + info_.model_type + " model");
      in.push_back({&s->get(), b.tokens, b.all_logits});
    }
    return m_->forward(in, out);
  }
  void prefetch(std::span<const ModelInput> upcoming) override {
    if constexpr (requires(std::span<const Input> in) { m_->prefetch_engram(in); }) {
      std::vector<Input> in;
      for (const ModelInput& b : upcoming) {
        auto* s = dynamic_cast<StateOf<State>*>(b.state);
        if (!s) return;
        in.push_back({&s->get(), b.tokens, b.all_logits});
      }
      (void)m_->prefetch_engram(in);
    }
  }

 private:
  M* m_;
  std::unique_ptr<M> owned_;
  ModelSpec info_;
};

int64_t block_for(const std::vector<int64_t>& ratios) {
  int64_t b = 1;
  for (int64_t r : ratios)
    if (r > 0) b = std::lcm(b, r);
  return std::max<int64_t>(b, 16);
}

ModelSpec info_of(const v4::V4Model& m) {
  const v4::V4Config& c = m.config();
  return {"deepseek_v4", c.vocab_size, c.bos_token_id, c.eos_token_id, v4::state_sizes(c, m.has_mtp()),
          block_for(c.ratios)};
}
ModelSpec info_of(const v41::V41Model& m) {
  const v41::V41Config& c = m.config();
  return {"deepseek_v41", c.vocab_size, c.bos_token_id, c.eos_token_id, v41::state_sizes(c), block_for(c.ratios)};
}

using V4Adapter = ModelOf<v4::V4Model, v4::SequenceState, v4::SeqInput>;
using V41Adapter = ModelOf<v41::V41Model, v41::V41SequenceState, v41::SeqInput>;

}  // namespace

Result<std::unique_ptr<Model>> load_model(const std::string& dir, Backend& backend, const LoadOptions& opt) {
  DI_ASSIGN_OR_RETURN(nlohmann::json cfg, Checkpoint::read_json(dir + "/config.json"));
  const std::string type = cfg.is_object() && cfg.contains("model_type") && cfg["model_type"].is_string()
                               ? cfg["model_type"].get<std::string>() : "";
  if (opt.device != "cpu") {
    if (opt.device != "cuda")
      return Status::invalid_argument("device '" + opt.device + "' is not one of cpu, cuda");
    if (type != "deepseek_v4")
      return Status::unsupported(dir + "/config.json: model_type '" + type + "' has no CUDA model (deepseek_v4 only)");
    return load_cuda_model(dir, opt);
  }
  if (type == "deepseek_v41") {
    DI_ASSIGN_OR_RETURN(std::unique_ptr<v41::V41Model> m, v41::V41Model::load(dir, backend, std::nullopt, opt));
    v41::V41Model* p = m.get();
    ModelSpec info = info_of(*p);
    return std::unique_ptr<Model>(new V41Adapter(p, std::move(m), std::move(info)));
  }
  if (type == "deepseek_v4") {
    DI_ASSIGN_OR_RETURN(std::unique_ptr<v4::V4Model> m, v4::V4Model::load(dir, backend, opt));
    v4::V4Model* p = m.get();
    ModelSpec info = info_of(*p);
    return std::unique_ptr<Model>(new V4Adapter(p, std::move(m), std::move(info)));
  }
  return Status::invalid_argument(dir + "/config.json: model_type '" + type +
                                  "' is not supported (deepseek_v4 or deepseek_v41)");
}

std::unique_ptr<Model> model_view(v4::V4Model& m) { return std::make_unique<V4Adapter>(&m, nullptr, info_of(m)); }
std::unique_ptr<Model> model_view(v41::V41Model& m) { return std::make_unique<V41Adapter>(&m, nullptr, info_of(m)); }

namespace {

class ModelRef final : public Model {
 public:
  explicit ModelRef(Model& m) : m_(m) {}
  const ModelSpec& info() const override { return m_.info(); }
  std::unique_ptr<ModelState> new_state() const override { return m_.new_state(); }
  Status forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) override { return m_.forward(batch, out); }
  void prefetch(std::span<const ModelInput> upcoming) override { m_.prefetch(upcoming); }
  std::optional<DeviceMemory> device_memory() const override { return m_.device_memory(); }
  bool samples_on_device() const override { return m_.samples_on_device(); }
  Status forward_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                        std::vector<SampleResult>& out) override {
    return m_.forward_sample(batch, rows, out);
  }
  Status launch_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                       std::span<const int32_t> feed) override {
    return m_.launch_sample(batch, rows, feed);
  }
  Status collect_sample(std::vector<SampleResult>& out) override { return m_.collect_sample(out); }
  int pending_samples() const override { return m_.pending_samples(); }

 private:
  Model& m_;
};

}  // namespace

std::unique_ptr<Model> model_view(Model& m) { return std::make_unique<ModelRef>(m); }

}  // namespace deepinfer
