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

}  // namespace deepinfer
