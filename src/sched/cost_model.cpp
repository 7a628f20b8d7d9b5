#include "sched/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace deepinfer {

void StepCostModel::observe(double tokens, double token_context, double seconds) {
  samples_.push_back({tokens, token_context, seconds});
  if (static_cast<int64_t>(samples_.size()) > window_) samples_.pop_front();
  refit();
}

namespace {

// Least squares restricted to the columns in `mask` (bit i: column i), from the normal equations
// A x = y. Returns false when that system is singular. Columns outside the mask get 0.
bool solve_subset(const double A_in[3][3], const double y_in[3], unsigned mask, double x_out[3]) {
  int cols[3], n = 0;
  for (int i = 0; i < 3; ++i)
    if (mask & (1u << i)) cols[n++] = i;
  double A[3][3], y[3], x[3];
  for (int r = 0; r < n; ++r) {
    y[r] = y_in[cols[r]];
    for (int c = 0; c < n; ++c) A[r][c] = A_in[cols[r]][cols[c]];
  }
  // Gaussian elimination with partial pivoting.
  int p[3] = {0, 1, 2};
  for (int col = 0; col < n; ++col) {
    int best = col;
    for (int r = col + 1; r < n; ++r)
      if (std::fabs(A[p[r]][col]) > std::fabs(A[p[best]][col])) best = r;
    std::swap(p[col], p[best]);
    if (std::fabs(A[p[col]][col]) < 1e-30) return false;
    for (int r = col + 1; r < n; ++r) {
      const double f = A[p[r]][col] / A[p[col]][col];
      for (int k = col; k < n; ++k) A[p[r]][k] -= f * A[p[col]][k];
      y[p[r]] -= f * y[p[col]];
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    double s = y[p[i]];
    for (int k = i + 1; k < n; ++k) s -= A[p[i]][k] * x[k];
    x[i] = s / A[p[i]][i];
  }
  for (int i = 0; i < 3; ++i) x_out[i] = 0;
  for (int r = 0; r < n; ++r) x_out[cols[r]] = x[r];
  return true;
}

}  // namespace

void StepCostModel::refit() {
  if (samples_.size() < 8) return;
  // Normal equations for [1, tokens, token_context] with a small ridge term for stability.
  double A[3][3] = {}, y[3] = {}, yy = 0;
  for (const Sample& s : samples_) {
    const double x[3] = {1.0, s.tokens, s.token_context};
    yy += s.seconds * s.seconds;
    for (int i = 0; i < 3; ++i) {
      y[i] += x[i] * s.seconds;
      for (int j = 0; j < 3; ++j) A[i][j] += x[i] * x[j];
    }
  }
  for (int i = 0; i < 3; ++i) A[i][i] += 1e-9 * (1.0 + A[i][i]);
  // Costs are never negative: non-negative least squares. With three columns it is exact to take,
  // over every subset of columns, the least-squares solution on that subset when it has no
  // negative coefficient, and keep the one with the smallest residual. (Clamping the coefficients
  // of the unconstrained solution instead leaves the others fitted to a model that was dropped.)
  double best_sse = std::numeric_limits<double>::infinity(), best[3] = {0, 0, 0};
  for (unsigned mask = 1; mask < 8; ++mask) {
    double x[3];
    if (!solve_subset(A, y, mask, x)) continue;
    if (x[0] < 0 || x[1] < 0 || x[2] < 0) continue;
    // Residual sum of squares from the normal equations: y'y - 2 x'b + x'Ax.
    double sse = yy;
    for (int i = 0; i < 3; ++i) {
      sse -= 2 * x[i] * y[i];
      for (int j = 0; j < 3; ++j) sse += x[i] * A[i][j] * x[j];
    }
    if (sse < best_sse) {
      best_sse = sse;
      std::copy(x, x + 3, best);
    }
  }
  if (!std::isfinite(best_sse)) return;
  std::copy(best, best + 3, coef_);
  fitted_ = true;
}

double StepCostModel::predict(double tokens, double token_context) const {
  return coef_[0] + coef_[1] * tokens + coef_[2] * token_context;
}

int64_t StepCostModel::max_tokens_within(double target_s, double context, double base_tokens,
                                         double base_token_context) const {
  if (!fitted_) return -1;
  const double left = target_s - predict(base_tokens, base_token_context);
  if (left <= 0) return 0;
  const double linear = coef_[1] + coef_[2] * context;  // cost of the chunk's first token
  if (linear <= 0 && coef_[2] <= 0) return -1;
  // Positive root of (c/2) n^2 + linear n - left, in the form that stays exact when c -> 0.
  const double n = 2 * left / (linear + std::sqrt(linear * linear + 2 * coef_[2] * left));
  return static_cast<int64_t>(std::min(n, 1e15));
}

}  // namespace deepinfer
