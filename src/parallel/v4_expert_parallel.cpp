#include "parallel/v4_expert_parallel.h"

namespace deepinfer::parallel {

Status v4_moe_forward_ep(Communicator& comm, const ExpertPlacement& placement, CpuOps& ops, const V4MoeEpArgs& a,
                         float* out, ExpertParallelStats* stats) {
  if (!a.params || !a.weights) return Status::invalid_argument("v4 expert parallel: params and weights are required");
  const v4::MoeParams& p = *a.params;
  const v4::MoeWeights& w = *a.weights;
  if (placement.n_logical() != p.n_experts)
    return Status::invalid_argument("v4 expert parallel: placement for " + std::to_string(placement.n_logical()) +
                                    " experts, layer has " + std::to_string(p.n_experts));
  v4::Routing r;
  if (a.n_tokens > 0) {
    r = v4::route(ops, p, w, a.hash, a.h, a.ids, a.n_tokens);
    v4::expert_forward(ops, p, w.shared_w1, w.shared_w2, w.shared_w3, a.h, a.n_tokens, out);
  }
  ExpertParallelArgs ea;
  ea.experts = r.experts;
  ea.weights = r.weights;
  ea.h = a.h;
  ea.n_tokens = a.n_tokens;
  ea.top_k = p.top_k;
  ea.d = a.d;
  auto expert = [&](int32_t logical, int32_t /*physical*/, const float* x, int64_t m, float* y) {
    v4::expert_forward(ops, p, w.w1[logical], w.w2[logical], w.w3[logical], x, m, y);
  };
  return expert_parallel_moe(comm, placement, ea, expert, out, stats);
}

}  // namespace deepinfer::parallel
