// Sampler: chooses the next token of each row from host float logits. Per row it is a pure
// function of (logits, params, the sample's token history, position, rng key): no state, no
// global RNG, so a row's token and logprobs are bitwise the same alone, in any batch, in any row
// order and on any thread (batch invariance, FEATURES.md section 2).
//
// Order of operations (vLLM's sampler):
//   1. logit_bias is added; while fewer than min_tokens tokens have been generated, EOS and
//      stop_token_ids are set to -inf (vLLM's MinTokensLogitsProcessor);
//   2. penalties, vLLM semantics (model_executor/layers/utils.py apply_penalties):
//      repetition: over tokens seen in prompt or output, logit > 0 ? logit / r : logit * r;
//      frequency:  logit -= frequency_penalty * (count of the token in the output);
//      presence:   logit -= presence_penalty * (1 if the token is in the output);
//   3. temperature < kGreedyTemperature: the argmax of these logits (lowest id on ties). Else:
//   4. logits / temperature; top_k (keep values >= the k-th largest, so ties at the k-th are
//      kept, as vLLM); top_p (sort by prob desc, ties by lower id, keep the shortest prefix whose
//      mass reaches top_p of the top_k survivors; the top token always stays); min_p (keep
//      p >= min_p * p_max). This is the brief's / vLLM v0 order; vLLM v1 applies min_p before
//      top_k/top_p, which differs only in which mass top_p measures.
//   5. sample by inverse CDF: one uniform u = rng_uniform(key, position) in [0, 1); walk the
//      survivors in ascending id order, accumulating w = expf(logit/T - max) in double; pick the
//      first whose running sum exceeds u * total. (Tokens whose w underflows to 0 are dropped.) One draw per token instead of one per vocabulary
//      entry (Gumbel-max), and the same law.
//
// Logprobs are those of the model's raw distribution: log_softmax of the unmodified logits row
// (vLLM's default logprobs_mode "raw_logprobs"), not of the biased / penalised / truncated one.
// The chosen token's logprob is reported even if penalties or bias made it unlikely.
//
// Non-finite logits: NaN is treated as -inf. If every token ends up -inf (for example all ids are
// stop ids under min_tokens), the raw argmax is chosen, so sampling never fails.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sample/rng.h"
#include "sample/sampling_params.h"

namespace deepinfer {

class ThreadPool;

/// One row to sample: views into memory the caller owns for the duration of the call.
struct SampleRow {
  std::span<const float> logits;           // [vocab_size] raw model logits
  const SamplingParams* params = nullptr;  // validated against vocab_size
  std::span<const int32_t> prompt_tokens;  // the request's prompt (repetition penalty)
  std::span<const int32_t> output_tokens;  // this sample's generated tokens so far (all penalties)
  std::span<const int32_t> eos_token_ids;  // masked with stop_token_ids under min_tokens
  RngKey rng;                              // seed from resolve_seed, sample index for n > 1
  /// Counter for the random draw: the index of the token being sampled in this sample's output
  /// (output_tokens.size() in plain decoding). Must not depend on batching or chunking.
  int64_t position = 0;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;                                // raw logprob of `token` (if params.logprobs)
  std::vector<std::pair<int32_t, float>> top_logprobs;  // best first, ties by lower id
};

/// Steps 1-2: writes the processed logits of `row` into `out` ([vocab_size]).
void apply_logits_processors(const SampleRow& row, std::span<float> out);

/// The final sampling distribution after steps 1-4: probs[i] (sums to 1; one-hot for greedy).
/// For tests and for speculative-decoding acceptance, which needs the target's probabilities.
void sampling_probs(const SampleRow& row, std::span<double> probs);

/// Samples one row. Thread-safe; allocates its scratch per call.
SampleResult sample_row(const SampleRow& row);

/// Samples every row, in parallel over rows when `pool` is given. out[i] is bitwise what
/// sample_row(rows[i]) returns, whatever the batch.
void sample_batch(std::span<const SampleRow> rows, std::span<SampleResult> out,
                  ThreadPool* pool = nullptr);

}  // namespace deepinfer
