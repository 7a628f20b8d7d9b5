// V4Model: DeepSeek-V4-Flash on the CPU backend. Loads a checkpoint folder, creates
// per-sequence state, and runs ragged forwards: several sequences, each a prefill chunk or one
// decode token, in one call. Results of a sequence are bitwise independent of the rest of the
// batch and of how its tokens were chunked (fixed reduction orders everywhere).
// Not thread-safe: one forward at a time (it uses the backend's thread pool).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "backend/backend.h"
#include "loader/checkpoint.h"
#include "model/deepseek_v4/batch.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/state.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::v4 {

struct SeqInput {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;  // appended at state->length
  bool all_logits = false;          // logits for every token (scoring) or only the last
};

struct ForwardOutput {
  std::vector<float> logits;  // [rows, vocab]: per sequence, all tokens or the last one, in order
  std::vector<int64_t> row_offsets;  // first logits row of each sequence
  std::vector<float> final_streams;  // [N, hc, d] before hc_head (when requested; feeds MTP)
  /// Set by the caller: the model may lend its own host buffer instead of filling `logits` (the
  /// CUDA model: pinned memory the device copies into at full speed, no copy into `logits`).
  bool allow_lent_logits = false;
  std::span<const float> lent_logits;  // the lent logits, valid until the model's next forward
  /// The logits, wherever they are.
  std::span<const float> rows() const {
    return lent_logits.empty() ? std::span<const float>(logits) : lent_logits;
  }
};

class V4Model {
 public:
  static Result<std::unique_ptr<V4Model>> load(const std::string& dir, Backend& backend,
                                               const LoadOptions& opt = {});
  static Result<std::unique_ptr<V4Model>> from_checkpoint(Checkpoint ck, Backend& backend,
                                                          const LoadOptions& opt = {});

  const V4Config& config() const { return cfg_; }
  const V4Weights& weights() const { return w_; }
  bool has_mtp() const { return w_.mtp.has_value(); }
  SequenceState new_sequence() const { return make_sequence_state(cfg_, has_mtp()); }

  /// Validates the inputs (token ids, non-empty), then runs one forward and advances the states.
  Status forward(std::span<const SeqInput> batch, ForwardOutput& out, bool keep_final_streams = false);

  /// MTP head (V4-MODEL.md 2.10) for one sequence: for tokens t = state.mtp_length..., takes the
  /// main model's final streams X_t [n, hc, d] and the id of token t+1, returns logits for t+2
  /// [n, vocab]. Positions continue the sequence's MTP window state.
  Status mtp_forward(SequenceState& state, std::span<const float> streams, std::span<const int32_t> next_tokens,
                     std::vector<float>& logits);

  /// Building blocks, public so tests can compose independent computations from them.
  void block_forward(const BlockWeights& bw, const BatchLayout& layout, std::span<LayerState* const> states,
                     const int32_t* ids, std::vector<float>& X);
  void head_logits(const HcHeadWeights& hc, const std::vector<float>& norm, const float* X, int64_t rows,
                   float* logits);
  CpuOps& ops() { return backend_.ops(); }

 private:
  V4Model(Checkpoint ck, V4Config cfg, V4Weights w, Backend& backend);
  Status check_tokens(std::span<const int32_t> tokens) const;

  Checkpoint ck_;  // keeps the mapped files alive
  V4Config cfg_;
  V4Weights w_;
  Backend& backend_;
  Rope rope_main_, rope_compress_;
};

}  // namespace deepinfer::v4
