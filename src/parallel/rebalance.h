// Online expert rebalancing: measure per-expert load while serving, then periodically compute a
// new placement with EPLB and the weight copies that take the ranks from the old one to it.
//
// ExpertLoadTracker keeps per-step token counts per (layer, expert) over a sliding window of the
// last `window_steps` steps (the moving load EPLB takes as input). plan_rebalance() is pure:
// it returns the new placement and the moves; applying them (copying expert weights between
// ranks, then switching the placement at a step boundary on every rank) is the caller's.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "parallel/eplb.h"
#include "parallel/expert_placement.h"

namespace deepinfer::parallel {

class ExpertLoadTracker {
 public:
  ExpertLoadTracker(int64_t n_layers, int64_t n_experts, int64_t window_steps);

  /// Counts the routed expert ids of this step's tokens in `layer` ([tokens, top_k] flattened).
  void record(int64_t layer, std::span<const int32_t> experts);
  /// Adds per-expert token counts ([n_experts]) of this step in `layer`.
  void add(int64_t layer, std::span<const int64_t> counts);
  /// Closes the current step; once the window is full the oldest step drops out.
  void end_step();

  /// Token counts per expert of `layer` over the closed steps in the window.
  std::vector<double> load(int64_t layer) const;
  int64_t steps_in_window() const { return static_cast<int64_t>(closed_.size()); }
  int64_t n_layers() const { return n_layers_; }
  int64_t n_experts() const { return n_experts_; }

 private:
  int64_t n_layers_, n_experts_, window_;
  std::vector<int64_t> open_;               // [layers * experts] of the current step
  std::deque<std::vector<int64_t>> closed_; // the window's steps
  std::vector<int64_t> sum_;                // sum over closed_
};

/// Copy expert `logical`'s weights from physical slot `from_physical` (on from_rank) into slot
/// `to_physical` (on to_rank). from_rank == to_rank is a local copy.
struct WeightMove {
  int32_t logical = 0;
  int32_t from_physical = 0;
  int from_rank = 0;
  int32_t to_physical = 0;
  int to_rank = 0;
};

struct RebalancePlan {
  ExpertPlacement placement;
  std::vector<WeightMove> moves;
  double max_over_mean_before = 1;  // per-rank load, load split evenly over replicas
  double max_over_mean_after = 1;
};

/// EPLB on `load` with cfg (cfg.num_gpus must equal the placement's ranks and cfg.num_replicas its
/// slots), then relabels the new GPUs within each node and orders slots inside each GPU so that as
/// many experts as possible stay where they are: only slots whose expert changes are moved.
Result<RebalancePlan> plan_rebalance(const ExpertPlacement& current, std::span<const double> load,
                                     const EplbConfig& cfg);

}  // namespace deepinfer::parallel
