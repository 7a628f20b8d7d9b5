#include "model/deepseek_v4/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/numerics.h"

namespace deepinfer::v4 {

namespace {

float score_fn(const std::string& f, float x) {
  if (f == "sigmoid") return 1.f / (1.f + std::exp(-x));
  // sqrt(softplus(x)); softplus as torch computes it (linear above 20).
  const float sp = x > 20.f ? x : std::log1p(std::exp(x));
  return std::sqrt(sp);
}

// Clamped SwiGLU expert on m rows: out[m, d] = W2 (silu(min(W1 x, L)) * clamp(W3 x, -L, L)).
void swiglu(CpuOps& ops, const MoeParams& p, const Weight& w1, const Weight& w2, const Weight& w3, const float* x,
            int64_t m, float* out) {
  const int64_t I = w1.rows;
  std::vector<float> g(m * I), u(m * I), xq;
  if (p.act_block > 0) {  // the reference's act_quant before its FP8/FP4 GEMMs
    xq.assign(x, x + m * w1.cols);
    numerics::fake_fp8_rows(xq.data(), m, w1.cols, p.act_block);
    x = xq.data();
  }
  ops.linear(x, m, w1, g.data());
  ops.linear(x, m, w3, u.data());
  const float L = p.swiglu_limit;
  for (int64_t i = 0; i < m * I; ++i) {
    float gi = g[i], ui = u[i];
    if (L > 0) {
      gi = std::min(gi, L);
      ui = std::clamp(ui, -L, L);
    }
    g[i] = gi / (1.f + std::exp(-gi)) * ui;
  }
  if (p.act_block > 0) numerics::fake_fp8_rows(g.data(), m, I, p.act_block);
  ops.linear(g.data(), m, w2, out);
}

}  // namespace

void expert_forward(CpuOps& ops, const MoeParams& p, const Weight& w1, const Weight& w2, const Weight& w3,
                    const float* x, int64_t m, float* out) {
  swiglu(ops, p, w1, w2, w3, x, m, out);
}

MoeParams moe_params(const V4Config& c) {
  MoeParams p;
  p.n_experts = c.n_routed_experts;
  p.top_k = c.experts_per_tok;
  p.scoring_func = c.scoring_func;
  p.norm_topk_prob = c.norm_topk_prob;
  p.routed_scaling = static_cast<float>(c.routed_scaling);
  p.swiglu_limit = static_cast<float>(c.swiglu_limit);
  p.act_block = c.numerics.reference_rounding ? 128 : 0;
  return p;
}

Routing route(CpuOps& ops, const MoeParams& p, const MoeWeights& w, bool hash, const float* h, const int32_t* ids,
              int64_t N) {
  const int64_t E = p.n_experts, K = p.top_k;
  std::vector<float> logits(N * E);
  ops.linear(h, N, w.gate, logits.data());
  if (p.gate_temp != 1.f)
    for (float& v : logits) v /= p.gate_temp;
  Routing r;
  r.experts.resize(N * K);
  r.weights.resize(N * K);
  for (int64_t t = 0; t < N; ++t) {
    float* s = logits.data() + t * E;
    if (p.scoring_func == "softmax") {
      const float mx = *std::max_element(s, s + E);
      float sum = 0.f;
      for (int64_t e = 0; e < E; ++e) sum += (s[e] = std::exp(s[e] - mx));
      for (int64_t e = 0; e < E; ++e) s[e] /= sum;
    } else {
      for (int64_t e = 0; e < E; ++e) s[e] = score_fn(p.scoring_func, s[e]);
    }
    int32_t* ex = r.experts.data() + t * K;
    if (hash) {
      std::copy_n(w.tid2eid.data() + static_cast<int64_t>(ids[t]) * K, K, ex);
    } else {
      std::vector<int32_t> order(E);
      std::iota(order.begin(), order.end(), 0);
      auto key = [&](int32_t e) { return s[e] + w.bias[e]; };
      std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
        return key(a) > key(b) || (key(a) == key(b) && a < b);
      });
      std::copy_n(order.begin(), K, ex);
    }
    float* wt = r.weights.data() + t * K;
    float sum = 0.f;
    for (int64_t k = 0; k < K; ++k) sum += (wt[k] = s[ex[k]]);
    if (p.renorm_eps != 0.f) sum += p.renorm_eps;
    for (int64_t k = 0; k < K; ++k) {
      if (p.norm_topk_prob) wt[k] /= sum;
      wt[k] *= p.routed_scaling;
    }
  }
  return r;
}

Routing route(CpuOps& ops, const V4Config& c, const MoeWeights& w, bool hash, const float* h, const int32_t* ids,
              int64_t N) {
  return route(ops, moe_params(c), w, hash, h, ids, N);
}

void moe_forward(CpuOps& ops, const MoeParams& p, const MoeWeights& w, bool hash, const float* h,
                 const int32_t* ids, int64_t N, int64_t d, float* out) {
  const int64_t K = p.top_k, E = p.n_experts;
  Routing r = route(ops, p, w, hash, h, ids, N);
  // Group (token, slot) pairs by expert so each expert's weights are read once per batch.
  std::vector<std::vector<int64_t>> by_expert(E);
  for (int64_t i = 0; i < N * K; ++i) by_expert[r.experts[i]].push_back(i);
  std::vector<float> slot_out(N * K * d);
  std::vector<float> xin, yout;
  for (int64_t e = 0; e < E; ++e) {
    const auto& items = by_expert[e];
    if (items.empty()) continue;
    const int64_t m = static_cast<int64_t>(items.size());
    xin.resize(m * d);
    yout.resize(m * d);
    for (int64_t j = 0; j < m; ++j) std::copy_n(h + (items[j] / K) * d, d, xin.data() + j * d);
    swiglu(ops, p, w.w1[e], w.w2[e], w.w3[e], xin.data(), m, yout.data());
    for (int64_t j = 0; j < m; ++j) std::copy_n(yout.data() + j * d, d, slot_out.data() + items[j] * d);
  }
  swiglu(ops, p, w.shared_w1, w.shared_w2, w.shared_w3, h, N, out);
  // Weighted sum in slot order (fixed per token), then the shared expert.
  for (int64_t t = 0; t < N; ++t) {
    float* o = out + t * d;
    for (int64_t e = 0; e < d; ++e) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k) acc += slot_out[(t * K + k) * d + e] * r.weights[t * K + k];
      o[e] += acc;
    }
  }
}

void moe_forward(CpuOps& ops, const V4Config& c, const MoeWeights& w, bool hash, const float* h, const int32_t* ids,
                 int64_t N, float* out) {
  moe_forward(ops, moe_params(c), w, hash, h, ids, N, c.hidden, out);
}

}  // namespace deepinfer::v4
