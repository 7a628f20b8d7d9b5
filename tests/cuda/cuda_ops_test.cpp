// Parity of the CUDA op set with the CPU backend on random inputs of real V4-Flash shapes.
// Tolerances (relative L2 error ||gpu - cpu|| / ||cpu||, per dtype path):
//   FP8 linear vs CPU on the same FP8-quantised activation: 1e-3 (fp32 accumulate per 128-K
//     block on the tensor cores; measured values are printed), vs CPU on the raw fp32 input:
//     6e-2 (the activation's e4m3 rounding, which the official reference also applies);
//   MXFP4 linear vs CPU on an input exactly representable in fp16: 1e-5; raw fp32 input: 2e-3;
//   RMSNorm: 1e-6.
// Batch invariance: a row's output is bitwise equal whether computed alone or in a batch.
// MXFP4 grouped also: a grid of m = 1..64 over 1, 6, 44, 125 groups with empty (m = 0) groups
// that must stay unwritten, a row bitwise equal at m = 1, 8, 16, 33, 64 (every kernel variant),
// and a speed print (Mxfp4GroupedSpeed, CUDA events, weights rotated past the L2; no assertion).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/layer_ops.h"
#include "core/dtype.h"
#include "tensor/weight.h"

namespace deepinfer {
namespace {

namespace dc = deepinfer::cuda;

#define SKIP_WITHOUT_DEVICE() \
  if (!dc::device_available()) GTEST_SKIP() << "no CUDA device"

// ---- host reference helpers ----
uint8_t e4m3_encode(float v) {  // round to nearest even, saturating to 448
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

// The activation quantisation of quantize_act_fp8, on the host.
void host_quant(const std::vector<float>& x, int64_t M, int64_t K, std::vector<uint8_t>& q, std::vector<float>& s) {
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

std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.f) {
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Random FP8 weight with E8M0 128x128 scales, as a CPU Weight.
Weight make_fp8_weight(int64_t N, int64_t K, std::mt19937& rng) {
  Weight w;
  w.name = "w";
  w.format = WeightFormat::kFp8Block;
  w.rows = N;
  w.cols = K;
  w.block_rows = w.block_cols = 128;
  w.data = Tensor::zeros(DType::kF8E4M3, {N, K});
  w.scale = Tensor::zeros(DType::kF8E8M0, {N / 128, K / 128});
  auto d = w.data.mutable_span<uint8_t>();
  auto s = w.scale.mutable_span<uint8_t>();
  std::uniform_int_distribution<int> byte(0, 255), ex(118, 124);
  for (auto& b : d) {
    int v = byte(rng);
    if ((v & 0x7f) == 0x7f) v ^= 1;  // no NaN codes
    b = static_cast<uint8_t>(v);
  }
  for (auto& e : s) e = static_cast<uint8_t>(ex(rng));
  return w;
}

Weight make_mxfp4_weight(int64_t N, int64_t K, std::mt19937& rng) {
  Weight w;
  w.name = "e";
  w.format = WeightFormat::kMxfp4;
  w.rows = N;
  w.cols = K;
  w.block_rows = 1;
  w.block_cols = 32;
  w.data = Tensor::zeros(DType::kU8, {N, K / 2});
  w.scale = Tensor::zeros(DType::kF8E8M0, {N, K / 32});
  std::uniform_int_distribution<int> byte(0, 255), ex(118, 124);
  for (auto& b : w.data.mutable_span<uint8_t>()) b = static_cast<uint8_t>(byte(rng));
  for (auto& e : w.scale.mutable_span<uint8_t>()) e = static_cast<uint8_t>(ex(rng));
  return w;
}

// Device buffer, freed on scope exit.
struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) : p(dc::device_alloc(std::max<size_t>(bytes, 16))) {}
  Dev(const void* host, size_t bytes) : Dev(bytes) { EXPECT_TRUE(dc::copy_to_device(p, host, bytes)); }
  ~Dev() { dc::device_free(p); }
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

// Packed e2m1 uploaded in the stored layout -> the device layout the MXFP4 ops read.
void to_device_layout(const Dev& d, size_t bytes) {
  EXPECT_TRUE(dc::mxfp4_to_device_layout(d.as<uint8_t>(), static_cast<int64_t>(bytes))) << dc::last_error();
}

template <class T>
std::vector<T> download(const Dev& d, size_t n) {
  std::vector<T> v(n);
  EXPECT_TRUE(dc::copy_to_host(v.data(), d.p, n * sizeof(T)));
  return v;
}

std::vector<float> poisoned_run(size_t n, const std::function<bool(float*)>& run) {
  Dev y(n * 4);
  std::vector<float> nan(n, NAN);
  EXPECT_TRUE(dc::copy_to_device(y.p, nan.data(), n * 4));
  EXPECT_TRUE(run(y.as<float>())) << dc::last_error();
  EXPECT_TRUE(dc::synchronize()) << dc::last_error();
  return download<float>(y, n);
}

TEST(CudaOps, QuantizeActivationMatchesHost) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(1);
  const int64_t M = 5;
  for (const int64_t K : {int64_t(4096), int64_t(384)}) {  // 4 blocks a warp, and 1
    auto x = randn(M * K, rng);
    x[7] = 300.f;      // an outlier block
    for (int i = 0; i < 128; ++i) x[K + i] = 0.f;  // an all-zero block (scale from the 1e-4 floor)
    std::vector<uint8_t> hq;
    std::vector<float> hs;
    host_quant(x, M, K, hq, hs);
    for (bool bf16 : {false, true}) {
      std::vector<float> xin = x;
      std::vector<uint16_t> xb(M * K);
      if (bf16) {
        for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]), xin[i] = bf16_to_f32(xb[i]);
        host_quant(xin, M, K, hq, hs);
      }
      Dev dx(bf16 ? static_cast<const void*>(xb.data()) : static_cast<const void*>(x.data()), M * K * (bf16 ? 2 : 4));
      Dev dq(M * K), ds(M * K / 128 * 4);
      ASSERT_TRUE(dc::quantize_act_fp8(dx.p, bf16, M, K, dq.as<uint8_t>(), ds.as<float>())) << dc::last_error();
      ASSERT_TRUE(dc::synchronize());
      auto q = download<uint8_t>(dq, M * K);
      auto s = download<float>(ds, M * K / 128);
      int bad = 0;
      for (size_t i = 0; i < q.size(); ++i) bad += e4m3_to_f32(q[i]) != e4m3_to_f32(hq[i]);
      EXPECT_EQ(bad, 0) << (bf16 ? "bf16" : "f32") << " K=" << K;
      EXPECT_EQ(s, hs) << "K=" << K;
    }
  }
}

