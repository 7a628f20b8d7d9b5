// Test utility: load a DeepSeek-V4 model folder and compute every position's logits for one
// token sequence (a single prefill), so tests can compare checkpoints bitwise.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/deepseek_v4/model.h"

namespace deepinfer::testing {

/// Logits [tokens.size(), vocab] of a loaded model for `tokens` prefilled at once from a fresh state.
inline Result<std::vector<float>> prefill_logits(v4::V4Model& model, const std::vector<int32_t>& tokens) {
  v4::SequenceState st = model.new_sequence();
  v4::SeqInput in;
  in.state = &st;
  in.tokens = tokens;
  in.all_logits = true;
  v4::ForwardOutput out;
  DI_TRY(model.forward(std::span<const v4::SeqInput>(&in, 1), out));
  return out.logits;
}

/// The same for the model folder `dir`, loaded on a CPU backend of `threads` threads.
inline Result<std::vector<float>> v4_logits(const std::string& dir, const std::vector<int32_t>& tokens,
                                            int threads = 2) {
  BackendConfig bc;
  bc.num_threads = threads;
  DI_ASSIGN_OR_RETURN(auto backend, Backend::create(bc));
  DI_ASSIGN_OR_RETURN(auto model, v4::V4Model::load(dir, *backend));
  return prefill_logits(*model, tokens);
}

/// Only the load step, for error tests.
inline Status v4_load_status(const std::string& dir) {
  DI_ASSIGN_OR_RETURN(auto backend, Backend::create({}));
  auto model = v4::V4Model::load(dir, *backend);
  return model.is_ok() ? Status::ok() : model.status();
}

/// A fixed pseudo-random token sequence (long enough to pass the tiny fixtures' windows and
/// compression ratios).
inline std::vector<int32_t> test_tokens(int64_t vocab, int n = 40, uint32_t seed = 1234) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

/// True when a and b hold the same bits (NaN-safe, -0 != +0).
inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = a.size() == b.size() ? 0.f : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace deepinfer::testing
