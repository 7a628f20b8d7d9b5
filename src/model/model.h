// Model: the smallest interface the CLI and the engine need to run either DeepSeek-V4
// (v4::V4Model) or DeepSeek-V4.1 (v41::V41Model): config basics, opaque per-sequence state,
// ragged forwards. load_model() dispatches on config.json's model_type.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v41/model.h"
#include "sample/sampler.h"

namespace deepinfer {

struct ModelSpec {
  std::string model_type;  // "deepseek_v4", "deepseek_v41"
  int64_t vocab_size = 0;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  v4::StateSizes state;    // per-token and per-sequence state bytes
  /// Prefix-cache granularity: a multiple of every compression ratio, so no compressor window
  /// is open at a block boundary and a state snapshot there is complete.
  int64_t prefix_block_tokens = 16;
};

/// A device's memory as its runtime reports it (Model::device_memory).
struct DeviceMemory {
  int64_t free_bytes = 0, total_bytes = 0;
};

/// One sequence's state; copies are snapshots (growing parts share blocks copy-on-write).
class ModelState {
 public:
  virtual ~ModelState() = default;
  virtual int64_t length() const = 0;  // tokens consumed
  virtual size_t bytes() const = 0;
  virtual std::unique_ptr<ModelState> clone() const = 0;
};

struct ModelInput {
  ModelState* state = nullptr;      // from the same model's new_state()
  std::span<const int32_t> tokens;  // appended at state->length()
  bool all_logits = false;          // logits for every token or only the last
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelSpec& info() const = 0;
  virtual std::unique_ptr<ModelState> new_state() const = 0;
  /// logits [rows, vocab] and row_offsets as v4::ForwardOutput.
  virtual Status forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) = 0;
  /// The memory of the device the model runs on, now (what its weights and workspaces left free),
  /// for sizing sequence state from it (EngineOptions::gpu_memory_utilization); nullopt for a
  /// model in host memory (the CPU models), the default.
  virtual std::optional<DeviceMemory> device_memory() const { return std::nullopt; }
  /// Hint: `upcoming` will be a later forward's batch (a prefill chunk not yet run, the token just
  /// sampled); a model may start reading what it needs (V4.1: Engram table rows). No effect on results.
  virtual void prefetch(std::span<const ModelInput> upcoming) { (void)upcoming; }
  /// Benchmarks only: `state` (fresh, from new_state()) as if `length` tokens had been consumed,
  /// every cached entry (window rows, compressed entries, open compressor windows) random from
  /// `seed` instead of computed. Decode steps on it then move the bytes and do the work of a real
  /// context of that length (their logits mean nothing), with no prefill to pay first. The default
  /// says unsupported.
  virtual Status fill_synthetic_state(ModelState& state, int64_t length, uint64_t seed) {
    (void)state, (void)length, (void)seed;
    return Status::unsupported("this model cannot fill a sequence state synthetically");
  }
  /// Optional: sampling where the logits are (the CUDA model: on the device, so only tokens and
  /// logprobs reach the host). rows[i] (its `logits` span unused) is sampled from batch[i]'s
  /// last logits row; out[i] is what sample_row would return with that row: the same token, the
  /// logprobs within 1e-5 (the device sums in another fixed order). Every entry's all_logits
  /// must be false.
  /// The default says unsupported; host_forward_sample() below is the same contract on the host
  /// for any model (a wrapper may use it, as the engine tests do).
  virtual bool samples_on_device() const { return false; }
  virtual Status forward_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                                std::vector<SampleResult>& out) {
    (void)batch, (void)rows, (void)out;
    return Status::unsupported("this model samples on the host only");
  }

  /// Asynchronous forward_sample, for a step loop that prepares step N+1 while step N runs:
  /// launch_sample() enqueues a step and returns; collect_sample() waits for the OLDEST launched
  /// step not yet collected and gives its results (out[i] for batch entry i, as forward_sample).
  /// Guarantees, for every implementation:
  ///  * At most two steps are launched and not yet collected; a third launch is an error.
  ///  * `feed` is empty or has one entry per batch entry: feed[i] >= 0 says that entry i's single
  ///    input token (batch[i].tokens must have size 1; its value is ignored) is the token sampled
  ///    for row feed[i] of the step launched just before this one, which must not be collected
  ///    yet; -1: the entry's tokens as given.
  ///  * A state's length() counts the tokens of every launched step from the moment
  ///    launch_sample() returns (the CPU models run the forward inside launch; the CUDA model
  ///    advances its states at launch), so the next step can be planned at once.
  ///  * batch, rows and feed are read only during the call (the caller may free them after it),
  ///    but the states must live, and must not be cloned, freed or used in forward(), until every
  ///    launched step that uses them is collected.
  ///  * Results equal forward_sample's with the fed tokens in place. A row's min_tokens and
  ///    penalties see its output_tokens as passed: they do not include a fed token.
  ///  * A failed launch leaves nothing new in flight (the steps launched before stay collectable);
  ///    a failed collect still removes its step.
  /// The default implementation keeps the results of at most two steps: launch runs
  /// forward_sample synchronously (fed tokens taken from the previous step's results) and
  /// collect returns the oldest results. So it needs no device: with forward_sample from
  /// host_forward_sample it runs the engine's overlapped loop on a CPU model (the engine tests).
  /// (Inline, like every default here: the device project links the GPU model without model.cpp.)
  virtual Status launch_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                               std::span<const int32_t> feed = {}) {
    if (pending_.size() >= 2) return Status::internal("launch_sample: two steps are already in flight; collect one first");
    if (!feed.empty() && feed.size() != batch.size())
      return Status::invalid_argument("launch_sample: feed needs one entry per batch entry (or none)");
    std::vector<ModelInput> in(batch.begin(), batch.end());
    std::vector<int32_t> fed(batch.size(), 0);
    for (size_t i = 0; i < feed.size(); ++i) {
      if (feed[i] < 0) continue;
      if (pending_.empty()) return Status::invalid_argument("launch_sample: a fed entry but no step in flight");
      const std::vector<SampleResult>& prev = pending_.back();
      if (in[i].tokens.size() != 1) return Status::invalid_argument("launch_sample: a fed entry must have one token");
      if (static_cast<size_t>(feed[i]) >= prev.size())
        return Status::invalid_argument("launch_sample: feed row " + std::to_string(feed[i]) +
                                        " is outside the previous step");
      fed[i] = prev[static_cast<size_t>(feed[i])].token;
      in[i].tokens = std::span<const int32_t>(&fed[i], 1);
    }
    std::vector<SampleResult> out;
    DI_TRY(forward_sample(in, rows, out));
    pending_.push_back(std::move(out));
    return Status::ok();
  }
  virtual Status collect_sample(std::vector<SampleResult>& out) {
    if (pending_.empty()) return Status::internal("collect_sample: no step in flight");
    out = std::move(pending_.front());
    pending_.erase(pending_.begin());
    return Status::ok();
  }
  /// Steps launched and not yet collected (0..2).
  virtual int pending_samples() const { return static_cast<int>(pending_.size()); }

 private:
  std::vector<std::vector<SampleResult>> pending_;  // the default launch/collect, oldest first
};

/// forward_sample's contract on the host for any model: m.forward() (the last logits row of
/// each entry), then sample_row() per row, so out[i] is exactly what the CPU sampler returns.
Status host_forward_sample(Model& m, std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                           std::vector<SampleResult>& out);

/// Reads dir/config.json's model_type and loads the matching model.
Result<std::unique_ptr<Model>> load_model(const std::string& dir, Backend& backend, const LoadOptions& opt = {});
/// Non-owning views of a loaded model (the model must outlive them).
std::unique_ptr<Model> model_view(v4::V4Model& m);
std::unique_ptr<Model> model_view(v41::V41Model& m);
/// A non-owning view of any Model (every call forwarded, the asynchronous ones included), e.g. to
/// run several engines one after another over one loaded model.
std::unique_ptr<Model> model_view(Model& m);

}  // namespace deepinfer
