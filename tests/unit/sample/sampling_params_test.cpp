#include "sample/sampling_params.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

constexpr int64_t kVocab = 1024;

TEST(SamplingParamsTest, DefaultsAreValid) {
  SamplingParams p;
  EXPECT_TRUE(p.validate(kVocab).is_ok());
  EXPECT_FALSE(p.is_greedy());
}

TEST(SamplingParamsTest, EdgeValuesAreValid) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = -1;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.repetition_penalty = 1e-3f;
  p.logit_bias = {{0, -100.0f}, {1023, 100.0f}};
  p.stop_token_ids = {0, 1023};
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.n = kMaxSamplesPerRequest;
  p.logprobs = true;
  p.top_logprobs = 20;
  p.seed = std::numeric_limits<uint64_t>::max();
  EXPECT_TRUE(p.validate(kVocab).is_ok()) << p.validate(kVocab).to_string();
  EXPECT_TRUE(p.is_greedy());
  p.top_k = 5000;  // larger than the vocabulary: clamped, as vLLM
  EXPECT_TRUE(p.validate(kVocab).is_ok());
}

struct BadCase {
  const char* name;
  std::function<void(SamplingParams&)> mutate;
  const char* message_part;
};

TEST(SamplingParamsTest, RejectsOutOfRangeWithClearMessages) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const BadCase cases[] = {
      {"negative temperature", [](SamplingParams& p) { p.temperature = -0.1f; }, "temperature must be"},
      {"nan temperature", [&](SamplingParams& p) { p.temperature = nan; }, "got nan"},
      {"inf temperature", [&](SamplingParams& p) { p.temperature = inf; }, "temperature"},
      {"top_k -2", [](SamplingParams& p) { p.top_k = -2; }, "top_k must be -1 or 0"},
      {"top_p 0", [](SamplingParams& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1], got 0"},
      {"top_p 1.5", [](SamplingParams& p) { p.top_p = 1.5f; }, "got 1.5"},
      {"min_p -0.1", [](SamplingParams& p) { p.min_p = -0.1f; }, "min_p must be in [0, 1]"},
      {"min_p 2", [](SamplingParams& p) { p.min_p = 2.0f; }, "min_p"},
      {"repetition 0", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty must be"},
      {"presence 2.5", [](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty must be in [-2, 2], got 2.5"},
      {"frequency -3", [](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty must be in [-2, 2], got -3"},
      {"logit_bias id", [](SamplingParams& p) { p.logit_bias[1024] = 1.0f; }, "logit_bias: token id 1024 is out of vocabulary [0, 1024)"},
      {"logit_bias negative id", [](SamplingParams& p) { p.logit_bias[-1] = 1.0f; }, "token id -1"},
      {"logit_bias value", [](SamplingParams& p) { p.logit_bias[5] = 101.0f; }, "bias for token 5 must be in [-100, 100], got 101"},
      {"logit_bias nan", [&](SamplingParams& p) { p.logit_bias[5] = nan; }, "bias for token 5"},
      {"empty stop", [](SamplingParams& p) { p.stop = {"ok", ""}; }, "stop[1] must not be an empty string"},
      {"stop id", [](SamplingParams& p) { p.stop_token_ids = {3, 5000}; }, "stop_token_ids: token id 5000"},
      {"max_tokens 0", [](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens must be at least 1, got 0"},
      {"min_tokens -1", [](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens must be >= 0"},
      {"min > max", [](SamplingParams& p) { p.max_tokens = 4; p.min_tokens = 5; }, "min_tokens (5) must be <= max_tokens (4)"},
      {"n 0", [](SamplingParams& p) { p.n = 0; }, "n must be in [1, 128], got 0"},
      {"n too large", [](SamplingParams& p) { p.n = 129; }, "got 129"},
      {"top_logprobs 21", [](SamplingParams& p) { p.logprobs = true; p.top_logprobs = 21; }, "top_logprobs must be in [0, 20], got 21"},
      {"top_logprobs -1", [](SamplingParams& p) { p.top_logprobs = -1; }, "top_logprobs must be in [0, 20]"},
      {"top_logprobs without logprobs", [](SamplingParams& p) { p.top_logprobs = 3; }, "requires logprobs"},
      {"prompt_logprobs 21", [](SamplingParams& p) { p.prompt_logprobs = 21; }, "prompt_logprobs must be in [0, 20]"},
      {"prompt_logprobs -2", [](SamplingParams& p) { p.prompt_logprobs = -2; }, "prompt_logprobs must be in [0, 20]"},
  };
  for (const BadCase& c : cases) {
    SamplingParams p;
    c.mutate(p);
    const Status st = p.validate(kVocab);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(std::string(st.message()).find(c.message_part), std::string::npos)
        << c.name << ": " << st.message();
  }
}

TEST(SamplingParamsTest, RejectsBadVocab) {
  EXPECT_FALSE(SamplingParams().validate(0).is_ok());
}

}  // namespace
}  // namespace deepinfer
