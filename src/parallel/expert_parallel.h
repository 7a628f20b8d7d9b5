// Expert-parallel MoE: dispatch, expert compute on the owning rank, combine.
//
// Each rank (attention data parallelism) holds its own tokens and their routing (top-k logical
// experts and weights, as the single-rank MoE computes them). For every (token, slot) pair the
// rank picks a physical replica of the expert (ExpertPlacement::choose_replica), sends the
// token's hidden row to the replica's rank (all_to_all_v), the owner runs the expert on all rows
// it received for that slot, sends the results back (all_to_all_v), and the source rank adds
//   out[t] += sum_k weight[t, k] * y[t, k]      (k ascending, accumulated from 0, then added)
// which is exactly the single-rank combine of v4::moe_forward, so with row-independent experts
// the result is bitwise the single-rank result whatever the placement and number of ranks.
//
// Collective: every rank calls it once per MoE layer, with zero tokens if it has none.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/expert_placement.h"

namespace deepinfer::parallel {

/// Runs one expert on m rows, x [m, d] -> y [m, d]. `physical` is the replica's slot (a rank
/// holds the weights of its own slots only); rows are independent of each other.
using ExpertFn = std::function<void(int32_t logical, int32_t physical, const float* x, int64_t m, float* y)>;

/// Where each local (token, slot) pair goes. Pure: depends on the placement and the routing only.
struct DispatchPlan {
  std::vector<int32_t> physical;      // [N * K]: chosen replica of each pair
  std::vector<int64_t> items_to;      // [ranks]: pairs sent to each rank
  std::vector<int64_t> order;         // [N * K]: pair indices grouped by destination rank, then pair order
};
DispatchPlan plan_dispatch(const ExpertPlacement& placement, int source_rank, std::span<const int32_t> experts,
                           int64_t top_k);

struct ExpertParallelArgs {
  std::span<const int32_t> experts;  // [N, K] logical experts
  std::span<const float> weights;    // [N, K] combine weights
  const float* h = nullptr;          // [N, d] expert input rows
  int64_t n_tokens = 0;
  int64_t top_k = 0;
  int64_t d = 0;
};

/// What one call did on this rank (for logs and the expert-load tracker).
struct ExpertParallelStats {
  std::vector<int64_t> rows_per_local_slot;  // [slots_per_rank]: rows this rank computed per slot
  std::vector<int64_t> bytes_sent;           // [ranks]: dispatch bytes to each rank (0 to itself)
};

/// out [N, d] += the routed experts' weighted sum (see the header comment). Every rank must call.
Status expert_parallel_moe(Communicator& comm, const ExpertPlacement& placement, const ExpertParallelArgs& args,
                           const ExpertFn& expert, float* out, ExpertParallelStats* stats = nullptr);

}  // namespace deepinfer::parallel