// quantize_act_fp8_t_grouped moves quantize_act_fp8_t's bytes: group-major out (bf16 rows, the
// grouped wo_a's input) and group-major in (fp32, wo_b's input from the groups' outputs), at group
// widths of 4 blocks a warp (512) and 1 (384); the scales are the same array.
TEST(CudaOps, QuantizeGroupedMovesBytes) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(3);
  const int64_t M = 300;
  for (const int64_t gk : {int64_t(512), int64_t(384)}) {
    const int64_t G = 3, K = G * gk;
    const auto x = randn(M * K, rng);
    std::vector<uint16_t> xb(M * K);
    for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
    std::vector<float> xg(M * K);  // x group-major: [G][M][gk]
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < K; ++c) xg[(c / gk * M + r) * gk + c % gk] = x[r * K + c];
    for (const bool in : {false, true}) {
      Dev dx(in ? static_cast<const void*>(x.data()) : static_cast<const void*>(xb.data()), M * K * (in ? 4 : 2));
      Dev dxg(xg.data(), xg.size() * 4), q_ref(M * K), s_ref(M * K / 128 * 4), q(M * K), s(M * K / 128 * 4);
      ASSERT_TRUE(dc::quantize_act_fp8_t(dx.p, !in, M, K, q_ref.as<uint8_t>(), s_ref.as<float>())) << dc::last_error();
      ASSERT_TRUE(dc::quantize_act_fp8_t_grouped(in ? dxg.p : dx.p, !in, M, K, gk, in, q.as<uint8_t>(), s.as<float>()))
          << dc::last_error();
      ASSERT_TRUE(dc::synchronize());
      const auto qr = download<uint8_t>(q_ref, M * K), qg = download<uint8_t>(q, M * K);
      EXPECT_EQ(download<float>(s, M * K / 128), download<float>(s_ref, M * K / 128)) << "gk " << gk << " in " << in;
      int64_t bad = 0;
      for (int64_t r = 0; r < M; ++r)
        for (int64_t c = 0; c < K; ++c) {
          const int64_t gm = (c / gk * M + r) * gk + c % gk;
          bad += in ? qg[r * K + c] != qr[r * K + c] : qg[gm] != qr[r * K + c];
        }
      EXPECT_EQ(bad, 0) << "gk " << gk << " groups " << (in ? "in" : "out");
    }
  }
  EXPECT_FALSE(dc::quantize_act_fp8_t_grouped(nullptr, false, 4, 1024, 384, false, nullptr, nullptr));
}

struct Shape2 {
  const char* name;
  int64_t n, k;
};
const Shape2 kFp8Shapes[] = {{"wq_a", 1024, 4096}, {"wkv", 512, 4096},     {"wo_b", 4096, 8192},
                             {"wq_b", 32768, 1024}, {"shared.w1", 2048, 4096}, {"shared.w2", 4096, 2048}};

