#include "sched/cost_model.h"

#include <algorithm>
#include <cmath>

namespace deepinfer {

void StepCostModel::observe(double tokens, double token_context, double seconds) {
  samples_.push_back({tokens, token_context, seconds});
  if (static_cast<int64_t>(samples_.size()) > window_) samples_.pop_front();
  refit();
}

void StepCostModel::refit() {
  if (samples_.size() < 8) return;
  // Normal equations for [1, tokens, token_context] with a small ridge term for stability.
  double A[3][3] = {}, y[3] = {};
  for (const Sample& s : samples_) {
    const double x[3] = {1.0, s.tokens, s.token_context};
    for (int i = 0; i < 3; ++i) {
      y[i] += x[i] * s.seconds;
      for (int j = 0; j < 3; ++j) A[i][j] += x[i] * x[j];
    }
  }
  for (int i = 0; i < 3; ++i) A[i][i] += 1e-9 * (1.0 + A[i][i]);
  // Gaussian elimination with partial pivoting.
  int p[3] = {0, 1, 2};
  for (int col = 0; col < 3; ++col) {
    int best = col;
    for (int r = col + 1; r < 3; ++r)
      if (std::fabs(A[p[r]][col]) > std::fabs(A[p[best]][col])) best = r;
    std::swap(p[col], p[best]);
    if (std::fabs(A[p[col]][col]) < 1e-30) return;
    for (int r = col + 1; r < 3; ++r) {
      const double f = A[p[r]][col] / A[p[col]][col];
      for (int k = col; k < 3; ++k) A[p[r]][k] -= f * A[p[col]][k];
      y[p[r]] -= f * y[p[col]];
    }
  }
  double x[3];
  for (int i = 2; i >= 0; --i) {
    double s = y[p[i]];
    for (int k = i + 1; k < 3; ++k) s -= A[p[i]][k] * x[k];
    x[i] = s / A[p[i]][i];
  }
  for (int i = 0; i < 3; ++i) coef_[i] = std::max(0.0, x[i]);  // costs are never negative
  fitted_ = true;
}

double StepCostModel::predict(double tokens, double token_context) const {
  return coef_[0] + coef_[1] * tokens + coef_[2] * token_context;
}

int64_t StepCostModel::max_tokens_within(double target_s, double context, double base_tokens,
                                         double base_token_context) const {
  if (!fitted_) return -1;
  const double left = target_s - predict(base_tokens, base_token_context);
  const double per_token = coef_[1] + coef_[2] * context;
  if (left <= 0) return 0;
  if (per_token <= 0) return -1;
  return static_cast<int64_t>(left / per_token);
}

}  // namespace deepinfer
