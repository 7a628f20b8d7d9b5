// Sequence: one sample of one request inside the engine (a request with n > 1 has n of them).
// Holds the token history (prompt + generated), how much of it the model state has consumed,
// and the per-sample stop logic. append() samples the next token from a logits row, streams it,
// and says whether the sample finished (EOS, stop id, stop string, max_tokens, context). With a
// grammar (structured outputs), tokens it does not allow next are masked out before sampling.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_client.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "sched/scheduler.h"

namespace deepinfer {

namespace tokenizer {
class Tokenizer;
class IncrementalDecoder;
}  // namespace tokenizer
class StopMatcher;
namespace grammar {
class Matcher;
}

struct RequestCtx {
  EngineRequest req;
  std::shared_ptr<RequestStream> stream;
  std::chrono::steady_clock::time_point submitted;
  std::atomic<bool> cancelled{false};
  int remaining = 0;  // samples not finished yet (engine thread only)
};

struct FinishInfo {
  std::string reason;  // "stop" or "length"
  std::optional<std::string> stop_string;
};

class Sequence {
 public:
  Sequence(std::shared_ptr<RequestCtx> ctx, int sample_index, int64_t max_tokens, int32_t eos,
           const tokenizer::Tokenizer* tokenizer);
  ~Sequence();

  /// Samples from `logits` (the row after the last token), appends and streams the token.
  std::optional<FinishInfo> append(std::span<const float> logits);
  /// The sampler's row for the next token, logits not set (parameters, token history, rng key,
  /// position): for a model that samples on its device (Model::forward_sample). Valid until the
  /// sequence changes. ahead > 0: the row of the token after `ahead` tokens not appended yet
  /// (sampled by steps still in flight): its position counts them, its output_tokens do not, so
  /// it is exact only when feedable().
  SampleRow next_row(int64_t ahead = 0) const;
  /// Whether the next token can be sampled before the latest one reaches the host: no grammar
  /// (its mask follows every token), no repetition / presence / frequency penalty (they count
  /// the output tokens), and min_tokens already reached (its EOS mask counts them).
  bool feedable() const;
  /// Whether the sample certainly finishes by length once it has `generated` tokens (max_tokens,
  /// the context limit), whatever the tokens are.
  bool ends_by_length(int64_t generated) const;
  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  /// Appends and streams a token sampled from next_row() elsewhere; whether the sample finished.
  std::optional<FinishInfo> accept(SampleResult r);
  /// Structured outputs: computes the grammar mask for the next token from the matcher's current
  /// state (it depends only on tokens already accepted), so the engine can run it while the
  /// forward that produces the logits is in flight. append() uses it; without it, append()
  /// computes the mask itself. No-op without an active grammar.
  void prepare_mask();
  bool needs_mask() const;
  /// Prompt logprobs (sampling.prompt_logprobs >= 0) are owed for prompt tokens prompt_lp_next ..
  /// prompt_len - 1. A step over them must return every logits row (ModelInput::all_logits), and
  /// a state restored from the prefix cache must not start past token prompt_lp_next - 1, whose
  /// row gives the first one owed.
  bool owes_prompt_logprobs() const { return prompt_lp_next < prompt_len; }
  /// From the logits rows of a step that consumed tokens [first, first + rows): streams the
  /// logprobs they give of owed prompt tokens (row i gives token first + i + 1).
  void emit_prompt_logprobs(int64_t first, std::span<const float> rows, int64_t vocab);

  std::shared_ptr<RequestCtx> ctx;
  int sample_index = 0;
  std::vector<int32_t> tokens;  // prompt + generated
  int64_t prompt_len = 0;
  SchedKey key;
  std::unique_ptr<ModelState> state;  // null while waiting or preempted
  int64_t computed = 0;       // tokens consumed by `state`
  int64_t cached_tokens = 0;  // prompt tokens restored from the prefix cache
  int64_t state_bytes = 0;    // accounted against the engine's capacity
  int64_t prompt_lp_next = 0;  // the first prompt token whose logprob is still owed (owes_prompt_logprobs)
  bool finished = false;
  std::optional<std::chrono::steady_clock::time_point> first_token_at;
  // Overlapped step loop (engine thread): tokens that launched, not yet collected steps will
  // append (0..2), the id of the latest launched step with this sequence (0: none) and its row
  // (batch entry) in that step.
  int64_t unsampled = 0;
  uint64_t last_step = 0;
  int32_t last_row = -1;

 private:
  std::optional<FinishInfo> check_stop(int32_t token);

  int64_t max_tokens_;
  int32_t eos_;
  int32_t eos_ids_[1];  // the sampler's eos_token_ids
  std::unique_ptr<tokenizer::IncrementalDecoder> detok_;  // only with stop strings
  std::unique_ptr<StopMatcher> stops_;
  std::unique_ptr<grammar::Matcher> matcher_;  // structured outputs
  bool grammar_active_ = false;                // false until grammar_start_token was generated
  std::vector<uint32_t> bitmask_;
  bool mask_ready_ = false;
  std::vector<float> masked_;
};

class SequenceFactory {
 public:
  SequenceFactory(std::unique_ptr<tokenizer::Tokenizer> tokenizer, int32_t eos, int64_t max_context);
  ~SequenceFactory();
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  std::unique_ptr<Sequence> make(std::shared_ptr<RequestCtx> ctx, int sample_index) const;

 private:
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  int32_t eos_;
  int64_t max_context_;
};

}  // namespace deepinfer