TEST(CudaOps, Fp8LinearMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(2);
  for (const auto& sh : kFp8Shapes) {
    const Weight w = make_fp8_weight(sh.n, sh.k, rng);
    Dev dw(w.data.data(), w.data.nbytes()), dsc(w.scale.data(), w.scale.nbytes());
    const dc::Fp8Weight gw{dw.as<uint8_t>(), dsc.p, false, sh.n, sh.k};
    std::vector<float> row0;  // row 0 computed alone, for the batch-invariance check
    for (int64_t M : {1, 5, 33, 64, 3, 200}) {
      const bool tiled_only = M > 64;
      auto x = randn(M * sh.k, rng);
      if (!row0.empty() && M != 1) std::copy(row0.begin(), row0.end(), x.begin());  // same row 0
      std::vector<uint8_t> hq;
      std::vector<float> hs;
      host_quant(x, M, sh.k, hq, hs);
      std::vector<float> xdq(M * sh.k), ref(M * sh.n), ref_raw(M * sh.n);
      for (int64_t i = 0; i < M * sh.k; ++i) xdq[i] = e4m3_to_f32(hq[i]) * hs[i / 128];
      cpu.linear(xdq.data(), M, w, ref.data());
      cpu.linear(x.data(), M, w, ref_raw.data());
      Dev dx(x.data(), x.size() * 4), dq(M * sh.k), ds(M * sh.k / 128 * 4);
      ASSERT_TRUE(dc::quantize_act_fp8(dx.p, false, M, sh.k, dq.as<uint8_t>(), ds.as<float>()));
      Dev ws(dc::fp8_linear_workspace_bytes(M, sh.n, sh.k));
      for (int path = tiled_only ? 1 : 0; path < 2; ++path) {
        auto y = poisoned_run(M * sh.n, [&](float* py) {
          return path == 0 ? dc::fp8_linear_skinny(dq.as<uint8_t>(), ds.as<float>(), M, gw, py, ws.p)
                           : dc::fp8_linear_tiled(dq.as<uint8_t>(), ds.as<float>(), M, gw, py);
        });
        const double e = rel_l2(y, ref), er = rel_l2(y, ref_raw);
        std::printf("fp8 %-9s %5lldx%-5lld M=%-3lld %-6s rel_l2 vs cpu(same q) %.2e, vs cpu(raw x) %.2e\n", sh.name,
                    (long long)sh.n, (long long)sh.k, (long long)M, path ? "tiled" : "skinny", e, er);
        EXPECT_LT(e, 1e-3) << sh.name << " M=" << M << " path=" << path;
        EXPECT_LT(er, 6e-2) << sh.name << " M=" << M << " path=" << path;
        if (path == 0) {
          if (M == 1) row0.assign(x.begin(), x.begin() + sh.k);
          static std::vector<float> y_row0;
          if (M == 1) y_row0.assign(y.begin(), y.begin() + sh.n);
          else
            EXPECT_EQ(0, std::memcmp(y.data(), y_row0.data(), sh.n * 4))
                << sh.name << ": row 0 differs between M=1 and M=" << M << " (batch invariance)";
        }
      }
    }
  }
}

// V4's grouped wo_a weight: G FP8 weights of N x K, and all of them concatenated by rows as the
// device takes them ([G*N, K] and their [G*N/128, K/128] scales).
struct GroupedFp8 {
  std::vector<Weight> ws;
  std::vector<uint8_t> data, scale;
};
GroupedFp8 make_grouped_fp8(int64_t G, int64_t N, int64_t K, std::mt19937& rng) {
  GroupedFp8 g;
  for (int64_t i = 0; i < G; ++i) {
    g.ws.push_back(make_fp8_weight(N, K, rng));
    auto d = g.ws.back().data.span<uint8_t>();
    auto sc = g.ws.back().scale.span<uint8_t>();
    g.data.insert(g.data.end(), d.begin(), d.end());
    g.scale.insert(g.scale.end(), sc.begin(), sc.end());
  }
  return g;
}

// The CPU's grouped product on the dequantised activation (hq, hs: host_quant of [M, G*K]): group g
// takes columns [g*K, (g+1)*K) of each row and writes columns [g*N, (g+1)*N) of y [M, G*N].
std::vector<float> grouped_fp8_reference(CpuOps& cpu, const std::vector<Weight>& ws, const std::vector<uint8_t>& hq,
                                         const std::vector<float>& hs, int64_t M) {
  const int64_t G = static_cast<int64_t>(ws.size()), N = ws[0].rows, K = ws[0].cols;
  std::vector<float> ref(M * G * N);
  for (int64_t g = 0; g < G; ++g) {
    std::vector<float> xg(M * K), yg(M * N);
    for (int64_t r = 0; r < M; ++r)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t i = r * G * K + g * K + k;
        xg[r * K + k] = e4m3_to_f32(hq[i]) * hs[i / 128];
      }
    cpu.linear(xg.data(), M, ws[g], yg.data());
    for (int64_t r = 0; r < M; ++r) std::copy_n(yg.data() + r * N, N, ref.data() + r * G * N + g * N);
  }
  return ref;
}

// V4's grouped wo_a (8 groups of 1024 rows over 4096 columns each) in one launch of the decode
// path (fp8_linear_grouped_skinny) against the CPU per group, and its row 0 bitwise the same at
// M = 1, 5, 33.
TEST(CudaOps, Fp8GroupedLinearMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(5);
  const int64_t G = 8, N = 1024, K = 4096;
  const GroupedFp8 gwt = make_grouped_fp8(G, N, K, rng);
  Dev dw(gwt.data.data(), gwt.data.size()), dsc(gwt.scale.data(), gwt.scale.size());
  const dc::Fp8Weight gw{dw.as<uint8_t>(), dsc.p, false, G * N, K};
  std::vector<float> x0;  // row 0 of every M
  std::vector<float> y0;  // the decode path's row 0 at M = 1
  for (int64_t M : {1, 5, 33}) {
    auto x = randn(M * G * K, rng);
    if (M == 1) x0 = x;
    std::copy(x0.begin(), x0.end(), x.begin());
    std::vector<uint8_t> hq;
    std::vector<float> hs;
    host_quant(x, M, G * K, hq, hs);
    const std::vector<float> ref = grouped_fp8_reference(cpu, gwt.ws, hq, hs, M);
    Dev dx(x.data(), x.size() * 4), dq(M * G * K), ds(M * G * K / 128 * 4);
    ASSERT_TRUE(dc::quantize_act_fp8(dx.p, false, M, G * K, dq.as<uint8_t>(), ds.as<float>()));
    auto y = poisoned_run(M * G * N, [&](float* py) {
      return dc::fp8_linear_grouped_skinny(dq.as<uint8_t>(), ds.as<float>(), M, gw, static_cast<int>(G), py);
    });
    const double e = rel_l2(y, ref);
    std::printf("fp8 grouped wo_a M=%-3lld decode path rel_l2 vs cpu %.2e\n", (long long)M, e);
    EXPECT_LT(e, 1e-3) << "M=" << M;
    if (M == 1) y0.assign(y.begin(), y.begin() + G * N);
    EXPECT_EQ(0, std::memcmp(y.data(), y0.data(), G * N * 4)) << "row 0 differs at M=" << M;
  }
}

