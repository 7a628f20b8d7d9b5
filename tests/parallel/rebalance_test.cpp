// Online rebalancing: the load tracker's window, and plan_rebalance's placement and moves.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "parallel/rebalance.h"

namespace deepinfer::parallel {
namespace {

TEST(ExpertLoadTracker, SumsTheLastWindowSteps) {
  ExpertLoadTracker t(/*n_layers=*/2, /*n_experts=*/4, /*window_steps=*/2);
  t.record(0, std::vector<int32_t>{0, 1, 1, 3});
  t.add(1, std::vector<int64_t>{5, 0, 0, 1});
  EXPECT_EQ(t.load(0), (std::vector<double>{0, 0, 0, 0}));  // the open step does not count yet
  t.end_step();
  EXPECT_EQ(t.load(0), (std::vector<double>{1, 2, 0, 1}));
  EXPECT_EQ(t.load(1), (std::vector<double>{5, 0, 0, 1}));
  t.record(0, std::vector<int32_t>{2, 2});
  t.end_step();
  EXPECT_EQ(t.load(0), (std::vector<double>{1, 2, 2, 1}));
  t.record(0, std::vector<int32_t>{3});
  t.end_step();  // the first step leaves the window
  EXPECT_EQ(t.load(0), (std::vector<double>{0, 0, 2, 1}));
  EXPECT_EQ(t.load(1), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(t.steps_in_window(), 2);
}

// Applies the moves to the old placement, reading sources from the old one (double-buffered).
std::vector<int32_t> apply_moves(const ExpertPlacement& old, const std::vector<WeightMove>& moves) {
  std::vector<int32_t> p2l = old.phy2log();
  for (const WeightMove& m : moves) {
    EXPECT_EQ(old.logical_of(m.from_physical), m.logical);
    EXPECT_EQ(old.rank_of(m.from_physical), m.from_rank);
    EXPECT_EQ(old.rank_of(m.to_physical), m.to_rank);
    p2l[m.to_physical] = m.logical;
  }
  return p2l;
}

TEST(Rebalance, SkewedLoadGetsLowerMaxOverMeanAndMovesReachTheNewPlacement) {
  std::mt19937 rng(9);
  const int64_t E = 64, gpus = 8, replicas = 72;
  // Start: contiguous experts with the 8 redundant slots holding the first 8 experts again.
  std::vector<int32_t> p2l;
  for (int64_t g = 0; g < gpus; ++g) {
    for (int64_t i = 0; i < E / gpus; ++i) p2l.push_back(static_cast<int32_t>(g * (E / gpus) + i));
    p2l.push_back(static_cast<int32_t>(g));
  }
  auto cur = ExpertPlacement::create(E, static_cast<int>(gpus), p2l);
  ASSERT_TRUE(cur.is_ok()) << cur.status().to_string();
  // Measured load: experts 40..47 (all on GPU 5) are hot.
  ExpertLoadTracker t(1, E, 16);
  std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(E - 1)), hot(40, 47);
  for (int step = 0; step < 20; ++step) {
    std::vector<int32_t> routed;
    for (int i = 0; i < 256; ++i) routed.push_back(i % 4 == 0 ? any(rng) : hot(rng));
    t.record(0, routed);
    t.end_step();
  }
  const auto load = t.load(0);
  const EplbConfig cfg{.num_replicas = replicas, .num_groups = 1, .num_nodes = 1, .num_gpus = gpus};
  auto plan = plan_rebalance(*cur, load, cfg);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  std::printf("max/mean before %.3f after %.3f, %zu moves\n", plan->max_over_mean_before, plan->max_over_mean_after,
              plan->moves.size());
  EXPECT_GT(plan->max_over_mean_before, 3.0);
  EXPECT_LT(plan->max_over_mean_after, 1.2);
  EXPECT_EQ(apply_moves(*cur, plan->moves), plan->placement.phy2log());
  EXPECT_LT(plan->moves.size(), static_cast<size_t>(replicas));
  for (int32_t e = 0; e < E; ++e) EXPECT_GE(plan->placement.replicas(e).size(), 1u) << "expert " << e;

  // Same load again: the placement is already EPLB's, so nothing moves.
  auto again = plan_rebalance(plan->placement, load, cfg);
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(again->moves.empty()) << again->moves.size() << " moves";
  EXPECT_EQ(again->placement.phy2log(), plan->placement.phy2log());
}

TEST(Rebalance, KeepsExpertsInPlaceWhenOnlyGpuLabelsDiffer) {
  // 4 experts on 2 GPUs, no redundancy. Loads 1 2 3 4: EPLB packs 4(e3)->G0, 3(e2)->G1,
  // 2(e1)->G1, 1(e0)->G0  =>  [e3 e0 | e2 e1]. The current placement [e1 e2 | e0 e3] holds the
  // same two sets on swapped GPUs: relabelling makes it [e0 e3 | e1 e2] -> slots kept: no moves.
  auto cur = ExpertPlacement::create(4, 2, {1, 2, 0, 3});
  ASSERT_TRUE(cur.is_ok());
  auto plan = plan_rebalance(*cur, std::vector<double>{1, 2, 3, 4}, {.num_replicas = 4, .num_gpus = 2});
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->moves.empty());
  EXPECT_EQ(plan->placement.phy2log(), (std::vector<int32_t>{1, 2, 0, 3}));
}

TEST(Rebalance, MismatchedConfigIsAnError) {
  auto cur = ExpertPlacement::contiguous(8, 2);
  ASSERT_TRUE(cur.is_ok());
  EXPECT_FALSE(plan_rebalance(*cur, std::vector<double>(8, 1.0), {.num_replicas = 8, .num_gpus = 4}).is_ok());
  EXPECT_FALSE(plan_rebalance(*cur, std::vector<double>(6, 1.0), {.num_replicas = 8, .num_gpus = 2}).is_ok());
}

}  // namespace
}  // namespace deepinfer::parallel
