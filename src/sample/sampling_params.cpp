#include "sample/sampling_params.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace deepinfer {

namespace {

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

Status bad(const std::string& msg) { return Status::invalid_argument(msg); }

}  // namespace

Status SamplingParams::validate(int64_t vocab_size) const {
  if (vocab_size <= 0) return bad("vocab_size must be positive, got " + std::to_string(vocab_size));
  if (!std::isfinite(temperature) || temperature < 0.0f)
    return bad("temperature must be a finite number >= 0, got " + num(temperature));
  if (top_k < -1)
    return bad("top_k must be -1 or 0 (disable) or at least 1, got " + std::to_string(top_k));
  if (!std::isfinite(top_p) || top_p <= 0.0f || top_p > 1.0f)
    return bad("top_p must be in (0, 1], got " + num(top_p));
  if (!std::isfinite(min_p) || min_p < 0.0f || min_p > 1.0f)
    return bad("min_p must be in [0, 1], got " + num(min_p));
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f)
    return bad("repetition_penalty must be a finite number > 0, got " + num(repetition_penalty));
  if (!std::isfinite(presence_penalty) || std::fabs(presence_penalty) > kMaxAbsPresenceFrequency)
    return bad("presence_penalty must be in [-2, 2], got " + num(presence_penalty));
  if (!std::isfinite(frequency_penalty) || std::fabs(frequency_penalty) > kMaxAbsPresenceFrequency)
    return bad("frequency_penalty must be in [-2, 2], got " + num(frequency_penalty));
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size)
      return bad("logit_bias: token id " + std::to_string(id) + " is out of vocabulary [0, " +
                 std::to_string(vocab_size) + ")");
    if (!std::isfinite(bias) || std::fabs(bias) > kMaxAbsLogitBias)
      return bad("logit_bias: bias for token " + std::to_string(id) + " must be in [-100, 100], got " +
                 num(bias));
  }
  for (size_t i = 0; i < stop.size(); ++i)
    if (stop[i].empty()) return bad("stop[" + std::to_string(i) + "] must not be an empty string");
  for (int32_t id : stop_token_ids)
    if (id < 0 || id >= vocab_size)
      return bad("stop_token_ids: token id " + std::to_string(id) + " is out of vocabulary [0, " +
                 std::to_string(vocab_size) + ")");
  if (max_tokens && *max_tokens < 1)
    return bad("max_tokens must be at least 1, got " + std::to_string(*max_tokens));
  if (min_tokens < 0) return bad("min_tokens must be >= 0, got " + std::to_string(min_tokens));
  if (max_tokens && min_tokens > *max_tokens)
    return bad("min_tokens (" + std::to_string(min_tokens) + ") must be <= max_tokens (" +
               std::to_string(*max_tokens) + ")");
  if (n < 1 || n > kMaxSamplesPerRequest)
    return bad("n must be in [1, " + std::to_string(kMaxSamplesPerRequest) + "], got " +
               std::to_string(n));
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs)
    return bad("top_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "], got " +
               std::to_string(top_logprobs));
  if (top_logprobs > 0 && !logprobs) return bad("top_logprobs requires logprobs to be true");
  if (prompt_logprobs < -1 || prompt_logprobs > kMaxTopLogprobs)
    return bad("prompt_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "] (or absent), got " +
               std::to_string(prompt_logprobs));
  return Status::ok();
}

}  // namespace deepinfer