// The wgmma decode path (fp8_linear_wgmma, 1-256 rows) against the CPU on the V4 shapes, at every
// column width it picks (16, 32, 64, 128, 256 as two halves) and partial widths; with E8M0 and fp32 weight scales;
// on a row slice whose E8M0 scales start off a 4-byte boundary (K = 384: 3 scales per row block);
// and grouped (wo_a: 8 x 1024 x 4096). Output columns past M stay unwritten.
TEST(CudaOps, Fp8WgmmaLinearMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(9);
  auto check = [&](const char* name, const Weight& w, int64_t r0, int64_t rows, bool f32_scales,
                   std::initializer_list<int64_t> ms) {
    const int64_t N = w.rows, K = w.cols;
    Dev dw(w.data.data(), w.data.nbytes()), dsc(w.scale.data(), w.scale.nbytes()), dsf(N / 128 * (K / 128) * 4);
    dc::Fp8Weight gw{dw.as<uint8_t>(), dsc.p, false, N, K};
    if (f32_scales) {
      ASSERT_TRUE(dc::fp8_scales_to_f32(gw, dsf.as<float>())) << dc::last_error();
      gw.scale = dsf.p, gw.scale_is_f32 = true;
    }
    const size_t sb = f32_scales ? 4 : 1;
    const dc::Fp8Weight view{gw.data + r0 * K, static_cast<const uint8_t*>(gw.scale) + r0 / 128 * (K / 128) * sb,
                             f32_scales, rows, K};
    for (int64_t M : ms) {
      auto x = randn(M * K, rng);
      std::vector<uint8_t> hq;
      std::vector<float> hs;
      host_quant(x, M, K, hq, hs);
      std::vector<float> xdq(M * K), full(M * N), ref(M * rows);
      for (int64_t i = 0; i < M * K; ++i) xdq[i] = e4m3_to_f32(hq[i]) * hs[i / 128];
      cpu.linear(xdq.data(), M, w, full.data());
      for (int64_t r = 0; r < M; ++r) std::copy_n(full.data() + r * N + r0, rows, ref.data() + r * rows);
      Dev dq(hq.data(), hq.size()), ds(hs.data(), hs.size() * 4);
      auto y = poisoned_run(M * rows + 64, [&](float* py) {
        return dc::fp8_linear_wgmma(dq.as<uint8_t>(), ds.as<float>(), M, view, py);
      });
      for (int i = 0; i < 64; ++i) EXPECT_TRUE(std::isnan(y[M * rows + i])) << name << " M=" << M << ": wrote past y";
      y.resize(M * rows);
      const double e = rel_l2(y, ref);
      std::printf("fp8 wgmma %-9s %5lldx%-5lld M=%-3lld %s rel_l2 vs cpu(same q) %.2e\n", name, (long long)rows,
                  (long long)K, (long long)M, f32_scales ? "f32 scales " : "e8m0 scales", e);
      EXPECT_LT(e, 1e-3) << name << " M=" << M;
    }
  };
  for (const auto& sh : kFp8Shapes) {
    const Weight w = make_fp8_weight(sh.n, sh.k, rng);
    check(sh.name, w, 0, sh.n, false, {1, 16, 33, 64});
  }
  check("wo_b", make_fp8_weight(4096, 8192, rng), 0, 4096, true, {5, 100, 128, 200, 256});
  check("wq_a", make_fp8_weight(1024, 4096, rng), 0, 1024, false, {129, 256});
  const Weight odd = make_fp8_weight(640, 384, rng);
  check("slice", odd, 128, 512, false, {3, 48, 177});
  check("slice", odd, 128, 512, true, {7});

  const int64_t G = 8, N = 1024, K = 4096;
  const GroupedFp8 gwt = make_grouped_fp8(G, N, K, rng);
  Dev dw(gwt.data.data(), gwt.data.size()), dsc(gwt.scale.data(), gwt.scale.size());
  const dc::Fp8Weight gw{dw.as<uint8_t>(), dsc.p, false, G * N, K};
  for (int64_t M : {2, 40, 128, 200, 256}) {
    auto x = randn(M * G * K, rng);
    std::vector<uint8_t> hq;
    std::vector<float> hs;
    host_quant(x, M, G * K, hq, hs);
    const std::vector<float> ref = grouped_fp8_reference(cpu, gwt.ws, hq, hs, M);
    Dev dq(hq.data(), hq.size()), ds(hs.data(), hs.size() * 4);
    auto y = poisoned_run(M * G * N, [&](float* py) {
      return dc::fp8_linear_grouped_wgmma(dq.as<uint8_t>(), ds.as<float>(), M, gw, static_cast<int>(G), py);
    });
    const double e = rel_l2(y, ref);
    std::printf("fp8 wgmma grouped wo_a M=%-3lld rel_l2 vs cpu %.2e\n", (long long)M, e);
    EXPECT_LT(e, 1e-3) << "M=" << M;
  }
  EXPECT_FALSE(dc::fp8_linear_wgmma(nullptr, nullptr, 129, gw, nullptr));  // bad input: an error, no launch
  Dev big_q(257 * K), big_s(257 * K / 128 * 4), big_y(257 * N * 4);
  EXPECT_FALSE(dc::fp8_linear_wgmma(big_q.as<uint8_t>(), big_s.as<float>(), 257, dc::Fp8Weight{gw.data, gw.scale, false, N, K},
                                    big_y.as<float>()))
      << "257 rows: past the kernel's widest tile";
}

