#include "model/deepseek_v4/rope.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::v4 {

Rope::Rope(const RopeConfig& rc, int64_t rope_dim) : rope_dim_(rope_dim) {
  const int64_t half = rope_dim / 2;
  const double dim = static_cast<double>(rope_dim);
  std::vector<double> extra(half), inter(half);
  for (int64_t i = 0; i < half; ++i) {
    // fp32 like torch: base ** (2i/dim) in float, then 1/x.
    const float pos_freq = std::pow(static_cast<float>(rc.theta), static_cast<float>(2 * i) / static_cast<float>(dim));
    extra[i] = 1.0f / pos_freq;
    inter[i] = 1.0f / (static_cast<float>(rc.factor) * pos_freq);
  }
  inv_freq_.resize(half);
  if (!rc.yarn) {
    for (int64_t i = 0; i < half; ++i) inv_freq_[i] = static_cast<float>(extra[i]);
    return;
  }
  // transformers' _compute_yarn_parameters (truncate = true, attention_factor = 1).
  auto correction_dim = [&](double rotations) {
    return dim * std::log(rc.original_max_position / (rotations * 2 * M_PI)) / (2 * std::log(rc.theta));
  };
  double low = std::max(std::floor(correction_dim(rc.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(rc.beta_slow)), dim - 1);
  if (low == high) high += 0.001;
  for (int64_t i = 0; i < half; ++i) {
    const float ramp = std::clamp(static_cast<float>((static_cast<double>(i) - low) / (high - low)), 0.f, 1.f);
    const float extrap_factor = 1.f - ramp;
    inv_freq_[i] = static_cast<float>(inter[i]) * (1.f - extrap_factor) + static_cast<float>(extra[i]) * extrap_factor;
  }
}

void Rope::apply(float* x, int64_t dim, int64_t pos, bool inverse) const {
  float* r = x + (dim - rope_dim_);
  const float p = static_cast<float>(pos);
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const float angle = p * inv_freq_[i];  // fp32 like the reference tables
    const float c = std::cos(angle);
    const float s = inverse ? -std::sin(angle) : std::sin(angle);
    const float a = r[2 * i], b = r[2 * i + 1];
    r[2 * i] = a * c - b * s;
    r[2 * i + 1] = b * c + a * s;
  }
}

}  // namespace deepinfer::v4
