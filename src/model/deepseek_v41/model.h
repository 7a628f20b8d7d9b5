// V41Model: DeepSeek-V4.1 (text) on the CPU backend, beside V4Model and sharing its blocks
// (RoPE, CpuOps, the mHC mix/collapse/expand, sink attention, grouped output projection, MoE).
// Ragged forwards like V4: several sequences, each a prefill chunk or one decode token, in one
// call; a sequence's results are bitwise independent of the rest of the batch and of how its
// tokens were chunked (fixed reduction orders everywhere). Not thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "backend/backend.h"
#include "loader/checkpoint.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v41/attention.h"
#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/state.h"
#include "model/deepseek_v41/weights.h"

namespace deepinfer::v41 {

struct SeqInput {
  V41SequenceState* state = nullptr;
  std::span<const int32_t> tokens;  // appended at state->length
  bool all_logits = false;
};

class V41Model {
 public:
  /// Loads a folder: config.json, weights, and (with Engram) engram_token_map.json unless
  /// `token_map` is given. opt.numerics.reference_rounding: the reference's kv_quant rounding.
  static Result<std::unique_ptr<V41Model>> load(const std::string& dir, Backend& backend,
                                                std::optional<std::vector<int32_t>> token_map = std::nullopt,
                                                const LoadOptions& opt = {});

  const V41Config& config() const { return cfg_; }
  const V41Weights& weights() const { return w_; }
  const EngramHasher* hasher() const { return hasher_ ? &*hasher_ : nullptr; }
  V41SequenceState new_sequence() const { return make_sequence_state(cfg_); }

  /// Validates the inputs, runs one forward and advances the states. Output as V4's.
  Status forward(std::span<const SeqInput> batch, v4::ForwardOutput& out);

  /// Engram table rows (already offset) of `tokens` appended to a sequence whose look-back is
  /// `history`: [tokens, engram layers, columns]. Token ids alone decide them, so a step's rows
  /// can be prefetched before it runs.
  std::vector<int64_t> engram_rows(const std::vector<int32_t>& history, std::span<const int32_t> tokens) const;

  /// The Engram rows a forward of `batch` reads: per Engram layer, [the batch's tokens in order,
  /// columns]. Depends on the states' look-back and the token ids only; empty without Engram.
  std::vector<std::vector<int64_t>> engram_plan(std::span<const SeqInput> batch) const;

  /// Prefetches the table rows of an upcoming batch (tokens not yet run: a prefill chunk, or the
  /// token just sampled) with prefetch_table_rows, for every Engram layer. Returns the rows advised
  /// per layer (sorted, unique). forward() does the same for its own batch before computing
  /// anything (unless disabled), so the later Engram layers' reads overlap the earlier layers.
  std::vector<std::vector<int64_t>> prefetch_engram(std::span<const SeqInput> upcoming) const;
  void set_engram_prefetch(bool on) { engram_prefetch_ = on; }

  /// The Engram rows the last forward read, per Engram layer ([tokens, columns], as engram_plan).
  const std::vector<std::vector<int64_t>>& last_engram_rows() const { return last_engram_rows_; }

 private:
  V41Model(Checkpoint ck, V41Config cfg, V41Weights w, Backend& backend);
  Status check_tokens(std::span<const int32_t> tokens) const;

  Checkpoint ck_;
  V41Config cfg_;
  V41Weights w_;
  Backend& backend_;
  v4::Rope rope_main_, rope_compress_;
  std::optional<EngramHasher> hasher_;
  bool engram_prefetch_ = true;
  std::vector<std::vector<int64_t>> last_engram_rows_;
};

}  // namespace deepinfer::v41