// The device layout is a bit permutation with the documented sign places (host only: runs in CI).
TEST(CudaOps, Mxfp4DeviceLayoutIsABitPermutation) {
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t w = rng();
    const uint32_t d = dc::mxfp4_word_to_device(w);
    ASSERT_EQ(dc::mxfp4_word_from_device(d), w);
    ASSERT_EQ(__builtin_popcount(d), __builtin_popcount(w));
    for (int c = 0; c < 8; ++c) {
      ASSERT_EQ((d >> (4 * c)) & 7u, (w >> (4 * c)) & 7u) << "magnitude of code " << c << " stays";
      const int sign_at = c < 4 ? 8 * c + 7 : 8 * (c - 4) + 3;
      ASSERT_EQ((d >> sign_at) & 1u, (w >> (4 * c + 3)) & 1u) << "sign of code " << c;
      ASSERT_EQ(dc::mxfp4_dev_code(d, c), (w >> (4 * c)) & 0xfu) << "code " << c;
    }
  }
}

TEST(CudaOps, Mxfp4GroupedMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(3);
  const Shape2 shapes[] = {{"expert.w1", 2048, 4096}, {"expert.w2", 4096, 2048}};
  for (const auto& sh : shapes) {
    const int ms[] = {1, 4, 17, 64};
    const int G = 4;
    std::vector<Weight> ws;
    std::vector<std::unique_ptr<Dev>> keep;
    std::vector<dc::Mxfp4Group> desc(G);
    std::vector<std::vector<float>> refs(G), refs16(G);
    std::vector<float*> ys(G);
    for (int gi = 0; gi < G; ++gi) {
      ws.push_back(make_mxfp4_weight(sh.n, sh.k, rng));
      const Weight& w = ws.back();
      const int m = ms[gi];
      auto x = randn(size_t(m) * sh.k, rng);
      // Half of the rows exactly representable in fp16 (checks the math at fp32 sum-order level).
      std::vector<float> x16 = x;
      for (auto& v : x16) v = std::ldexp(std::round(std::ldexp(v, 8)), -8);  // exact in fp16 for |v| < 8
      refs[gi].resize(size_t(m) * sh.n);
      refs16[gi].resize(size_t(m) * sh.n);
      cpu.linear(x.data(), m, w, refs[gi].data());
      cpu.linear(x16.data(), m, w, refs16[gi].data());
      std::vector<float> xin = x;
      for (int r = 0; r < m; r += 2) std::copy(x16.begin() + r * sh.k, x16.begin() + (r + 1) * sh.k, xin.begin() + r * sh.k);
      keep.push_back(std::make_unique<Dev>(w.data.data(), w.data.nbytes()));
      to_device_layout(*keep.back(), w.data.nbytes());
      desc[gi].w = keep.back()->as<uint8_t>();
      keep.push_back(std::make_unique<Dev>(w.scale.data(), w.scale.nbytes()));
      desc[gi].scale = keep.back()->as<uint8_t>();
      keep.push_back(std::make_unique<Dev>(xin.data(), xin.size() * 4));
      desc[gi].x = keep.back()->as<float>();
      std::vector<float> nan(size_t(m) * sh.n, NAN);
      keep.push_back(std::make_unique<Dev>(nan.data(), nan.size() * 4));
      desc[gi].y = ys[gi] = keep.back()->as<float>();
      desc[gi].m = m;
    }
    Dev dd(desc.data(), desc.size() * sizeof(desc[0]));
    ASSERT_TRUE(dc::mxfp4_linear_grouped(dd.as<dc::Mxfp4Group>(), G, 64, sh.n, sh.k)) << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    for (int gi = 0; gi < G; ++gi) {
      const int m = ms[gi];
      std::vector<float> y(size_t(m) * sh.n);
      ASSERT_TRUE(dc::copy_to_host(y.data(), ys[gi], y.size() * 4));
      std::vector<float> y16, r16, yraw, rraw;
      for (int r = 0; r < m; ++r) {
        auto& yy = (r % 2 == 0) ? y16 : yraw;
        auto& rr = (r % 2 == 0) ? r16 : rraw;
        yy.insert(yy.end(), y.begin() + size_t(r) * sh.n, y.begin() + size_t(r + 1) * sh.n);
        rr.insert(rr.end(), refs[gi].begin() + size_t(r) * sh.n, refs[gi].begin() + size_t(r + 1) * sh.n);
        if (r % 2 == 0)
          std::copy(refs16[gi].begin() + size_t(r) * sh.n, refs16[gi].begin() + size_t(r + 1) * sh.n,
                    rr.end() - sh.n);
      }
      const double e16 = rel_l2(y16, r16);
      std::printf("mxfp4 %-9s %lldx%lld group m=%-2d rel_l2 fp16-exact rows %.2e", sh.name, (long long)sh.n,
                  (long long)sh.k, m, e16);
      EXPECT_LT(e16, 1e-5) << sh.name << " m=" << m;
      if (!yraw.empty()) {
        const double er = rel_l2(yraw, rraw);
        std::printf(", raw fp32 rows %.2e", er);
        EXPECT_LT(er, 2e-3) << sh.name << " m=" << m;
      }
      std::printf("\n");
    }
  }
}

// ---- MXFP4 grouped: shape/group grid, empty groups, row invariance, speed ----

