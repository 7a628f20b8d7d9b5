// SamplingParams: the typed per-request sampling options of the OpenAI / vLLM API. A plain value
// type; the server fills it from JSON and calls validate() before the engine sees the request, so
// nothing a client sends reaches a DI_CHECK in the sampler. Defaults match vLLM's SamplingParams.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer {

/// Limits enforced by SamplingParams::validate (OpenAI's / vLLM's defaults).
inline constexpr int32_t kMaxTopLogprobs = 20;        // OpenAI top_logprobs is 0..20
inline constexpr float kMaxAbsLogitBias = 100.0f;     // OpenAI logit_bias is -100..100
inline constexpr float kMaxAbsPresenceFrequency = 2.0f;  // OpenAI/vLLM: -2..2
inline constexpr int32_t kMaxSamplesPerRequest = 128; // n; the engine may enforce less
/// Temperatures below this are greedy (vLLM's _SAMPLING_EPS).
inline constexpr float kGreedyTemperature = 1e-5f;

struct SamplingParams {
  // Distribution shaping, applied in this order (see sampler.h): logit_bias, min_tokens mask,
  // penalties, temperature, top_k, top_p, min_p.
  float temperature = 1.0f;          // >= 0; < kGreedyTemperature means greedy (argmax)
  int32_t top_k = 0;                 // 0 or -1: off; >= 1 keeps the k largest (ties at the k-th kept)
  float top_p = 1.0f;                // (0, 1]; 1: off
  float min_p = 0.0f;                // [0, 1]; 0: off; keeps p >= min_p * p_max
  float repetition_penalty = 1.0f;   // > 0; 1: off; over prompt + output tokens
  float presence_penalty = 0.0f;     // [-2, 2]; over output tokens
  float frequency_penalty = 0.0f;    // [-2, 2]; over output tokens
  std::map<int32_t, float> logit_bias;  // token id -> bias added to its logit, [-100, 100]

  // Stopping.
  std::vector<std::string> stop;        // stop strings (non-empty); not included in the output
  std::vector<int32_t> stop_token_ids;  // stop ids, in addition to EOS
  std::optional<int64_t> max_tokens;    // >= 1; nullopt: up to the context limit (engine checks)
  int64_t min_tokens = 0;               // EOS and stop ids are masked until this many are generated
  bool ignore_eos = false;              // do not stop at EOS (it can still be sampled)

  // Output.
  int32_t n = 1;                 // independent samples of the same prompt, 1..kMaxSamplesPerRequest
  bool logprobs = false;         // report the chosen token's logprob
  int32_t top_logprobs = 0;      // 0..kMaxTopLogprobs alternatives per token; needs logprobs
  /// vLLM's prompt_logprobs: -1 off; k in 0..kMaxTopLogprobs: each prompt token's logprob given
  /// the tokens before it (the first token has none), its rank and k alternatives.
  int32_t prompt_logprobs = -1;
  std::optional<uint64_t> seed;  // nullopt: the engine draws one at admission (resolve_seed)

  bool is_greedy() const { return temperature < kGreedyTemperature; }

  /// kInvalidArgument naming the field and the value for anything out of range, as an OpenAI /
  /// vLLM server rejects it (HTTP 400). `vocab_size` bounds logit_bias and stop_token_ids.
  Status validate(int64_t vocab_size) const;
};

}  // namespace deepinfer
