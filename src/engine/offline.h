// Offline runners over a Model (V4 or V4.1; model/model.h): prompt scoring (log p of each token given its prefix, with the
// top alternatives) and greedy generation of many sequences batched together (prefill, then
// decode steps over the still-running sequences). Issue C replaces the loop with the scheduler.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/model.h"

namespace deepinfer {

struct ScoreResult {
  std::vector<std::optional<float>> token_logprobs;  // [T], first is null
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;  // [T], first empty
};

struct ScoreOptions {
  int64_t top_logprobs = 0;
  int64_t max_batch_tokens = 4096;  // sequences are packed into forwards up to this many tokens
};

Result<std::vector<ScoreResult>> score_sequences(Model& model, const std::vector<std::vector<int32_t>>& seqs,
                                                 const ScoreOptions& opt);
/// Same, on a V4Model (through a non-owning Model view).
Result<std::vector<ScoreResult>> score_sequences(v4::V4Model& model, const std::vector<std::vector<int32_t>>& seqs,
                                                 const ScoreOptions& opt);

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
};
struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string finish_reason;  // "stop" (eos) or "length"
};

Result<std::vector<GenerateResult>> generate_greedy(Model& model, const std::vector<GenerateRequest>& reqs,
                                                    int64_t max_batch = 32);
Result<std::vector<GenerateResult>> generate_greedy(v4::V4Model& model, const std::vector<GenerateRequest>& reqs,
                                                    int64_t max_batch = 32);

}  // namespace deepinfer
