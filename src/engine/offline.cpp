#include "engine/offline.h"

#include "sample/logprobs.h"

namespace deepinfer {

Result<std::vector<ScoreResult>> score_sequences(Model& model, const std::vector<std::vector<int32_t>>& seqs,
                                                 const ScoreOptions& opt) {
  const int64_t V = model.info().vocab_size;
  std::vector<ScoreResult> results(seqs.size());
  std::vector<float> lp(V);
  size_t next = 0;
  while (next < seqs.size()) {
    // Pack whole sequences up to the token budget (at least one per forward).
    std::vector<std::unique_ptr<ModelState>> states;
    std::vector<size_t> members;
    int64_t tokens = 0;
    while (next < seqs.size() && (members.empty() || tokens + static_cast<int64_t>(seqs[next].size()) <= opt.max_batch_tokens)) {
      tokens += static_cast<int64_t>(seqs[next].size());
      members.push_back(next++);
    }
    states.reserve(members.size());
    std::vector<ModelInput> batch;
    for (size_t m : members) {
      states.push_back(model.new_state());
      batch.push_back({states.back().get(), seqs[m], /*all_logits=*/true});
    }
    v4::ForwardOutput out;
    DI_TRY(model.forward(batch, out));
    for (size_t b = 0; b < members.size(); ++b) {
      const auto& seq = seqs[members[b]];
      ScoreResult& r = results[members[b]];
      r.token_logprobs.assign(seq.size(), std::nullopt);
      r.top_logprobs.assign(seq.size(), {});
      for (size_t t = 1; t < seq.size(); ++t) {
        const float* row = out.logits.data() + (out.row_offsets[b] + t - 1) * V;
        TokenLogprob tl = token_logprob({row, static_cast<size_t>(V)}, seq[t], opt.top_logprobs, lp);
        r.token_logprobs[t] = tl.logprob;
        r.top_logprobs[t] = std::move(tl.top);
      }
    }
  }
  return results;
}

Result<std::vector<GenerateResult>> generate_greedy(Model& model, const std::vector<GenerateRequest>& reqs,
                                                    int64_t max_batch) {
  const int64_t V = model.info().vocab_size;
  const int32_t eos = static_cast<int32_t>(model.info().eos_token_id);
  std::vector<GenerateResult> results(reqs.size());
  for (size_t g0 = 0; g0 < reqs.size(); g0 += static_cast<size_t>(max_batch)) {
    const size_t g1 = std::min(reqs.size(), g0 + static_cast<size_t>(max_batch));
    std::vector<std::unique_ptr<ModelState>> states;
    states.reserve(g1 - g0);
    std::vector<size_t> active;
    std::vector<std::vector<int32_t>> feed;
    for (size_t i = g0; i < g1; ++i) {
      states.push_back(model.new_state());
      if (reqs[i].max_tokens <= 0) {
        results[i].finish_reason = "length";
        continue;
      }
      active.push_back(i);
      feed.push_back(reqs[i].prompt);
    }
    while (!active.empty()) {
      std::vector<ModelInput> batch;
      for (size_t a = 0; a < active.size(); ++a) batch.push_back({states[active[a] - g0].get(), feed[a], false});
      v4::ForwardOutput out;
      DI_TRY(model.forward(batch, out));
      std::vector<size_t> still;
      std::vector<std::vector<int32_t>> next_feed;
      for (size_t a = 0; a < active.size(); ++a) {
        const size_t i = active[a];
        const int32_t tok = argmax({out.logits.data() + out.row_offsets[a] * V, static_cast<size_t>(V)});
        results[i].tokens.push_back(tok);
        if (tok == eos) results[i].finish_reason = "stop";
        else if (static_cast<int64_t>(results[i].tokens.size()) >= reqs[i].max_tokens) results[i].finish_reason = "length";
        else {
          still.push_back(i);
          next_feed.push_back({tok});
        }
      }
      active = std::move(still);
      feed = std::move(next_feed);
    }
  }
  return results;
}

Result<std::vector<ScoreResult>> score_sequences(v4::V4Model& model, const std::vector<std::vector<int32_t>>& seqs,
                                                 const ScoreOptions& opt) {
  return score_sequences(*model_view(model), seqs, opt);
}

Result<std::vector<GenerateResult>> generate_greedy(v4::V4Model& model, const std::vector<GenerateRequest>& reqs,
                                                    int64_t max_batch) {
  return generate_greedy(*model_view(model), reqs, max_batch);
}

}  // namespace deepinfer
