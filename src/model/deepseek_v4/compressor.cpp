#include "model/deepseek_v4/compressor.h"

#include <cmath>
#include <cstring>

#include "model/numerics.h"

namespace deepinfer::v4 {

namespace {
void emit(CompressorState& s, const CompressorParams& p) {
  const int64_t W = s.width, R = s.ratio, cw = (s.overlap ? 2 : 1) * W;
  std::vector<float> pooled(W);
  std::vector<float> g(2 * R), v(2 * R);
  for (int64_t ch = 0; ch < W; ++ch) {
    int64_t m = 0;
    if (s.overlap) {
      if (s.has_prev)  // window w-1's A halves; absent for w = 0 (weight 0)
        for (int64_t r = 0; r < R; ++r, ++m) {
          g[m] = s.prev_gate[r * W + ch];
          v[m] = s.prev_kv[r * W + ch];
        }
      for (int64_t r = 0; r < R; ++r, ++m) {  // this window's B halves
        g[m] = s.buf_gate[r * cw + W + ch];
        v[m] = s.buf_kv[r * cw + W + ch];
      }
    } else {
      for (int64_t r = 0; r < R; ++r, ++m) {
        g[m] = s.buf_gate[r * cw + ch];
        v[m] = s.buf_kv[r * cw + ch];
      }
    }
    float mx = -INFINITY;
    for (int64_t i = 0; i < m; ++i) mx = std::max(mx, g[i]);
    float sum = 0.f;
    for (int64_t i = 0; i < m; ++i) sum += (g[i] = std::exp(g[i] - mx));
    float acc = 0.f;
    for (int64_t i = 0; i < m; ++i) acc += v[i] * (g[i] / sum);
    pooled[ch] = acc;
  }
  float ms = 0.f;
  for (int64_t ch = 0; ch < W; ++ch) ms += pooled[ch] * pooled[ch];
  const float rs = 1.f / std::sqrt(ms / static_cast<float>(W) + p.eps);
  for (int64_t ch = 0; ch < W; ++ch) pooled[ch] = (*p.norm)[ch] * (pooled[ch] * rs);
  p.rope->apply(pooled.data(), W, s.entries.size() * R);
  if (p.round_mode == 1) {
    numerics::fake_fp8(pooled.data(), W - p.rope_dim, 64);
  } else if (p.round_mode == 2) {
    numerics::hadamard(pooled.data(), W);
    numerics::fake_fp4(pooled.data(), W, 32);
  }
  s.entries.append(pooled.data());
  if (s.overlap) {
    for (int64_t r = 0; r < R; ++r) {
      std::memcpy(&s.prev_kv[r * W], &s.buf_kv[r * cw], W * sizeof(float));
      std::memcpy(&s.prev_gate[r * W], &s.buf_gate[r * cw], W * sizeof(float));
    }
    s.has_prev = true;
  }
  s.buffered = 0;
}
}  // namespace

void compressor_push(CompressorState& s, const float* kv, const float* gate, const CompressorParams& p) {
  const int64_t cw = (s.overlap ? 2 : 1) * s.width;
  std::memcpy(&s.buf_kv[s.buffered * cw], kv, cw * sizeof(float));
  std::memcpy(&s.buf_gate[s.buffered * cw], gate, cw * sizeof(float));
  if (++s.buffered == s.ratio) emit(s, p);
}

}  // namespace deepinfer::v4
