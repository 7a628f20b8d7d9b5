// Model: the smallest interface the CLI and the engine need to run either DeepSeek-V4
// (v4::V4Model) or DeepSeek-V4.1 (v41::V41Model): config basics, opaque per-sequence state,
// ragged forwards. load_model() dispatches on config.json's model_type.
#pragma once

#include <memory>
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
  /// Hint: `upcoming` will be a later forward's batch (a prefill chunk not yet run, the token just
  /// sampled); a model may start reading what it needs (V4.1: Engram table rows). No effect on results.
  virtual void prefetch(std::span<const ModelInput> upcoming) { (void)upcoming; }
  /// Optional: sampling where the logits are (the CUDA model: on the device, so only tokens and
  /// logprobs reach the host). rows[i] (its `logits` span unused) is sampled from batch[i]'s
  /// last logits row; out[i] is what sample_row would return with that row: the same token, the
  /// logprobs within 1e-5 (the device sums in another fixed order). Every entry's all_logits
  /// must be false.
  virtual bool samples_on_device() const { return false; }
  virtual Status forward_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                                std::vector<SampleResult>& out) {
    (void)batch, (void)rows, (void)out;
    return Status::unsupported("this model samples on the host only");
  }
};

/// Reads dir/config.json's model_type and loads the matching model.
Result<std::unique_ptr<Model>> load_model(const std::string& dir, Backend& backend, const LoadOptions& opt = {});
/// Non-owning views of a loaded model (the model must outlive them).
std::unique_ptr<Model> model_view(v4::V4Model& m);
std::unique_ptr<Model> model_view(v41::V41Model& m);

}  // namespace deepinfer
