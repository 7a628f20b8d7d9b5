// EPLB: expert-parallel load balancing, a C++ reimplementation of DeepSeek's published algorithm
// (deepseek-ai/EPLB, eplb.py; FEATURES.md 3.3), one MoE layer at a time.
//   Hierarchical policy (num_groups % num_nodes == 0):
//     1. pack expert groups onto nodes (balanced_packing: heaviest group first, each to the
//        lightest node with a free slot; every node the same number of groups);
//     2. inside each node, replicate: while physical slots remain, give one more replica to the
//        expert with the largest load / replicas (replicate_experts);
//     3. pack the node's replicas (load / replicas each) onto its GPUs with balanced_packing.
//   Global policy (otherwise): the same with one group and one node.
// Ties are broken towards the lower index everywhere (stable sorts), so results are deterministic.
// V4 has no group-limited routing: num_groups = 1 (global policy) is the natural setting.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"

namespace deepinfer::parallel {

struct EplbConfig {
  int64_t num_replicas = 0;  // physical expert slots in total: experts + redundant ones
  int64_t num_groups = 1;    // expert groups (V3's group-limited routing); 1 for V4
  int64_t num_nodes = 1;     // servers; the intra-node network is faster
  int64_t num_gpus = 1;      // multiple of num_nodes; divides num_replicas
};

struct Packing {
  std::vector<int64_t> pack_index;    // [n]: the pack of each item
  std::vector<int64_t> rank_in_pack;  // [n]: its position inside the pack (0..n/packs-1)
};
/// n items of `weight` into num_packs packs of exactly n / num_packs items each, balancing the sums.
Packing balanced_packing(std::span<const double> weight, int64_t num_packs);

struct Replication {
  std::vector<int32_t> phy2log;  // [num_phy]: logical expert of each physical one (first num_log: identity)
  std::vector<int32_t> rank;     // [num_phy]: replica index of that expert
  std::vector<int64_t> logcnt;   // [num_log]: replicas per expert
};
/// Replicates weight.size() experts into num_phy physical ones, minimising the largest load / replicas.
Replication replicate_experts(std::span<const double> weight, int64_t num_phy);

struct EplbPlacement {
  std::vector<int32_t> phy2log;  // [num_replicas]: slot p on GPU p / (num_replicas / num_gpus)
  std::vector<int32_t> phy_rank; // [num_replicas]: replica index of the slot's expert
  std::vector<int64_t> logcnt;   // [experts]
  bool hierarchical = false;     // which policy ran
};
/// `load`: per-expert load of one layer (e.g. tokens routed over a window).
Result<EplbPlacement> rebalance_experts(std::span<const double> load, const EplbConfig& cfg);

/// GPU loads of a placement when each expert's load is split evenly over its replicas.
std::vector<double> gpu_loads(std::span<const int32_t> phy2log, std::span<const double> load, int64_t num_gpus);
/// max / mean of gpu_loads (1 is perfect balance; 0 loads give 1).
double max_over_mean(std::span<const double> loads);

}  // namespace deepinfer::parallel
