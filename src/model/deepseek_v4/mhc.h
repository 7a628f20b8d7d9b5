// mHC (manifold-constrained hyper-connections), V4-MODEL.md 2.2: each site mixes the n residual
// streams into the sublayer input (pre), and writes the sublayer output back (post) plus a
// Sinkhorn-projected doubly-stochastic mix of the input streams (comb, applied as comb^T X).
// The pieces (mixes, collapse, expand) are separate so that V4.1's deferred data flow (a site
// collapses with the previous site's `pre`) runs the same arithmetic.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::v4 {

/// The numbers an mHC site needs, independent of the model's config type.
struct HcParams {
  int64_t n = 4;        // streams
  int64_t d = 0;        // hidden size
  float rms_eps = 1e-6f;  // the unweighted RMS norm over all n*d values
  float hc_eps = 1e-6f;
  int64_t sinkhorn_iters = 20;
};
HcParams hc_params(const V4Config& c);

struct HcMix {
  std::vector<float> pre;    // [N, n]
  std::vector<float> post;   // [N, n]
  std::vector<float> comb;   // [N, n, n] row j = input stream, column k = output stream
  std::vector<float> input;  // [N, d] collapsed sublayer input (hc_pre only)
};

/// pre/post/comb of one site for X [N, n, d] (no collapse).
HcMix hc_mix(CpuOps& ops, const HcParams& p, const HcWeights& w, const float* X, int64_t N);
/// out[N, d] = sum_j pre_j X_j.
void hc_collapse(CpuOps& ops, const HcParams& p, const float* pre, const float* X, int64_t N, float* out);
/// X <- post (x) f + comb^T X, per token.
void hc_expand(CpuOps& ops, const HcParams& p, const float* post, const float* comb, const float* f, float* X,
               int64_t N);

/// X is [N, n, d]. Computes pre/post/comb and the collapsed input (with this site's own pre).
HcMix hc_pre(CpuOps& ops, const V4Config& c, const HcWeights& w, const std::vector<float>& X, int64_t N);
/// X <- post (x) f + comb^T X, per token.
void hc_post(CpuOps& ops, const V4Config& c, const HcMix& mix, const std::vector<float>& f, std::vector<float>& X,
             int64_t N);
/// Final collapse (no Sinkhorn): out[N, d] = sum_j (sigmoid(m_j * scale + base_j) + eps) X_j.
void hc_head(CpuOps& ops, const V4Config& c, const HcHeadWeights& w, const float* X, int64_t N, float* out);

}  // namespace deepinfer::v4