// fp16-exact random input (multiples of 2^-8, |v| < 8), so GPU and CPU see the same x.
std::vector<float> randn_f16_exact(size_t n, std::mt19937& rng) {
  auto v = randn(n, rng);
  for (auto& e : v) e = std::ldexp(std::round(std::ldexp(e, 8)), -8);
  return v;
}

struct Mxfp4Case {
  const char* what;
  int max_m;
  std::vector<int> ms;  // rows per group (0 = empty group)
};

// Pattern of m values over `groups` groups: cycles `pattern`, then overrides.
std::vector<int> group_ms(int groups, const std::vector<int>& pattern) {
  std::vector<int> ms(groups);
  for (int i = 0; i < groups; ++i) ms[i] = pattern[i % pattern.size()];
  return ms;
}

TEST(CudaOps, Mxfp4GroupedGrid) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(31);
  const Shape2 shapes[] = {{"expert.w1", 2048, 4096}, {"expert.w2", 4096, 2048}};
  const Mxfp4Case cases[] = {
      {"1 group m=1", 1, {1}},
      {"6 groups m<=8", 8, {1, 0, 2, 3, 7, 8}},
      {"6 groups m=9", 9, {9, 1, 0, 9, 2, 9}},
      {"44 groups m<=16", 16, group_ms(44, {1, 2, 0, 3, 1, 7, 9, 16, 1, 2, 8})},
      {"44 groups m<=33", 33, group_ms(44, {1, 33, 0, 2, 17})},
      {"125 groups m<=64", 64, group_ms(125, {1, 2, 1, 0, 1, 3, 2, 1, 64, 1, 33, 8, 2, 1, 0, 7})},
  };
  constexpr int kWeights = 4;  // distinct experts, shared round robin (the kernel does not care)
  for (const auto& sh : shapes) {
    std::vector<Weight> ws;
    std::vector<std::unique_ptr<Dev>> dw;
    for (int i = 0; i < kWeights; ++i) {
      ws.push_back(make_mxfp4_weight(sh.n, sh.k, rng));
      dw.push_back(std::make_unique<Dev>(ws.back().data.data(), ws.back().data.nbytes()));
      to_device_layout(*dw.back(), ws.back().data.nbytes());
      dw.push_back(std::make_unique<Dev>(ws.back().scale.data(), ws.back().scale.nbytes()));
    }
    for (const auto& cs : cases) {
      const int G = static_cast<int>(cs.ms.size());
      std::vector<size_t> xoff(G + 1, 0), yoff(G + 1, 0);
      for (int gi = 0; gi < G; ++gi) {
        xoff[gi + 1] = xoff[gi] + size_t(cs.ms[gi]) * sh.k;
        yoff[gi + 1] = yoff[gi] + size_t(std::max(cs.ms[gi], 1)) * sh.n;  // an empty group gets one poisoned row
      }
      const auto x = randn_f16_exact(xoff[G], rng);
      Dev dx(x.data(), std::max<size_t>(x.size(), 1) * 4);
      std::vector<float> nan(yoff[G], NAN);
      Dev dy(nan.data(), nan.size() * 4);
      std::vector<dc::Mxfp4Group> desc(G);
      for (int gi = 0; gi < G; ++gi) {
        const int wi = gi % kWeights;
        desc[gi] = {dw[2 * wi]->as<uint8_t>(), dw[2 * wi + 1]->as<uint8_t>(), dx.as<float>() + xoff[gi],
                    dy.as<float>() + yoff[gi], cs.ms[gi], 0};
      }
      Dev dd(desc.data(), desc.size() * sizeof(desc[0]));
      ASSERT_TRUE(dc::mxfp4_linear_grouped(dd.as<dc::Mxfp4Group>(), G, cs.max_m, sh.n, sh.k)) << dc::last_error();
      ASSERT_TRUE(dc::synchronize()) << dc::last_error();
      const auto y = download<float>(dy, yoff[G]);
      for (int gi = 0; gi < G; ++gi) {
        const int m = cs.ms[gi];
        if (m == 0) {  // an empty group must not be written
          int written = 0;
          for (int64_t i = 0; i < sh.n; ++i) written += !std::isnan(y[yoff[gi] + i]);
          EXPECT_EQ(written, 0) << sh.name << " " << cs.what << ": empty group " << gi << " was written";
          continue;
        }
        // Groups with the same (weight, m) pattern repeat: check each distinct (weight, m) once
        // per case, plus every group of the small cases.
        bool seen = false;
        for (int gj = 0; gj < gi && !seen; ++gj) seen = cs.ms[gj] == m && gj % kWeights == gi % kWeights && G > 8;
        if (seen) continue;
        std::vector<float> ref(size_t(m) * sh.n);
        cpu.linear(x.data() + xoff[gi], m, ws[gi % kWeights], ref.data());
        const std::vector<float> got(y.begin() + yoff[gi], y.begin() + yoff[gi] + ref.size());
        double max_abs = 0;
        int64_t first_bad = -1, n_diff = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
          const double d = std::fabs(double(got[i]) - ref[i]);
          if (!(d <= max_abs)) max_abs = std::isnan(d) ? INFINITY : d;
          if (got[i] != ref[i]) {
            ++n_diff;
            if (first_bad < 0) first_bad = int64_t(i);
          }
        }
        const double e = rel_l2(got, ref);
        if (e >= 1e-5 || gi < 2)
          std::printf("mxfp4 grid %-9s %-17s group %3d m=%-2d rel_l2 %.2e max_abs %.3e bitwise-diff %lld/%zu "
                      "(first at row %lld col %lld: gpu %.9g cpu %.9g)\n",
                      sh.name, cs.what, gi, m, e, max_abs, (long long)n_diff, ref.size(),
                      first_bad < 0 ? -1LL : (long long)(first_bad / sh.n), first_bad < 0 ? -1LL : (long long)(first_bad % sh.n),
                      first_bad < 0 ? 0.0 : double(got[first_bad]), first_bad < 0 ? 0.0 : double(ref[first_bad]));
        EXPECT_LT(e, 1e-5) << sh.name << " " << cs.what << " group " << gi << " m=" << m;
        // rows past m (the next group's or the poison) are checked by that group / the empty check
      }
    }
  }
}

