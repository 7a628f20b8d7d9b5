// Host helpers shared by the CUDA parity tests (reference quantisation, random data, device
// buffers, error norms).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "core/dtype.h"
#include "tensor/weight.h"

namespace deepinfer::cudatest {

namespace dc = deepinfer::cuda;

#define SKIP_WITHOUT_DEVICE() \
  if (!dc::device_available()) GTEST_SKIP() << "no CUDA device"

inline uint8_t e4m3_encode(float v) {  // round to nearest even, saturating to 448
  static const std::vector<float> pos = [] {
    std::vector<float> p(127);
    for (int i = 0; i < 127; ++i) p[i] = e4m3_to_f32(static_cast<uint8_t>(i));
    return p;
  }();
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const float a = std::fabs(v);
  if (a >= 448.f) return sign | 0x7e;
  const auto it = std::lower_bound(pos.begin(), pos.end(), a);
  int hi = static_cast<int>(it - pos.begin()), lo = hi - 1;
  if (hi == 0) return sign;
  const float dl = a - pos[lo], dh = pos[hi] - a;
  const int c = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | static_cast<uint8_t>(c);
}

/// quantize_act_fp8 on the host: q [M, K] e4m3, s [M, K/128] (row-major).
inline void host_quant(const std::vector<float>& x, int64_t M, int64_t K, std::vector<uint8_t>& q,
                       std::vector<float>& s) {
  q.resize(M * K);
  s.resize(M * K / 128);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t kb = 0; kb < K / 128; ++kb) {
      float amax = 0.f;
      for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(x[r * K + kb * 128 + i]));
      int e;
      const float m = std::frexp(std::max(amax, 1e-4f) / 448.f, &e);
      const int c = m == 0.5f ? e - 1 : e;
      const float sc = std::ldexp(1.f, c), inv = std::ldexp(1.f, -c);
      s[r * (K / 128) + kb] = sc;
      for (int i = 0; i < 128; ++i) q[r * K + kb * 128 + i] = e4m3_encode(x[r * K + kb * 128 + i] * inv);
    }
}

/// Index of the first element whose bits differ (-1 if none).
template <class T>
int64_t first_bit_mismatch(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  return -1;
}

inline std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.f) {
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

/// A bf16 weight [rows, cols] of N(0, sd) draws (rounded to nearest even) as a CPU Weight, its
/// bits also in `bits` (for the device copy).
inline Weight bf16_random_weight(const char* name, int64_t rows, int64_t cols, float sd, std::mt19937& rng,
                                 std::vector<uint16_t>& bits) {
  const auto v = randn(static_cast<size_t>(rows * cols), rng, sd);
  bits.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = f32_to_bf16(v[i]);
  Weight w;
  w.name = name;
  w.format = WeightFormat::kBF16;
  w.rows = rows, w.cols = cols;
  w.data = Tensor::zeros(DType::kBF16, {rows, cols});
  std::copy(bits.begin(), bits.end(), w.data.mutable_span<uint16_t>().begin());
  return w;
}

inline double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

/// Random FP8 weight with E8M0 128x128 scales, as a CPU Weight.
inline Weight make_fp8_weight(int64_t N, int64_t K, std::mt19937& rng) {
  Weight w;
  w.name = "w";
  w.format = WeightFormat::kFp8Block;
  w.rows = N;
  w.cols = K;
  w.block_rows = w.block_cols = 128;
  w.data = Tensor::zeros(DType::kF8E4M3, {N, K});
  w.scale = Tensor::zeros(DType::kF8E8M0, {N / 128, K / 128});
  std::uniform_int_distribution<int> byte(0, 255), ex(118, 124);
  for (auto& b : w.data.mutable_span<uint8_t>()) {
    int v = byte(rng);
    if ((v & 0x7f) == 0x7f) v ^= 1;  // no NaN codes
    b = static_cast<uint8_t>(v);
  }
  for (auto& e : w.scale.mutable_span<uint8_t>()) e = static_cast<uint8_t>(ex(rng));
  return w;
}

/// Device buffer, freed on scope exit.
struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) : p(dc::device_alloc(std::max<size_t>(bytes, 16))) {}
  Dev(const void* host, size_t bytes) : Dev(bytes) { EXPECT_TRUE(dc::copy_to_device(p, host, bytes)); }
  ~Dev() { dc::device_free(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

template <class T>
std::vector<T> download(const Dev& d, size_t n) {
  std::vector<T> v(n);
  EXPECT_TRUE(dc::copy_to_host(v.data(), d.p, n * sizeof(T)));
  return v;
}

}  // namespace deepinfer::cudatest
