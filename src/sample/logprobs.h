// Log-probabilities from logits: log-softmax (max-subtracted, fp64 sum) and the top-k entries.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace deepinfer {

/// out[i] = logits[i] - logsumexp(logits).
void log_softmax(std::span<const float> logits, std::span<float> out);
/// The k largest entries as (index, value), best first; ties: lower index first.
std::vector<std::pair<int32_t, float>> top_k_entries(std::span<const float> values, int64_t k);
/// Index of the largest entry (lowest index on ties).
int32_t argmax(std::span<const float> values);

/// One token's place in a logits row: its logprob (log_softmax of the raw row), its rank (1 + the
/// number of ids with a strictly larger logprob, vLLM's) and the `top_k` best alternatives
/// (top_k_entries of the logprobs).
struct TokenLogprob {
  float logprob = 0;
  int32_t rank = 0;
  std::vector<std::pair<int32_t, float>> top;
};
/// `scratch` holds the row's logprobs afterwards (resized to the row).
TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int64_t top_k, std::vector<float>& scratch);

}  // namespace deepinfer