// A row's output is bitwise the same whether its group has m = 1, 8 or 64 rows (kernel variants
// for max_m 1, 8, 16 and 64), at any position in the group.
TEST(CudaOps, Mxfp4GroupedRowInvariance) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(32);
  const Shape2 shapes[] = {{"expert.w1", 2048, 4096}, {"expert.w2", 4096, 2048}};
  for (const auto& sh : shapes) {
    const Weight w = make_mxfp4_weight(sh.n, sh.k, rng);
    Dev dw(w.data.data(), w.data.nbytes()), ds(w.scale.data(), w.scale.nbytes());
    to_device_layout(dw, w.data.nbytes());
    const auto row = randn(sh.k, rng);  // raw fp32 (the fp16 rounding happens inside, per row)
    std::vector<float> base;
    struct Run {
      int m, pos, max_m;
    };
    for (const Run r : {Run{1, 0, 1}, Run{8, 5, 8}, Run{8, 7, 16}, Run{16, 12, 16}, Run{33, 20, 33}, Run{64, 63, 64}}) {
      auto x = randn(size_t(r.m) * sh.k, rng);
      std::copy(row.begin(), row.end(), x.begin() + size_t(r.pos) * sh.k);
      Dev dx(x.data(), x.size() * 4);
      auto y = poisoned_run(size_t(r.m) * sh.n, [&](float* py) {
        const dc::Mxfp4Group gdesc{dw.as<uint8_t>(), ds.as<uint8_t>(), dx.as<float>(), py, r.m, 0};
        Dev dd(&gdesc, sizeof(gdesc));
        const bool ok = dc::mxfp4_linear_grouped(dd.as<dc::Mxfp4Group>(), 1, r.max_m, sh.n, sh.k);
        return ok && dc::synchronize();
      });
      const std::vector<float> mine(y.begin() + size_t(r.pos) * sh.n, y.begin() + size_t(r.pos + 1) * sh.n);
      if (base.empty()) {
        base = mine;
        continue;
      }
      int64_t first = -1, n_diff = 0;
      for (int64_t i = 0; i < sh.n; ++i)
        if (std::memcmp(&mine[i], &base[i], 4) != 0) n_diff += 1, first = first < 0 ? i : first;
      EXPECT_EQ(n_diff, 0) << sh.name << ": row at position " << r.pos << " of m=" << r.m << " (max_m " << r.max_m
                           << ") differs from m=1 in " << n_diff << " columns, first " << first << ": "
                           << (first < 0 ? 0.f : mine[first]) << " vs " << (first < 0 ? 0.f : base[first]);
    }
  }
}

