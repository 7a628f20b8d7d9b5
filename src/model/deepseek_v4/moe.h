// V4 MoE sublayer (V4-MODEL.md 2.7): router scores sqrt(softplus(logits)) (or sigmoid/softmax),
// expert choice by a frozen tid2eid table (hash layers) or top-k of score + bias (bias for
// selection only), renormalised weights times routed_scaling_factor, clamped SwiGLU experts,
// plus the always-on shared expert.
#pragma once

#include "backend/backend.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::v4 {

struct Routing {
  std::vector<int32_t> experts;  // [N, k]
  std::vector<float> weights;    // [N, k]
};

Routing route(CpuOps& ops, const V4Config& c, const MoeWeights& w, bool hash, const float* h, const int32_t* ids,
              int64_t N);

/// h [N, d] -> out [N, d]. `ids` are the tokens' ids (hash routing).
void moe_forward(CpuOps& ops, const V4Config& c, const MoeWeights& w, bool hash, const float* h, const int32_t* ids,
                 int64_t N, float* out);

}  // namespace deepinfer::v4
