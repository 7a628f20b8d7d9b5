#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/backend.h"

namespace deepinfer {

float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int j = 0; j < 16; ++j) acc[j] += a[k + j] * b[k + j];
  float tail = 0.f;
  for (; k < n; ++k) tail += a[k] * b[k];
  for (int s = 8; s > 0; s >>= 1)
    for (int j = 0; j < s; ++j) acc[j] += acc[j + s];
  return acc[0] + tail;
}

void CpuOps::linear(const float* x, int64_t n, int64_t ldx, const Weight& w, int64_t r0, int64_t r1, float* y,
                    int64_t ldy) {
  const int64_t rows = r1 - r0;
  if (rows <= 0 || n <= 0) return;
  constexpr int64_t kRowsPerTile = 8;
  const int64_t tiles = (rows + kRowsPerTile - 1) / kRowsPerTile;
  const int64_t cols = w.cols;
  // Grain: enough work per task to amortise dispatch on small matrices.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols * kRowsPerTile / 64));
  pool_.parallel_for(tiles, grain, [&](int64_t t0, int64_t t1) {
    std::vector<float> wbuf(static_cast<size_t>(kRowsPerTile * cols));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t rb = r0 + t * kRowsPerTile;
      const int64_t nr = std::min(kRowsPerTile, r1 - rb);
      w.dequant_rows(rb, nr, wbuf.data());
      for (int64_t i = 0; i < n; ++i) {
        const float* xi = x + i * ldx;
        float* yi = y + i * ldy + (rb - r0);
        for (int64_t r = 0; r < nr; ++r) yi[r] = dot_f32(xi, wbuf.data() + r * cols, cols);
      }
    }
  });
}

void CpuOps::rms_norm(const float* x, int64_t n, int64_t d, const float* weight, float eps, float* y) {
  pool_.parallel_for(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(d, 1)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* xi = x + i * d;
      float* yi = y + i * d;
      const float ms = dot_f32(xi, xi, d) / static_cast<float>(d);
      const float r = 1.0f / std::sqrt(ms + eps);
      if (weight)
        for (int64_t k = 0; k < d; ++k) yi[k] = weight[k] * (xi[k] * r);
      else
        for (int64_t k = 0; k < d; ++k) yi[k] = xi[k] * r;
    }
  });
}

void CpuOps::embedding(const Weight& table, const int32_t* ids, int64_t n, float* out) {
  pool_.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) table.dequant_rows(ids[i], 1, out + i * table.cols);
  });
}

Result<std::unique_ptr<Backend>> Backend::create(const BackendConfig& cfg) {
  if (cfg.device != "cpu")
    return Status::unsupported("backend '" + cfg.device + "' is not available in this build (only 'cpu')");
  if (cfg.num_threads < 0) return Status::invalid_argument("num_threads must be >= 0");
  return std::unique_ptr<Backend>(new Backend("cpu", cfg.num_threads));
}

}  // namespace deepinfer
