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

TEST(SchedulerConfig, Validates) {
  SchedulerConfig c;
  EXPECT_TRUE(c.validate().is_ok());
  c.max_batch_tokens = 0;
  EXPECT_FALSE(c.validate().is_ok());
}

}  // namespace
}  // namespace deepinfer
