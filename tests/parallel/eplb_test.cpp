// EPLB (parallel/eplb.h): worked examples computed by hand below, and invariants on random loads.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <cstdio>
#include <random>

#include "parallel/eplb.h"

namespace deepinfer::parallel {
namespace {

TEST(Eplb, BalancedPackingHeaviestFirstIntoLightestPackWithRoom) {
  // Items 5,9,1,7,3,4 into 2 packs of 3. Descending: 9(i1) 7(i3) 5(i0) 4(i5) 3(i4) 1(i2).
  // i1->p0 (0,0: lower), i3->p1 (7<9), i0->p1 (7<9: 12), i5->p0 (9<12: 13), i4->p1 (12<13: 15),
  // i2->p0 (p1 full: 14).
  const std::vector<double> w{5, 9, 1, 7, 3, 4};
  Packing p = balanced_packing(w, 2);
  EXPECT_EQ(p.pack_index, (std::vector<int64_t>{1, 0, 0, 1, 1, 0}));
  EXPECT_EQ(p.rank_in_pack, (std::vector<int64_t>{1, 0, 2, 0, 2, 1}));
  // One item per pack: identity.
  Packing q = balanced_packing(std::vector<double>{3, 1, 2}, 3);
  EXPECT_EQ(q.pack_index, (std::vector<int64_t>{0, 1, 2}));
}

TEST(Eplb, ReplicateGivesExtraCopiesToTheLargestLoadPerReplica) {
  // Loads 10, 4, 6 into 6 slots: 3 extra. 10 -> e0 (5 each); then max(5, 4, 6) = e2 (3 each);
  // then max(5, 4, 3) = e0 (3.33 each).
  Replication r = replicate_experts(std::vector<double>{10, 4, 6}, 6);
  EXPECT_EQ(r.phy2log, (std::vector<int32_t>{0, 1, 2, 0, 2, 0}));
  EXPECT_EQ(r.rank, (std::vector<int32_t>{0, 0, 0, 1, 1, 2}));
  EXPECT_EQ(r.logcnt, (std::vector<int64_t>{3, 1, 2}));
}

// The example of DeepSeek's EPLB README (its first layer), worked by hand:
// 12 experts in 4 groups of 3, 16 replicas, 2 nodes, 8 GPUs (4 per node, 2 slots per GPU).
//  loads: 90 132 40 | 61 104 165 | 39 4 73 | 56 183 86   groups g0=262 g1=330 g2=116 g3=325
//  step 1 (groups to nodes, 2 each): g1->n0, g3->n1, g0->n1 (325<330), g2->n0.
//         node 0 experts: 3 4 5 6 7 8; node 1: 9 10 11 0 1 2.
//  step 2 node 0 (61 104 165 39 4 73, 8 slots): +e5 (165 -> 82.5), +e4 (104 -> 52).
//         replicas e3 e4 e5 e6 e7 e8 e5 e4 with loads 61 52 82.5 39 4 73 82.5 52.
//  step 3 node 0 (4 GPUs x 2): 82.5->G0, 82.5->G1, 73->G2, 61->G3, 52(e4)->G3, 52(e4)->G2,
//         39(e6)->G0, 4(e7)->G1  =>  G0 [e5 e6] G1 [e5 e7] G2 [e8 e4] G3 [e3 e4].
//  node 1 (56 183 86 90 132 40): +e10 (91.5), +e1 (66); replicas e9 e10 e11 e0 e1 e2 e10 e1
//         loads 56 91.5 86 90 66 40 91.5 66 -> 91.5->G0, 91.5->G1, 90->G2, 86->G3, 66(e1)->G3,
//         66(e1)->G2, 56(e9)->G0, 40(e2)->G1  =>  G0 [e10 e9] G1 [e10 e2] G2 [e0 e1] G3 [e11 e1].
TEST(Eplb, HierarchicalWorkedExample) {
  const std::vector<double> load{90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86};
  auto r = rebalance_experts(load, {.num_replicas = 16, .num_groups = 4, .num_nodes = 2, .num_gpus = 8});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->hierarchical);
  EXPECT_EQ(r->phy2log, (std::vector<int32_t>{5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1}));
  // Replica indices: the copy made in step 2 is rank 1 (node 0: the second e5 and e4 (on G2);
  // node 1: the second e10 (G1) and e1 (G2: the 66 packed second goes to G2)).
  EXPECT_EQ(r->phy_rank, (std::vector<int32_t>{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(r->logcnt, (std::vector<int64_t>{1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1}));
}

// Global policy (3 groups do not divide over 2 nodes): 6 experts, 8 replicas, 2 GPUs x 4 slots.
//  loads 12 2 6 1 3 8: +e0 (6 each), +e5 (4 each); replicas e0..e5 e0 e5 with loads
//  6 2 6 1 3 4 6 4. Packing, heaviest first: p0->G0, p2->G1, p6->G0 (tie: lower), p5->G1 (10),
//  p7->G1 (10<12: 14), p4->G0 (12<14: 15), p1->G1 (14<15: 16), p3->G0 (G1 full: 16).
//  G0 [e0 e0 e4 e3], G1 [e2 e5 e5 e1]: loads 16 and 16.
TEST(Eplb, GlobalWorkedExample) {
  const std::vector<double> load{12, 2, 6, 1, 3, 8};
  auto r = rebalance_experts(load, {.num_replicas = 8, .num_groups = 3, .num_nodes = 2, .num_gpus = 2});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE(r->hierarchical);
  EXPECT_EQ(r->phy2log, (std::vector<int32_t>{0, 0, 4, 3, 2, 5, 5, 1}));
  EXPECT_EQ(gpu_loads(r->phy2log, load, 2), (std::vector<double>{16, 16}));
}

TEST(Eplb, RejectsImpossibleConfigs) {
  const std::vector<double> load(8, 1.0);
  EXPECT_FALSE(rebalance_experts(load, {.num_replicas = 6, .num_gpus = 2}).is_ok());   // fewer slots than experts
  EXPECT_FALSE(rebalance_experts(load, {.num_replicas = 9, .num_gpus = 2}).is_ok());   // not a multiple of GPUs
  EXPECT_FALSE(rebalance_experts(load, {.num_replicas = 8, .num_groups = 3, .num_gpus = 2}).is_ok());
  EXPECT_FALSE(rebalance_experts(load, {.num_replicas = 8, .num_nodes = 3, .num_gpus = 4}).is_ok());
  EXPECT_FALSE(rebalance_experts(std::vector<double>{1, -1}, {.num_replicas = 2, .num_gpus = 1}).is_ok());
}

// Zipf-like skew: a few experts take most tokens.
std::vector<double> skewed_load(int64_t E, std::mt19937& rng) {
  std::vector<double> v(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) v[e] = 1000.0 / static_cast<double>(1 + e);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

TEST(Eplb, InvariantsAndBalanceOnSkewedLoads) {
  std::mt19937 rng(5);
  struct Case { int64_t E, replicas, groups, nodes, gpus; };
  for (const Case c : {Case{16, 16, 1, 1, 4}, Case{16, 24, 1, 1, 8}, Case{64, 80, 8, 2, 8}, Case{64, 72, 1, 1, 8},
                       Case{256, 288, 1, 1, 8}, Case{32, 48, 4, 4, 16}}) {
    const auto load = skewed_load(c.E, rng);
    auto r = rebalance_experts(load, {c.replicas, c.groups, c.nodes, c.gpus});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const std::string where = "E=" + std::to_string(c.E) + " replicas=" + std::to_string(c.replicas) +
                              " gpus=" + std::to_string(c.gpus);
    ASSERT_EQ(static_cast<int64_t>(r->phy2log.size()), c.replicas) << where;
    std::vector<std::vector<int32_t>> ranks(static_cast<size_t>(c.E));
    for (size_t p = 0; p < r->phy2log.size(); ++p) {
      const int32_t e = r->phy2log[p];
      ASSERT_TRUE(e >= 0 && e < c.E) << where;
      ranks[e].push_back(r->phy_rank[p]);
    }
    for (int64_t e = 0; e < c.E; ++e) {
      EXPECT_GE(ranks[e].size(), 1u) << where << " expert " << e << " has no replica";
      EXPECT_EQ(static_cast<int64_t>(ranks[e].size()), r->logcnt[e]) << where;
      std::sort(ranks[e].begin(), ranks[e].end());  // replica indices 0..count-1, once each
      for (size_t i = 0; i < ranks[e].size(); ++i) EXPECT_EQ(ranks[e][i], static_cast<int32_t>(i)) << where;
    }
    // Hierarchical: each node's GPUs hold only the experts of the groups packed to that node.
    if (r->hierarchical && c.nodes > 1) {
      const int64_t per_node = c.replicas / c.nodes, group = c.E / c.groups;
      for (int64_t n = 0; n < c.nodes; ++n) {
        std::vector<int64_t> groups;
        for (int64_t p = n * per_node; p < (n + 1) * per_node; ++p) groups.push_back(r->phy2log[p] / group);
        std::sort(groups.begin(), groups.end());
        groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
        EXPECT_EQ(static_cast<int64_t>(groups.size()), c.groups / c.nodes) << where << " node " << n;
      }
    }
    // Balance beats the naive placement (expert e on GPU e / (E / gpus), redundant slots unused
    // by filling them with copies of the first experts).
    std::vector<int32_t> naive(static_cast<size_t>(c.replicas));
    for (int64_t p = 0; p < c.replicas; ++p) naive[p] = static_cast<int32_t>(p % c.E);
    std::vector<int32_t> contiguous(static_cast<size_t>(c.E));
    std::iota(contiguous.begin(), contiguous.end(), 0);
    const double before = max_over_mean(gpu_loads(contiguous, load, c.gpus));
    const double naive_r = max_over_mean(gpu_loads(naive, load, c.gpus));
    const double after = max_over_mean(gpu_loads(r->phy2log, load, c.gpus));
    EXPECT_LT(after, before) << where;
    EXPECT_LT(after, naive_r) << where;
    // Global policy with redundant slots: the hottest experts are split, close to perfect balance.
    // (Hierarchical with one group per node cannot move load between nodes.)
    if ((!r->hierarchical || c.groups == 1) && c.replicas >= c.E + c.gpus) {
      EXPECT_LT(after, 1.2) << where << " max/mean " << after;
    }
    std::printf("%s: max/mean contiguous %.3f naive %.3f eplb %.3f\n", where.c_str(), before, naive_r, after);
  }
}

}  // namespace
}  // namespace deepinfer::parallel
