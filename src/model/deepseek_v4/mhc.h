// mHC (manifold-constrained hyper-connections), V4-MODEL.md 2.2: each site mixes the n residual
// streams into the sublayer input (pre), and writes the sublayer output back (post) plus a
// Sinkhorn-projected doubly-stochastic mix of the input streams (comb, applied as comb^T X).
#pragma once

#include <vector>

#include "backend/backend.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::v4 {

struct HcMix {
  std::vector<float> post;   // [N, n]
  std::vector<float> comb;   // [N, n, n] row j = input stream, column k = output stream
  std::vector<float> input;  // [N, d] collapsed sublayer input
};

/// X is [N, n, d]. Computes pre/post/comb and the collapsed input.
HcMix hc_pre(CpuOps& ops, const V4Config& c, const HcWeights& w, const std::vector<float>& X, int64_t N);
/// X <- post (x) f + comb^T X, per token.
void hc_post(CpuOps& ops, const V4Config& c, const HcMix& mix, const std::vector<float>& f, std::vector<float>& X,
             int64_t N);
/// Final collapse (no Sinkhorn): out[N, d] = sum_j (sigmoid(m_j * scale + base_j) + eps) X_j.
void hc_head(CpuOps& ops, const V4Config& c, const HcHeadWeights& w, const float* X, int64_t N, float* out);

}  // namespace deepinfer::v4
