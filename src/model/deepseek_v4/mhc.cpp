#include "model/deepseek_v4/mhc.h"

#include <cmath>

namespace deepinfer::v4 {

namespace {
float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// mixes[N, rows] = fn @ (X / rms(X)) with the unweighted RMS norm over all n*d values.
std::vector<float> hc_mixes(CpuOps& ops, const HcParams& p, const Weight& fn, const float* X, int64_t N) {
  const int64_t nd = p.n * p.d;
  std::vector<float> normed(N * nd), mixes(N * fn.rows);
  ops.rms_norm(X, N, nd, nullptr, p.rms_eps, normed.data());
  ops.linear(normed.data(), N, fn, mixes.data());
  return mixes;
}
}  // namespace

HcParams hc_params(const V4Config& c) {
  return {c.hc_mult, c.hidden, static_cast<float>(c.rms_eps), static_cast<float>(c.hc_eps), c.hc_sinkhorn_iters};
}

HcMix hc_mix(CpuOps& ops, const HcParams& p, const HcWeights& w, const float* X, int64_t N) {
  const int64_t n = p.n, mix = (2 + n) * n;
  const float eps = p.hc_eps;
  std::vector<float> m = hc_mixes(ops, p, w.fn, X, N);
  HcMix out;
  out.pre.resize(N * n);
  out.post.resize(N * n);
  out.comb.resize(N * n * n);
  ops.pool().parallel_for(N, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* mt = m.data() + t * mix;
      for (int64_t j = 0; j < n; ++j) {
        out.pre[t * n + j] = sigmoid(mt[j] * w.scale[0] + w.base[j]) + eps;
        out.post[t * n + j] = 2.f * sigmoid(mt[n + j] * w.scale[1] + w.base[n + j]);
      }
      float* C = out.comb.data() + t * n * n;
      for (int64_t j = 0; j < n; ++j) {  // row softmax, then + eps
        float mx = -INFINITY;
        for (int64_t k = 0; k < n; ++k) {
          C[j * n + k] = mt[2 * n + j * n + k] * w.scale[2] + w.base[2 * n + j * n + k];
          mx = std::max(mx, C[j * n + k]);
        }
        float s = 0.f;
        for (int64_t k = 0; k < n; ++k) s += (C[j * n + k] = std::exp(C[j * n + k] - mx));
        for (int64_t k = 0; k < n; ++k) C[j * n + k] = C[j * n + k] / s + eps;
      }
      auto col_norm = [&] {
        for (int64_t k = 0; k < n; ++k) {
          float s = 0.f;
          for (int64_t j = 0; j < n; ++j) s += C[j * n + k];
          for (int64_t j = 0; j < n; ++j) C[j * n + k] /= (s + eps);
        }
      };
      auto row_norm = [&] {
        for (int64_t j = 0; j < n; ++j) {
          float s = 0.f;
          for (int64_t k = 0; k < n; ++k) s += C[j * n + k];
          for (int64_t k = 0; k < n; ++k) C[j * n + k] /= (s + eps);
        }
      };
      col_norm();
      for (int64_t it = 1; it < p.sinkhorn_iters; ++it) {
        row_norm();
        col_norm();
      }
    }
  });
  return out;
}

void hc_collapse(CpuOps& ops, const HcParams& p, const float* pre, const float* X, int64_t N, float* out) {
  const int64_t n = p.n, d = p.d;
  ops.pool().parallel_for(N, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* y = out + t * d;
      std::fill(y, y + d, 0.f);
      const float* xt = X + t * n * d;
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < d; ++k) y[k] += pre[t * n + j] * xt[j * d + k];
    }
  });
}

void hc_expand(CpuOps& ops, const HcParams& p, const float* post, const float* comb, const float* f, float* X,
               int64_t N) {
  const int64_t n = p.n, d = p.d;
  ops.pool().parallel_for(N, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> res(n * d);
    for (int64_t t = t0; t < t1; ++t) {
      float* xt = X + t * n * d;
      const float* C = comb + t * n * n;
      const float* ft = f + t * d;
      for (int64_t k = 0; k < n; ++k) {
        float* r = res.data() + k * d;
        const float pk = post[t * n + k];
        for (int64_t e = 0; e < d; ++e) r[e] = pk * ft[e];
        for (int64_t j = 0; j < n; ++j) {
          const float cjk = C[j * n + k];
          for (int64_t e = 0; e < d; ++e) r[e] += cjk * xt[j * d + e];
        }
      }
      std::copy(res.begin(), res.end(), xt);
    }
  });
}

HcMix hc_pre(CpuOps& ops, const V4Config& c, const HcWeights& w, const std::vector<float>& X, int64_t N) {
  const HcParams p = hc_params(c);
  HcMix out = hc_mix(ops, p, w, X.data(), N);
  out.input.resize(N * c.hidden);
  hc_collapse(ops, p, out.pre.data(), X.data(), N, out.input.data());
  return out;
}

void hc_post(CpuOps& ops, const V4Config& c, const HcMix& mix, const std::vector<float>& f, std::vector<float>& X,
             int64_t N) {
  hc_expand(ops, hc_params(c), mix.post.data(), mix.comb.data(), f.data(), X.data(), N);
}

void hc_head(CpuOps& ops, const V4Config& c, const HcHeadWeights& w, const float* X, int64_t N, float* out) {
  const int64_t n = c.hc_mult, d = c.hidden;
  std::vector<float> m = hc_mixes(ops, hc_params(c), w.fn, X, N);
  const float eps = static_cast<float>(c.hc_eps);
  ops.pool().parallel_for(N, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* y = out + t * d;
      std::fill(y, y + d, 0.f);
      for (int64_t j = 0; j < n; ++j) {
        const float pj = sigmoid(m[t * n + j] * w.scale[0] + w.base[j]) + eps;
        for (int64_t e = 0; e < d; ++e) y[e] += pj * X[(t * n + j) * d + e];
      }
    }
  });
}

}  // namespace deepinfer::v4