// Speed print (no assertion): 20 replays over expert weights rotated past the 60 MB L2.
TEST(CudaOps, Mxfp4GroupedSpeed) {
  SKIP_WITHOUT_DEVICE();
  const int64_t kBytesW = int64_t(2048) * 4096 / 2, kBytesS = int64_t(2048) * 4096 / 32;  // both shapes
  constexpr int kPool = 256;  // 1.06 GB of experts: 20 replays of <= 125 groups never hit a warm L2
  constexpr int kReps = 20;
  Dev pw(size_t(kPool) * kBytesW), ps(size_t(kPool) * kBytesS);
  ASSERT_TRUE(dc::fill_random_bytes(pw.p, size_t(kPool) * kBytesW, 7));
  {
    std::vector<uint8_t> hs(size_t(kPool) * kBytesS);
    std::mt19937 rng(33);
    std::uniform_int_distribution<int> ex(118, 124);
    for (auto& e : hs) e = static_cast<uint8_t>(ex(rng));
    ASSERT_TRUE(dc::copy_to_device(ps.p, hs.data(), hs.size()));
  }
  const int64_t max_rows = 125 * 8;
  std::vector<float> hx(size_t(max_rows) * 4096);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = float(int(i % 17) - 8) / 16.f;
  Dev dx(hx.data(), hx.size() * 4), dy(size_t(max_rows) * 4096 * 4);
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  const Shape2 shapes[] = {{"expert.w1", 2048, 4096}, {"expert.w2", 4096, 2048}};
  for (const auto& sh : shapes)
    for (int G : {6, 44, 125})
      for (int m : {1, 2, 8}) {
        std::vector<dc::Mxfp4Group> h(size_t(kReps) * G);
        for (int r = 0; r < kReps; ++r)
          for (int g = 0; g < G; ++g) {
            const int64_t e = (int64_t(r) * G + g) % kPool;
            h[size_t(r) * G + g] = {pw.as<uint8_t>() + e * kBytesW, ps.as<uint8_t>() + e * kBytesS,
                                    dx.as<float>() + int64_t(g) * m * sh.k, dy.as<float>() + int64_t(g) * m * sh.n, m, 0};
          }
        Dev dd(h.data(), h.size() * sizeof(h[0]));
        const auto* groups = dd.as<dc::Mxfp4Group>();
        ASSERT_TRUE(dc::mxfp4_linear_grouped(groups, G, m, sh.n, sh.k)) << dc::last_error();  // warm-up
        ASSERT_TRUE(dc::synchronize());
        ASSERT_EQ(cudaEventRecord(e0, nullptr), cudaSuccess);
        for (int r = 0; r < kReps; ++r)
          ASSERT_TRUE(dc::mxfp4_linear_grouped(groups + size_t(r) * G, G, m, sh.n, sh.k)) << dc::last_error();
        ASSERT_EQ(cudaEventRecord(e1, nullptr), cudaSuccess);
        ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
        float ms = 0.f;
        ASSERT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
        const double us = 1e3 * ms / kReps, wbytes = double(G) * (kBytesW + kBytesS);
        std::printf("mxfp4 speed %-9s %lldx%lld groups %3d m %d: %8.2f us/call, %7.1f GB/s of weight bytes\n", sh.name,
                    (long long)sh.n, (long long)sh.k, G, m, us, wbytes / (us * 1e3));
      }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

TEST(CudaOps, RmsNormMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(4);
  for (int64_t d : {4096, 1024, 512}) {
    const int64_t n = 7;
    auto x = randn(n * d, rng, 3.f);
    auto wt = randn(d, rng);
    std::vector<float> ref(n * d);
    cpu.rms_norm(x.data(), n, d, wt.data(), 1e-6f, ref.data());
    Dev dx(x.data(), x.size() * 4), dw(wt.data(), wt.size() * 4);
    auto y = poisoned_run(n * d, [&](float* py) { return dc::rms_norm(dx.as<float>(), n, d, dw.as<float>(), 1e-6f, py); });
    EXPECT_LT(rel_l2(y, ref), 1e-6) << "d=" << d;
  }
}

// rms_norm_pack == rms_norm, then quantize_act_fp8 (or _t) and cast_f32_to_bf16 of its output, bit
// for bit, with and without a weight, at the V4 widths; the parts left null stay unwritten.
TEST(CudaOps, RmsNormPackEqualsItsParts) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(5);
  for (int64_t d : {4096, 1024, 512})
    for (bool weighted : {true, false})
      for (bool scales_t : {false, true}) {
        const int64_t n = 37;
        auto x = randn(n * d, rng, 3.f);
        x[5] = 900.f;  // an outlier block
        auto wt = randn(d, rng);
        Dev dx(x.data(), x.size() * 4), dw(wt.data(), wt.size() * 4);
        const float* w = weighted ? dw.as<float>() : nullptr;
        Dev y0(n * d * 4), q0(n * d), s0(n * d / 128 * 4), b0(n * d * 2);
        Dev y1(n * d * 4), q1(n * d), s1(n * d / 128 * 4), b1(n * d * 2);
        ASSERT_TRUE(dc::rms_norm(dx.as<float>(), n, d, w, 1e-6f, y0.as<float>())) << dc::last_error();
        ASSERT_TRUE(scales_t ? dc::quantize_act_fp8_t(y0.p, false, n, d, q0.as<uint8_t>(), s0.as<float>())
                             : dc::quantize_act_fp8(y0.p, false, n, d, q0.as<uint8_t>(), s0.as<float>()))
            << dc::last_error();
        ASSERT_TRUE(dc::cast_f32_to_bf16(y0.as<float>(), n, d, b0.as<uint16_t>(), d)) << dc::last_error();
        ASSERT_TRUE(dc::rms_norm_pack(dx.as<float>(), n, d, w, 1e-6f, y1.as<float>(), q1.as<uint8_t>(), s1.as<float>(),
                                      scales_t, b1.as<uint16_t>()))
            << dc::last_error();
        ASSERT_TRUE(dc::synchronize()) << dc::last_error();
        const std::string what = "d=" + std::to_string(d) + (weighted ? " weighted" : "") + (scales_t ? " scales_t" : "");
        auto ya = download<float>(y0, n * d), yb = download<float>(y1, n * d);
        EXPECT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * 4), 0) << what;
        EXPECT_EQ(download<uint8_t>(q0, n * d), download<uint8_t>(q1, n * d)) << what;
        auto sa = download<float>(s0, n * d / 128), sb = download<float>(s1, n * d / 128);
        EXPECT_EQ(std::memcmp(sa.data(), sb.data(), sa.size() * 4), 0) << what;
        EXPECT_EQ(download<uint16_t>(b0, n * d), download<uint16_t>(b1, n * d)) << what;
      }
  // Only y: the FP8 and bf16 outputs are optional.
  const int64_t n = 3, d = 512;
  auto x = randn(n * d, rng);
  Dev dx(x.data(), x.size() * 4), y0(n * d * 4), y1(n * d * 4);
  ASSERT_TRUE(dc::rms_norm(dx.as<float>(), n, d, nullptr, 1e-6f, y0.as<float>()));
  ASSERT_TRUE(dc::rms_norm_pack(dx.as<float>(), n, d, nullptr, 1e-6f, y1.as<float>(), nullptr, nullptr, false, nullptr))
      << dc::last_error();
  ASSERT_TRUE(dc::synchronize());
  auto ya = download<float>(y0, n * d), yb = download<float>(y1, n * d);
  EXPECT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * 4), 0);
  EXPECT_FALSE(dc::rms_norm_pack(dx.as<float>(), n, 100, nullptr, 1e-6f, y1.as<float>(), nullptr, nullptr, false, nullptr));
}

}  // namespace
}  // namespace deepinfer
