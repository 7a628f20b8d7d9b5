// Step planning as scenario tables (TRT-LLM capacitySchedulerTest style).
#include <gtest/gtest.h>

#include "sched/scheduler.h"

namespace deepinfer {
namespace {

struct Case {
  const char* name;
  SchedulerConfig cfg;
  std::vector<SeqDemand> seqs;
  std::vector<int64_t> expect;
};

TEST(PlanStep, Table) {
  auto cfg = [](int64_t budget, int64_t align) {
    SchedulerConfig c;
    c.max_batch_tokens = budget;
    c.chunk_align = align;
    return c;
  };
  const std::vector<Case> cases = {
      {"decode first, then prefill fills the rest", cfg(10, 1), {{30, 0, false}, {1, 5, true}, {1, 9, true}}, {8, 1, 1}},
      {"prefills in order until the budget is spent", cfg(10, 1), {{6, 0, false}, {6, 0, false}, {6, 0, false}}, {6, 4, 0}},
      {"budget smaller than the decodes", cfg(2, 1), {{1, 3, true}, {1, 3, true}, {1, 3, true}}, {1, 1, 0}},
      {"chunk ends on the last block boundary it crosses", cfg(100, 16), {{70, 0, false}}, {64}},
      {"chunk crossing no boundary is kept", cfg(100, 16), {{10, 3, false}}, {10}},
      {"prompt ending on a boundary runs whole", cfg(100, 16), {{32, 0, false}}, {32}},
      {"budget-limited chunk is aligned", cfg(40, 16), {{100, 0, false}}, {32}},
      {"nothing pending, nothing scheduled", cfg(10, 1), {{0, 4, false}}, {0}},
  };
  StepCostModel cost;
  for (const Case& c : cases) {
    StepPlan p = plan_step(c.cfg, c.seqs, cost);
    EXPECT_EQ(p.tokens, c.expect) << c.name;
    int64_t total = 0;
    for (int64_t t : p.tokens) total += t;
    EXPECT_EQ(p.total, total) << c.name;
  }
}

TEST(PlanStep, TargetStepTimeLimitsPrefillOnceFitted) {
  StepCostModel cost;
  // 1 ms fixed + 0.1 ms per token, no context term.
  for (int i = 0; i < 20; ++i) cost.observe(10.0 * i + 1, 0, 1e-3 + 1e-4 * (10.0 * i + 1));
  ASSERT_TRUE(cost.fitted());
  EXPECT_NEAR(cost.a(), 1e-3, 1e-6);
  EXPECT_NEAR(cost.b(), 1e-4, 1e-8);
  SchedulerConfig c;
  c.max_batch_tokens = 1000;
  c.target_step_ms = 5.0;  // (5 - 1) / 0.1 = 40 tokens
  StepPlan p = plan_step(c, {{500, 0, false}}, cost);
  EXPECT_NEAR(static_cast<double>(p.tokens[0]), 40.0, 1.0);
}

// The engine's step: token count and sum over fed tokens of their context, a chunk of n after
// `context` tokens counting n * (context + n / 2).
struct StepLoad {
  double tokens = 0, token_context = 0;
};
StepLoad load_of(const std::vector<SeqDemand>& seqs, const StepPlan& p) {
  StepLoad l;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const double n = static_cast<double>(p.tokens[i]);
    l.tokens += n;
    l.token_context += n * (static_cast<double>(seqs[i].context) + n / 2);
  }
  return l;
}

// Synthetic steps timed as 2 ms + 50 us per token + 10 ns per (token x context): the fit
// recovers all three terms, the tokens x context one included.
StepCostModel fitted_with_context_term() {
  StepCostModel cost;
  for (int i = 0; i < 64; ++i) {
    const double tokens = 1 + (i * 37) % 500, context = (i * 613) % 8000;
    const double tc = tokens * (context + tokens / 2);
    cost.observe(tokens, tc, 2e-3 + 5e-5 * tokens + 1e-8 * tc);
  }
  return cost;
}

TEST(StepCostModel, RecoversTheTokensTimesContextTerm) {
  StepCostModel cost = fitted_with_context_term();
  ASSERT_TRUE(cost.fitted());
  EXPECT_NEAR(cost.a(), 2e-3, 1e-7);
  EXPECT_NEAR(cost.b(), 5e-5, 1e-9);
  EXPECT_NEAR(cost.c(), 1e-8, 1e-11);
  EXPECT_NEAR(cost.predict(100, 100 * 4050), 2e-3 + 5e-3 + 1e-8 * 100 * 4050, 1e-8);
}

// Decode-only steps that got faster as the context grew (a warming cache): unconstrained least
// squares wants a negative tokens x context cost. The fit keeps costs non-negative by refitting
// without that term (non-negative least squares), so it still predicts the steps it saw; merely
// clamping the negative coefficient would leave the intercept fitted to the dropped slope.
TEST(StepCostModel, NegativeTermIsDroppedAndTheRestRefitted) {
  StepCostModel cost;
  double mean = 0;
  for (int i = 0; i < 20; ++i) {
    const double t = 1e-3 - 2e-5 * i;
    cost.observe(1, 5 + i + 0.5, t);
    mean += t / 20;
  }
  ASSERT_TRUE(cost.fitted());
  EXPECT_EQ(cost.c(), 0.0);
  EXPECT_GE(cost.a(), 0.0);
  EXPECT_GE(cost.b(), 0.0);
  EXPECT_NEAR(cost.predict(1, 15), mean, 1e-7);
}

TEST(PlanStep, ChunkShrinksToMeetTheTargetStepTime) {
  const StepCostModel cost = fitted_with_context_term();
  SchedulerConfig c;
  c.max_batch_tokens = 4096;
  const double target_s = 10e-3;
  // Without a target the whole budget goes to the prefill.
  const std::vector<SeqDemand> fresh = {{4000, 0, false}};
  EXPECT_EQ(plan_step(c, fresh, cost).tokens[0], 4000);
  c.target_step_ms = target_s * 1e3;
  const std::vector<SeqDemand> deep = {{4000, 6000, false}};
  std::vector<SeqDemand> busy;
  for (int i = 0; i < 32; ++i) busy.push_back({1, 6000, true});
  busy.push_back({4000, 6000, false});
  int64_t previous = 4000;
  const std::vector<SeqDemand>* cases[] = {&fresh, &deep, &busy};
  for (const std::vector<SeqDemand>* seqs : cases) {
    const StepPlan p = plan_step(c, *seqs, cost);
    const int64_t chunk = p.tokens.back();
    // The chunk shrinks as its context grows and as decodes share the step ...
    EXPECT_GT(chunk, 0);
    EXPECT_LT(chunk, previous);
    previous = chunk;
    // ... and is the largest that keeps the predicted step within the target.
    const StepLoad l = load_of(*seqs, p);
    EXPECT_LE(cost.predict(l.tokens, l.token_context), target_s);
    std::vector<int64_t> more = p.tokens;
    ++more.back();
    const StepLoad m = load_of(*seqs, StepPlan{more, p.total + 1});
    EXPECT_GT(cost.predict(m.tokens, m.token_context), target_s);
  }
}

TEST(PlanStep, FirstPrefillGetsOneBlockWhenDecodesAloneExceedTheTarget) {
  const StepCostModel cost = fitted_with_context_term();
  SchedulerConfig c;
  c.max_batch_tokens = 4096;
  c.chunk_align = 16;
  c.target_step_ms = 3;  // 2 ms fixed + 64 decodes at context 6000: ~9 ms
  std::vector<SeqDemand> seqs;
  for (int i = 0; i < 64; ++i) seqs.push_back({1, 6000, true});
  seqs.push_back({100, 0, false});
  seqs.push_back({100, 0, false});
  const StepPlan p = plan_step(c, seqs, cost);
  EXPECT_EQ(p.tokens[64], 16);
  EXPECT_EQ(p.tokens[65], 0);
  EXPECT_EQ(p.total, 64 + 16);
}

TEST(SchedulerConfig, Validates) {
  SchedulerConfig c;
  EXPECT_TRUE(c.validate().is_ok());
  c.max_batch_tokens = 0;
  EXPECT_FALSE(c.validate().is_ok());
  c.max_batch_tokens = 1;
  c.target_step_ms = -1;
  EXPECT_FALSE(c.validate().is_ok());
}

}  // namespace
}  // namespace deepinfer
