// StepCostModel: step time ~ a + b * tokens + c * sum(tokens x context), refit online by least
// squares over a sliding window of measured steps. The scheduler asks it how many prefill tokens
// fit a target step time. Until enough steps were seen it answers "no limit".
#pragma once

#include <cstdint>
#include <deque>

namespace deepinfer {

class StepCostModel {
 public:
  explicit StepCostModel(int64_t window = 256) : window_(window) {}
  /// `tokens` fed this step, `token_context` = sum over fed tokens of their context length.
  void observe(double tokens, double token_context, double seconds);
  double predict(double tokens, double token_context) const;
  /// Largest number n of extra tokens, fed as one chunk after `context` tokens, that keeps the
  /// step under `target_s` given the step already carries (base_tokens, base_token_context). The
  /// chunk's own token_context is n * (context + n / 2) (as the engine counts it), so n solves
  /// c/2 n^2 + (b + c context) n <= target - predict(base). Returns -1 when not fitted yet (or
  /// when tokens cost nothing: no limit).
  int64_t max_tokens_within(double target_s, double context, double base_tokens, double base_token_context) const;
  bool fitted() const { return fitted_; }
  double a() const { return coef_[0]; }
  double b() const { return coef_[1]; }
  double c() const { return coef_[2]; }

 private:
  void refit();
  struct Sample {
    double tokens, token_context, seconds;
  };
  int64_t window_;
  std::deque<Sample> samples_;
  double coef_[3] = {0, 0, 0};
  bool fitted_ = false;
};

}  // namespace deepinfer
