// V4 MoE sublayer (V4-MODEL.md 2.7): router scores sqrt(softplus(logits)) (or sigmoid/softmax),
// expert choice by a frozen tid2eid table (hash layers) or top-k of score + bias (bias for
// selection only), renormalised weights times routed_scaling_factor, clamped SwiGLU experts,
// plus the always-on shared expert. V4.1 (section 7) runs the same code with its MoeParams
// (router logits divided by gate_temp, 1e-20 added to the renormalisation sum).
#pragma once

#include "backend/backend.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::v4 {

/// The routing and expert numbers of an MoE sublayer, independent of the model's config type.
struct MoeParams {
  int64_t n_experts = 0;
  int64_t top_k = 0;
  std::string scoring_func = "sqrtsoftplus";
  bool norm_topk_prob = true;
  float routed_scaling = 1.f;
  float swiglu_limit = 0.f;  // 0: no clamp
  float gate_temp = 1.f;     // router logits are divided by it (V4.1)
  float renorm_eps = 0.f;    // added to the sum of the selected scores (V4.1: 1e-20)
  int64_t act_block = 0;     // >0: expert inputs rounded through FP8 per act_block along K (reference rounding)
};
MoeParams moe_params(const V4Config& c);

struct Routing {
  std::vector<int32_t> experts;  // [N, k]
  std::vector<float> weights;    // [N, k]
};

Routing route(CpuOps& ops, const MoeParams& p, const MoeWeights& w, bool hash, const float* h, const int32_t* ids,
              int64_t N);
Routing route(CpuOps& ops, const V4Config& c, const MoeWeights& w, bool hash, const float* h, const int32_t* ids,
              int64_t N);

/// One clamped SwiGLU expert (routed or shared) on m independent rows: x [m, d] -> out [m, d].
/// The function moe_forward runs per expert; expert parallelism (src/parallel) calls it on owners.
void expert_forward(CpuOps& ops, const MoeParams& p, const Weight& w1, const Weight& w2, const Weight& w3,
                    const float* x, int64_t m, float* out);

/// h [N, d] -> out [N, d]. `ids` are the tokens' ids (hash routing).
void moe_forward(CpuOps& ops, const MoeParams& p, const MoeWeights& w, bool hash, const float* h,
                 const int32_t* ids, int64_t N, int64_t d, float* out);
void moe_forward(CpuOps& ops, const V4Config& c, const MoeWeights& w, bool hash, const float* h, const int32_t* ids,
                 int64_t N, float* out);

}  // namespace deepinfer::v4
