// The V4 MoE sublayer over an expert-parallel group on the CPU backend: each rank routes its own
// tokens (router weights replicated), runs the shared expert on them locally, and sends the routed
// work to the ranks that hold the experts (expert_parallel_moe). Bitwise equal to v4::moe_forward
// on the same tokens, whatever the placement and number of ranks.
// In one process the ranks share `w` (all experts loaded); on GPUs each rank holds its slots only.
#pragma once

#include "model/deepseek_v4/moe.h"
#include "parallel/expert_parallel.h"

namespace deepinfer::parallel {

struct V4MoeEpArgs {
  const v4::MoeParams* params = nullptr;
  const v4::MoeWeights* weights = nullptr;
  bool hash = false;             // hash-routed layer (token ids pick the experts)
  const float* h = nullptr;      // [N, d]
  const int32_t* ids = nullptr;  // [N] token ids (hash routing)
  int64_t n_tokens = 0;
  int64_t d = 0;
};

/// out [N, d] = shared expert + routed experts of this rank's N tokens. `ops` is this rank's.
Status v4_moe_forward_ep(Communicator& comm, const ExpertPlacement& placement, CpuOps& ops, const V4MoeEpArgs& a,
                         float* out, ExpertParallelStats* stats = nullptr);

}  // namespace deepinfer::parallel
