#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace deepinfer {

void log_softmax(std::span<const float> logits, std::span<float> out) {
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - lse;
}

std::vector<std::pair<int32_t, float>> top_k_entries(std::span<const float> values, int64_t k) {
  std::vector<int32_t> idx(values.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min<int64_t>(k, static_cast<int64_t>(values.size()));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
  std::vector<std::pair<int32_t, float>> out;
  for (int64_t i = 0; i < k; ++i) out.emplace_back(idx[i], values[idx[i]]);
  return out;
}

int32_t argmax(std::span<const float> values) {
  int32_t best = 0;
  for (size_t i = 1; i < values.size(); ++i)
    if (values[i] > values[best]) best = static_cast<int32_t>(i);
  return best;
}

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int64_t top_k, std::vector<float>& scratch) {
  scratch.resize(logits.size());
  log_softmax(logits, scratch);
  TokenLogprob r;
  r.logprob = scratch[static_cast<size_t>(token)];
  r.rank = 1;
  for (float v : scratch) r.rank += v > r.logprob;
  if (top_k > 0) r.top = top_k_entries(scratch, top_k);
  return r;
}

}  // namespace deepinfer
