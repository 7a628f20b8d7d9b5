// Prompt logprobs (SamplingParams::prompt_logprobs) through the serving engine on tiny-v4-b: each
// prompt token's logprob, rank and alternatives equal `deepinfer score`'s (score_sequences, one
// whole-prompt forward) bitwise, whether the prompt runs in chunks, after its prefix was cached
// (the cache is not used for the rows they need), for every sample of n, or across preemption;
// the tokens generated after them are those of the same request without them.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine.h"
#include "engine/offline.h"
#include "engine_test_util.h"
#include "sample/logprobs.h"

namespace deepinfer {
namespace {

using engine_test::make_req;
using engine_test::prompt_of;

const std::string kModel = std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b";

struct Events {
  std::vector<std::vector<SampledToken>> prompt;  // per sample, in arrival order
  std::vector<std::vector<int64_t>> offsets;      // per sample: each event's prompt_offset
  std::vector<std::vector<int32_t>> tokens;       // per sample: generated ids
  std::vector<bool> prompt_before_tokens;         // per sample: no prompt event after a token
  bool contiguous = true;                         // each event starts where the last one ended
  std::vector<int64_t> cached;
  Status error;
};

Events collect(RequestStream& s, int n) {
  Events r;
  r.prompt.resize(n);
  r.offsets.resize(n);
  r.tokens.resize(n);
  r.prompt_before_tokens.assign(n, true);
  r.cached.resize(n);
  while (auto ev = s.next(std::chrono::milliseconds(20000))) {
    const int k = ev->sample_index;
    switch (ev->kind) {
      case StreamEvent::Kind::kPromptLogprobs:
        r.offsets[k].push_back(ev->prompt_offset);
        r.contiguous = r.contiguous && ev->prompt_offset == static_cast<int64_t>(r.prompt[k].size()) + 1;
        if (!r.tokens[k].empty()) r.prompt_before_tokens[k] = false;
        for (auto& t : ev->tokens) r.prompt[k].push_back(std::move(t));
        break;
      case StreamEvent::Kind::kTokens:
        for (const auto& t : ev->tokens) r.tokens[k].push_back(t.id);
        break;
      case StreamEvent::Kind::kFinished: r.cached[k] = ev->cached_prompt_tokens; break;
      case StreamEvent::Kind::kError: r.error = ev->error; break;
    }
  }
  return r;
}

std::unique_ptr<EngineClient> engine(EngineOptions o = {}) {
  o.threads = 2;
  auto e = make_engine(kModel, o);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return std::move(e).value();
}

EngineRequest with_prompt_logprobs(EngineRequest r, int k) {
  r.sampling.prompt_logprobs = k;
  return r;
}

// The reference: the whole prompt in one forward with every logits row (deepinfer score).
ScoreResult reference(const std::vector<int32_t>& prompt, int k) {
  auto be = Backend::create({});
  auto model = load_model(kModel, **be);
  EXPECT_TRUE(model.is_ok());
  ScoreOptions so;
  so.top_logprobs = k;
  auto r = score_sequences(**model, {prompt}, so);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return (*r)[0];
}

void expect_equals_reference(const std::vector<SampledToken>& got, const std::vector<int64_t>& offsets,
                             const ScoreResult& ref, int k, const std::string& what) {
  ASSERT_EQ(got.size() + 1, ref.token_logprobs.size()) << what;
  ASSERT_FALSE(offsets.empty()) << what;
  EXPECT_EQ(offsets.front(), 1) << what;
  for (size_t t = 1; t < ref.token_logprobs.size(); ++t) {
    const SampledToken& g = got[t - 1];
    EXPECT_EQ(g.logprob, *ref.token_logprobs[t]) << what << " token " << t;  // bitwise: same rows
    EXPECT_EQ(g.top, ref.top_logprobs[t]) << what << " token " << t;
    ASSERT_EQ(static_cast<int>(g.top.size()), k);
    // The rank counts the ids above the token: 1 when it leads, past k when below the k-th.
    if (g.top.front().first == g.id) EXPECT_EQ(g.rank, 1);
    if (g.logprob < g.top.back().second) EXPECT_GT(g.rank, k);
    EXPECT_GE(g.rank, 1);
  }
}

TEST(PromptLogprobs, EqualScoringInChunksAndAfterTheirPrefixWasCached) {
  EngineOptions o;
  o.sched.max_batch_tokens = 24;  // the 100-token prompt runs in chunks
  auto e = engine(o);
  const std::vector<int32_t> prompt = prompt_of(4, 100);
  const ScoreResult ref = reference(prompt, 3);

  Events plain = collect(**e->submit(make_req("plain", prompt, 6)), 1);  // caches the prompt's blocks
  ASSERT_TRUE(plain.error.is_ok());
  EXPECT_TRUE(plain.prompt[0].empty());
  Events a = collect(**e->submit(with_prompt_logprobs(make_req("a", prompt, 6), 3)), 1);
  ASSERT_TRUE(a.error.is_ok()) << a.error.to_string();
  expect_equals_reference(a.prompt[0], a.offsets[0], ref, 3, "after a cached prefix");
  EXPECT_EQ(a.cached[0], 0);  // the rows the logprobs need are recomputed
  EXPECT_GT(a.offsets[0].size(), 1u);  // several chunks
  EXPECT_TRUE(a.prompt_before_tokens[0]);
  EXPECT_TRUE(a.contiguous);
  EXPECT_EQ(a.tokens[0], plain.tokens[0]);  // the completion is unchanged
  // The prefix cache still serves requests that do not ask for them.
  Events again = collect(**e->submit(make_req("again", prompt, 6)), 1);
  EXPECT_GT(again.cached[0], 0);
  EXPECT_EQ(again.tokens[0], plain.tokens[0]);
}

TEST(PromptLogprobs, EverySampleGetsThemAndAOneTokenPromptNone) {
  auto e = engine();
  const std::vector<int32_t> prompt = prompt_of(8, 37);
  const ScoreResult ref = reference(prompt, 0);
  Events r = collect(**e->submit(with_prompt_logprobs(make_req("n2", prompt, 5, 1.0f, 11, 2), 0)), 2);
  ASSERT_TRUE(r.error.is_ok());
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(r.prompt[k].size(), prompt.size() - 1) << k;
    for (size_t t = 1; t < prompt.size(); ++t) {
      EXPECT_EQ(r.prompt[k][t - 1].id, prompt[t]);
      EXPECT_EQ(r.prompt[k][t - 1].logprob, *ref.token_logprobs[t]);
      EXPECT_TRUE(r.prompt[k][t - 1].top.empty());
    }
  }
  Events one = collect(**e->submit(with_prompt_logprobs(make_req("one", {42}, 3), 5)), 1);
  ASSERT_TRUE(one.error.is_ok());
  EXPECT_TRUE(one.offsets[0].empty());
  EXPECT_EQ(one.tokens[0].size(), 3u);
}

TEST(PromptLogprobs, PreemptionSendsEachOnceInOrder) {
  EngineOptions small;
  small.prefix_cache_bytes = 0;
  small.state_capacity_bytes = 100000;  // as PreemptionByRecomputeChangesNothing: sequences get preempted
  auto e = engine(small);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i)
    streams.push_back(*e->submit(with_prompt_logprobs(make_req("p" + std::to_string(i), prompt_of(20 + i, 40), 30, 0.8f, 100 + i), 2)));
  for (int i = 0; i < 3; ++i) {
    Events r = collect(*streams[i], 1);
    ASSERT_TRUE(r.error.is_ok());
    EXPECT_TRUE(r.contiguous) << "request " << i;
    expect_equals_reference(r.prompt[0], r.offsets[0], reference(prompt_of(20 + i, 40), 2), 2, "request " + std::to_string(i));
  }
  EXPECT_GT(e->stats().preemptions, 0);
}

TEST(PromptLogprobs, TokenLogprobRanksAgainstTheWholeRow) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  std::vector<float> scratch;
  TokenLogprob a = token_logprob(logits, 2, 2, scratch);
  EXPECT_EQ(a.rank, 3);  // two ids (1 and 3) above it
  ASSERT_EQ(a.top.size(), 2u);
  EXPECT_EQ(a.top[0].first, 1);  // ties: lower id first
  EXPECT_EQ(a.top[1].first, 3);
  EXPECT_EQ(a.logprob, scratch[2]);
  EXPECT_EQ(token_logprob(logits, 3, 0, scratch).rank, 1);  // a tie shares the best rank
  EXPECT_TRUE(token_logprob(logits, 3, 0, scratch).top.empty());
  EXPECT_EQ(token_logprob(logits, 4, 0, scratch).rank, 5);
}

}  // namespace
}  // namespace deepinfer
