// Parity of the model-level CUDA ops (model_ops.h).
//   bf16_gemv vs a float64 dot of the same bf16 inputs: rel L2 1e-5, each row's bits as at M = 1;
//   bf16_linear_lt vs a float64 dot of the same bf16 inputs: rel L2 1e-3 (fp32 out), 1e-2 (bf16
//     out), plus max abs error printed;
//   embed_rows: exact rows, zeros and the bad flag for ids outside [0, V);
//   mxfp4_to_fp8_blocks: fp8 * scale == the MXFP4 value exactly in tiles whose E8M0 spread is
//     <= 11, == the e4m3 rounding of value / scale otherwise; dequant_mxfp4_to_bf16 agrees on the
//     exact tiles; fp8_linear_lt over the converted expert vs the bf16 GEMM over the dequantised
//     expert on the same fp8 activation: rel L2 1e-3 (as fp8_linear_lt vs the CPU);
//   moe_sort_tokens: offsets = exclusive scan of the counts, slot_pos = the stable expert sort
//     (host) and = moe_build_groups' slot_pos where that runs (T * k <= 8192); the groups
//     moe_build_groups builds from its offsets (any T) cover each expert's rows in order, and equal
//     the one-block kernel's where that runs;
//   head_norm_rope_bf16 == rms_norm, rope_rows, cast_f32_to_bf16 in turn, bit for bit;
//   head_norm_rope_bf16_in (bf16 rows) == head_norm_rope_bf16 on the same values as fp32, bit for bit;
//   kv_norm_rope_bf16 == rms_norm (weighted), rope_rows, cast_f32_to_bf16, rows_to_rings, bit for bit.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "backend/cuda/layer_ops.h"
#include "backend/cuda/model_ops.h"
#include "backend/cuda/v4_ops.h"
#include "cuda_test_util.h"

namespace deepinfer {
namespace {

using namespace cudatest;

std::vector<uint16_t> rand_bf16(size_t n, std::mt19937& rng, float sd) {
  auto v = randn(n, rng, sd);
  std::vector<uint16_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = f32_to_bf16(v[i]);
  return b;
}

struct ErrStats {
  double rel_l2 = 0, max_abs = 0;
  int64_t worst = -1;
};
ErrStats compare(const std::vector<float>& y, const std::vector<double>& ref) {
  ErrStats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = std::isfinite(y[i]) ? std::fabs(double(y[i]) - ref[i]) : INFINITY;
    num += d * d, den += ref[i] * ref[i];
    if (!(d <= s.max_abs)) s.max_abs = d, s.worst = int64_t(i);
  }
  s.rel_l2 = std::sqrt(num / std::max(den, 1e-30));
  return s;
}

// ---------------- bf16 GEMM ----------------

// ref[m, n] = sum_k x[m, k] w[n, k] in float64 over the bf16 values.
std::vector<double> double_dot(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, int64_t M, int64_t N,
                               int64_t K) {
  std::vector<double> ref(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(bf16_to_f32(x[m * K + k])) * bf16_to_f32(w[n * K + k]);
      ref[m * N + n] = acc;
    }
  return ref;
}

TEST(CudaModelOps, Bf16LinearMatchesDoubleDot) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(31);
  struct Shape {
    int64_t M, N, K;
  };
  const Shape shapes[] = {{1, 4096, 1024}, {37, 512, 4096}, {256, 1536, 1024}, {5, 136, 7168}};
  Dev ws(dc::fp8_linear_lt_workspace_bytes());
  for (const auto& s : shapes) {
    const auto x = rand_bf16(s.M * s.K, rng, 1.f), w = rand_bf16(s.N * s.K, rng, 0.05f);
    const std::vector<double> ref = double_dot(x, w, s.M, s.N, s.K);
    Dev dx(x.data(), x.size() * 2), dw(w.data(), w.size() * 2);
    for (bool out_bf16 : {false, true}) {
      Dev dy(s.M * s.N * 4);
      std::vector<uint8_t> poison(s.M * s.N * 4, 0xff);
      ASSERT_TRUE(dc::copy_to_device(dy.p, poison.data(), poison.size()));
      ASSERT_TRUE(dc::bf16_linear_lt(dx.as<uint16_t>(), s.M, dw.as<uint16_t>(), s.N, s.K, dy.p, out_bf16, ws.p))
          << dc::last_error();
      ASSERT_TRUE(dc::synchronize()) << dc::last_error();
      std::vector<float> y(s.M * s.N);
      if (out_bf16) {
        const auto yb = download<uint16_t>(dy, y.size());
        for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_f32(yb[i]);
      } else {
        y = download<float>(dy, y.size());
      }
      const ErrStats e = compare(y, ref);
      std::printf("bf16_linear_lt M=%-4lld N=%-5lld K=%-5lld %s: rel_l2 %.2e, max abs %.2e at [%lld, %lld]\n",
                  (long long)s.M, (long long)s.N, (long long)s.K, out_bf16 ? "bf16" : "f32 ", e.rel_l2, e.max_abs,
                  (long long)(e.worst / s.N), (long long)(e.worst % s.N));
      EXPECT_LT(e.rel_l2, out_bf16 ? 1e-2 : 1e-3) << "M=" << s.M << " N=" << s.N << " K=" << s.K;
    }
  }
}

// bf16_gemv (decode's few-row bf16 linears): against the float64 dot of the same bf16 inputs at
// every M it takes and the compressor / indexer shapes (K = 4096), a K of one step (256), N not a
// multiple of the block's 8 columns; each row's bits the same at M = 1 as inside M = 8; bad
// shapes rejected.
TEST(CudaModelOps, Bf16GemvMatchesDoubleDotAndEachRowAlone) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(32);
  struct Shape {
    int64_t M, N, K;
  };
  const Shape shapes[] = {{1, 2048, 4096}, {8, 1024, 4096}, {3, 64, 4096}, {5, 1003, 256}, {2, 512, 1280}};
  for (const auto& s : shapes) {
    const auto x = rand_bf16(s.M * s.K, rng, 1.f), w = rand_bf16(s.N * s.K, rng, 0.05f);
    const std::vector<double> ref = double_dot(x, w, s.M, s.N, s.K);
    Dev dx(x.data(), x.size() * 2), dw(w.data(), w.size() * 2), dy((s.M * s.N + 8) * 4);
    std::vector<uint8_t> poison((s.M * s.N + 8) * 4, 0xff);
    ASSERT_TRUE(dc::copy_to_device(dy.p, poison.data(), poison.size()));
    ASSERT_TRUE(dc::bf16_gemv(dx.as<uint16_t>(), s.M, dw.as<uint16_t>(), s.N, s.K, dy.as<float>())) << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const auto all = download<float>(dy, s.M * s.N + 8);
    const std::vector<float> y(all.begin(), all.begin() + s.M * s.N);
    const ErrStats e = compare(y, ref);
    std::printf("bf16_gemv M=%lld N=%-5lld K=%-5lld: rel_l2 %.2e, max abs %.2e\n", (long long)s.M, (long long)s.N,
                (long long)s.K, e.rel_l2, e.max_abs);
    EXPECT_LT(e.rel_l2, 1e-5) << "M=" << s.M << " N=" << s.N << " K=" << s.K;
    for (int i = 0; i < 8; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &all[s.M * s.N + i], 4);
      EXPECT_EQ(bits, 0xffffffffu) << "bf16_gemv wrote past y, M=" << s.M << " N=" << s.N;
    }
    // The last row alone: its bits as inside the batch.
    Dev d1(s.N * 4);
    ASSERT_TRUE(dc::bf16_gemv(dx.as<uint16_t>() + (s.M - 1) * s.K, 1, dw.as<uint16_t>(), s.N, s.K, d1.as<float>()));
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const auto one = download<float>(d1, s.N);
    EXPECT_EQ(std::memcmp(one.data(), y.data() + (s.M - 1) * s.N, s.N * 4), 0) << "M=" << s.M << " N=" << s.N;
  }
  Dev d(4096 * 4);
  EXPECT_FALSE(dc::bf16_gemv(d.as<uint16_t>(), 9, d.as<uint16_t>(), 8, 256, d.as<float>()));
  EXPECT_FALSE(dc::bf16_gemv(d.as<uint16_t>(), 1, d.as<uint16_t>(), 8, 300, d.as<float>()));
  EXPECT_FALSE(dc::bf16_gemv(d.as<uint16_t>(), 1, d.as<uint16_t>(), 8, 4352, d.as<float>()));
  EXPECT_NE(dc::last_error().find("K a multiple of 256 up to 4096"), std::string::npos) << dc::last_error();
}

// ---------------- embedding ----------------

TEST(CudaModelOps, EmbedRowsExactAndBadIds) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(32);
  for (int64_t d : {int64_t(7168), int64_t(100)}) {  // 16-byte path and the scalar path
    const int64_t V = 1000;
    const auto table = rand_bf16(V * d, rng, 1.f);
    Dev dt(table.data(), table.size() * 2);
    for (bool with_bad : {false, true}) {
      std::vector<int32_t> ids = {0, 999, 17, 17, 500};
      if (with_bad) ids.insert(ids.begin() + 2, {-1, 1000, int32_t(1) << 30});
      const int64_t T = int64_t(ids.size());
      Dev di(ids.data(), ids.size() * 4), dout(T * d * 4), dbad(4);
      std::vector<float> poison(T * d, NAN);
      ASSERT_TRUE(dc::copy_to_device(dout.p, poison.data(), poison.size() * 4));
      const int32_t zero = 0;
      ASSERT_TRUE(dc::copy_to_device(dbad.p, &zero, 4));
      ASSERT_TRUE(dc::embed_rows(dt.as<uint16_t>(), V, d, di.as<int32_t>(), T, dout.as<float>(), dbad.as<int32_t>()))
          << dc::last_error();
      ASSERT_TRUE(dc::synchronize()) << dc::last_error();
      const auto out = download<float>(dout, T * d);
      const int32_t bad = download<int32_t>(dbad, 1)[0];
      int64_t first = -1, wrong = 0;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < d; ++c) {
          const bool ok = ids[t] >= 0 && ids[t] < V;
          const float want = ok ? bf16_to_f32(table[ids[t] * d + c]) : 0.f;
          const float got = out[t * d + c];
          if (!(got == want && std::signbit(got) == std::signbit(want))) {
            if (first < 0) first = t * d + c;
            ++wrong;
          }
        }
      std::printf("embed_rows d=%lld T=%lld%s: %lld wrong (first at %lld), bad flag %d\n", (long long)d,
                  (long long)T, with_bad ? " (3 bad ids)" : "", (long long)wrong, (long long)first, bad);
      EXPECT_EQ(wrong, 0) << "first wrong element " << first << " (token " << first / d << ")";
      EXPECT_EQ(bad, with_bad ? 1 : 0);
    }
  }
}

// ---------------- MXFP4 -> FP8 128x128 ----------------

// Random MXFP4 weight [N, K]: tile row-block nt's E8M0 bytes lie in [base, base + spread[nt]].
struct Mxfp4Host {
  int64_t N, K;
  std::vector<uint8_t> w, s;
};
Mxfp4Host make_mxfp4(int64_t N, int64_t K, const std::vector<int>& spread, std::mt19937& rng) {
  Mxfp4Host m{N, K, std::vector<uint8_t>(N * K / 2), std::vector<uint8_t>(N * K / 32)};
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : m.w) b = static_cast<uint8_t>(byte(rng));
  for (int64_t r = 0; r < N; ++r) {
    std::uniform_int_distribution<int> ex(120, 120 + spread[r / 128]);
    for (int64_t g = 0; g < K / 32; ++g) m.s[r * (K / 32) + g] = static_cast<uint8_t>(ex(rng));
  }
  return m;
}
float mxfp4_value(const Mxfp4Host& m, int64_t r, int64_t c) {
  const uint8_t b = m.w[r * (m.K / 2) + c / 2];
  return e2m1_to_f32(c % 2 ? b >> 4 : b & 0xf) * e8m0_to_f32(m.s[r * (m.K / 32) + c / 32]);
}

TEST(CudaModelOps, Mxfp4ToFp8BlocksExactRule) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(33);
  const int64_t N = 512, K = 512;
  const std::vector<int> spread = {0, 11, 16, 30};  // per 128-row block: exact, exact, rounded, rounded
  const Mxfp4Host m = make_mxfp4(N, K, spread, rng);
  Dev dw(m.w.data(), m.w.size()), ds(m.s.data(), m.s.size()), dq(N * K), dsc(N / 128 * (K / 128) * 4),
      dbf(N * K * 2);
  ASSERT_TRUE(dc::mxfp4_to_device_layout(dw.as<uint8_t>(), int64_t(m.w.size()))) << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_to_fp8_blocks(dw.as<uint8_t>(), ds.as<uint8_t>(), N, K, dq.as<uint8_t>(), dsc.as<float>()))
      << dc::last_error();
  ASSERT_TRUE(dc::dequant_mxfp4_to_bf16(dw.as<uint8_t>(), ds.as<uint8_t>(), N, K, dbf.as<uint16_t>()));
  ASSERT_TRUE(dc::synchronize()) << dc::last_error();
  const auto q = download<uint8_t>(dq, N * K);
  const auto sc = download<float>(dsc, N / 128 * (K / 128));
  const auto bf = download<uint16_t>(dbf, N * K);
  for (int64_t nt = 0; nt < N / 128; ++nt) {
    int64_t wrong = 0, first = -1, bf_wrong = 0, scale_wrong = 0, inexact = 0;
    for (int64_t kt = 0; kt < K / 128; ++kt) {
      int emax = 0, emin = 255;
      for (int64_t r = nt * 128; r < nt * 128 + 128; ++r)
        for (int64_t g = kt * 4; g < kt * 4 + 4; ++g) {
          emax = std::max<int>(emax, m.s[r * (K / 32) + g]);
          emin = std::min<int>(emin, m.s[r * (K / 32) + g]);
        }
      const float s = sc[nt * (K / 128) + kt];
      scale_wrong += s != std::ldexp(1.f, emax - 127 - 6);
      const bool exact_tile = emax - emin <= 11;
      for (int64_t r = nt * 128; r < nt * 128 + 128; ++r)
        for (int64_t c = kt * 128; c < kt * 128 + 128; ++c) {
          const float v = mxfp4_value(m, r, c), got = e4m3_to_f32(q[r * K + c]) * s;
          const float want = exact_tile ? v : e4m3_to_f32(e4m3_encode(v / s)) * s;
          if (got != want) {
            if (first < 0) first = r * K + c;
            ++wrong;
          }
          inexact += got != v;
          if (exact_tile) bf_wrong += got != bf16_to_f32(bf[r * K + c]);
        }
    }
    std::printf("mxfp4->fp8 rows %lld..%lld (E8M0 spread %d): %lld off the rule (first %lld), %lld not exact, "
                "%lld != dequant_mxfp4_to_bf16 (exact tiles), %lld wrong scales\n",
                (long long)nt * 128, (long long)nt * 128 + 127, spread[nt], (long long)wrong, (long long)first,
                (long long)inexact, (long long)bf_wrong, (long long)scale_wrong);
    EXPECT_EQ(wrong, 0) << "row block " << nt << ", first at row " << first / K << " col " << first % K;
    EXPECT_EQ(bf_wrong, 0);
    EXPECT_EQ(scale_wrong, 0);
    if (spread[nt] <= 11) {
      EXPECT_EQ(inexact, 0);
    } else if (spread[nt] >= 16) {
      EXPECT_GT(inexact, 0) << "a spread of " << spread[nt] << " must lose small values";
    }
  }
}

// fp8_linear_lt over the re-blocked expert equals the bf16 GEMM over the dequantised expert on the
// same (fp8-quantised) activation: with spread <= 11 both weights are exact, so only the
// accumulation differs; with spread 24 the values below 2^-15 of the tile's largest are lost.
TEST(CudaModelOps, Fp8LtOverConvertedExpertMatchesBf16) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(34);
  const int64_t N = 1024, K = 2048;
  Dev ws(dc::fp8_linear_lt_workspace_bytes());
  for (int sp : {8, 24}) {
    const Mxfp4Host m = make_mxfp4(N, K, std::vector<int>(N / 128, sp), rng);
    Dev dw(m.w.data(), m.w.size()), ds(m.s.data(), m.s.size()), dq(N * K), dsc(N / 128 * (K / 128) * 4),
        dbf(N * K * 2);
    ASSERT_TRUE(dc::mxfp4_to_device_layout(dw.as<uint8_t>(), int64_t(m.w.size()))) << dc::last_error();
    ASSERT_TRUE(dc::mxfp4_to_fp8_blocks(dw.as<uint8_t>(), ds.as<uint8_t>(), N, K, dq.as<uint8_t>(), dsc.as<float>()));
    ASSERT_TRUE(dc::dequant_mxfp4_to_bf16(dw.as<uint8_t>(), ds.as<uint8_t>(), N, K, dbf.as<uint16_t>()));
    const dc::Fp8Weight fw{dq.as<uint8_t>(), dsc.p, true, N, K};
    for (int64_t M : {int64_t(64), int64_t(300)}) {
      const auto x = randn(M * K, rng);
      Dev dx(x.data(), x.size() * 4), dxq(M * K), dxs(M * K / 128 * 4), dy(M * N * 4), dref(M * N * 4);
      ASSERT_TRUE(dc::quantize_act_fp8_t(dx.p, false, M, K, dxq.as<uint8_t>(), dxs.as<float>()));
      ASSERT_TRUE(dc::synchronize());
      const auto xq = download<uint8_t>(dxq, M * K);
      const auto xs = download<float>(dxs, M * K / 128);  // [K/128][M]
      std::vector<uint16_t> xdq(M * K);  // e4m3 * 2^k is exact in bf16
      for (int64_t r = 0; r < M; ++r)
        for (int64_t c = 0; c < K; ++c) xdq[r * K + c] = f32_to_bf16(e4m3_to_f32(xq[r * K + c]) * xs[(c / 128) * M + r]);
      Dev dxb(xdq.data(), xdq.size() * 2);
      ASSERT_TRUE(dc::fp8_linear_lt(dxq.as<uint8_t>(), dxs.as<float>(), M, fw, dy.p, false, ws.p)) << dc::last_error();
      ASSERT_TRUE(dc::bf16_linear_lt(dxb.as<uint16_t>(), M, dbf.as<uint16_t>(), N, K, dref.p, false, ws.p))
          << dc::last_error();
      ASSERT_TRUE(dc::synchronize()) << dc::last_error();
      const auto y = download<float>(dy, M * N), r = download<float>(dref, M * N);
      const ErrStats e = compare(y, std::vector<double>(r.begin(), r.end()));
      std::printf("fp8_linear_lt(converted) vs bf16 GEMM(dequant) M=%-3lld spread %2d: rel_l2 %.2e, max abs %.2e\n",
                  (long long)M, sp, e.rel_l2, e.max_abs);
      // 1e-3 as fp8_linear_lt vs the CPU (the tensor cores' FP8 accumulation within a 128-K block
      // is not plain fp32); a wrong scale or layout gives O(1).
      EXPECT_LT(e.rel_l2, 1e-3) << "M=" << M << " spread " << sp;
    }
  }
}

// ---------------- expert sort ----------------

TEST(CudaModelOps, MoeSortTokensMatchesStableSortAndBuildGroups) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(35);
  const int k = 6;
  struct Case {
    int64_t T, E;
    bool skewed;  // most slots on experts 0..3
  };
  const Case cases[] = {{1, 256, false},  {37, 256, false},  {8192, 256, false}, {1, 32, false},
                        {37, 32, false},  {8192, 32, false}, {8192, 256, true},  {1365, 256, false},
                        {256, 32, false}, {256, 32, true},   {1365, 256, true},  {300, 512, false},
                        {43, 32, true},   {42, 32, true}};
  for (const auto& c : cases) {
    std::vector<int32_t> ex(c.T * k);
    for (int64_t t = 0; t < c.T; ++t) {  // k distinct experts per token as top-k gives (skewed: may repeat)
      std::vector<int32_t> all(c.E);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      if (c.skewed && t % 8) std::iota(all.begin(), all.begin() + 4, 0);
      for (int j = 0; j < k; ++j) ex[t * k + j] = all[j];
    }
    std::vector<int32_t> counts(c.E, 0), off(c.E + 1, 0), pos(ex.size());
    for (auto e : ex) ++counts[e];
    for (int64_t e = 0; e < c.E; ++e) off[e + 1] = off[e] + counts[e];
    {
      std::vector<int32_t> next(off.begin(), off.end() - 1);
      for (size_t i = 0; i < ex.size(); ++i) pos[i] = next[ex[i]]++;
    }
    Dev dex(ex.data(), ex.size() * 4), doff((c.E + 1) * 4), dpos(ex.size() * 4),
        dws(dc::moe_sort_tokens_workspace_bytes(c.T, k, c.E));
    ASSERT_TRUE(dc::moe_sort_tokens(dex.as<int32_t>(), c.T, k, c.E, doff.as<int32_t>(), dpos.as<int32_t>(), dws.p))
        << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const auto goff = download<int32_t>(doff, c.E + 1), gpos = download<int32_t>(dpos, ex.size());
    int64_t off_bad = -1, pos_bad = -1;
    for (int64_t e = 0; e <= c.E && off_bad < 0; ++e)
      if (goff[e] != off[e]) off_bad = e;
    for (size_t i = 0; i < ex.size() && pos_bad < 0; ++i)
      if (gpos[i] != pos[i]) pos_bad = int64_t(i);
    // The groups built from these offsets (any T; 64-row groups, as the wide kernels take them):
    // each expert's rows off[e]..off[e+1] in order, 64 at a time, then m = 0 to the end.
    const int gr = 64, mg = dc::moe_max_groups(c.T, k, c.E, gr);
    std::vector<dc::ExpertPtrs> ptrs(c.E, dc::ExpertPtrs{});
    Dev dptrs(ptrs.data(), ptrs.size() * sizeof(dc::ExpertPtrs)), dummy(16), dpos2(ex.size() * 4);
    Dev o13(2 * size_t(mg) * sizeof(dc::Mxfp4Group)), o2(size_t(mg) * sizeof(dc::Mxfp4Group));
    float* f = dummy.as<float>();
    ASSERT_TRUE(dc::moe_build_groups(nullptr, c.T, k, c.E, dptrs.as<dc::ExpertPtrs>(), f, f, f, f, f, 0, 0, mg,
                                     dpos.as<int32_t>(), o13.as<dc::Mxfp4Group>(), o2.as<dc::Mxfp4Group>(), nullptr,
                                     gr, doff.as<int32_t>()))
        << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const auto h13 = download<dc::Mxfp4Group>(o13, 2 * size_t(mg)), h2 = download<dc::Mxfp4Group>(o2, mg);
    int64_t g = 0, groups_bad = -1;
    for (int64_t e = 0; e < c.E; ++e)
      for (int64_t r0 = off[e]; r0 < off[e + 1]; r0 += gr, ++g) {
        const int32_t m = static_cast<int32_t>(std::min<int64_t>(gr, off[e + 1] - r0));
        const bool ok = h2[g].m == m && h2[g].row0 == r0 && h13[2 * g].m == m && h13[2 * g + 1].row0 == r0;
        if (!ok && groups_bad < 0) groups_bad = g;
      }
    for (; g < mg; ++g)
      if ((h2[g].m != 0 || h13[2 * g].m != 0) && groups_bad < 0) groups_bad = g;
    EXPECT_EQ(groups_bad, -1) << "T=" << c.T << " E=" << c.E << ": groups from offsets, first wrong " << groups_bad;
    EXPECT_EQ(download<int32_t>(dpos, ex.size()), gpos) << "moe_build_groups with offsets wrote slot_pos";
    const char* vs_groups = "n/a (T*k > 8192)";
    if (c.T * k <= dc::moe_build_groups_max_slots()) {  // the one-block sort: the same slot_pos and groups
      Dev g13(2 * size_t(mg) * sizeof(dc::Mxfp4Group)), g2(size_t(mg) * sizeof(dc::Mxfp4Group));
      ASSERT_TRUE(dc::moe_build_groups(dex.as<int32_t>(), c.T, k, c.E, dptrs.as<dc::ExpertPtrs>(), f, f, f, f, f, 0, 0,
                                       mg, dpos2.as<int32_t>(), g13.as<dc::Mxfp4Group>(), g2.as<dc::Mxfp4Group>(),
                                       nullptr, gr))
          << dc::last_error();
      ASSERT_TRUE(dc::synchronize()) << dc::last_error();
      const auto p2 = download<int32_t>(dpos2, ex.size());
      const auto b13 = download<dc::Mxfp4Group>(g13, 2 * size_t(mg)), b2 = download<dc::Mxfp4Group>(g2, mg);
      const bool same = p2 == gpos && std::memcmp(b13.data(), h13.data(), b13.size() * sizeof(b13[0])) == 0 &&
                        std::memcmp(b2.data(), h2.data(), b2.size() * sizeof(b2[0])) == 0;
      vs_groups = same ? "equal" : "DIFFERENT";
      EXPECT_TRUE(same) << "T=" << c.T << " E=" << c.E;
    } else {  // past its limit without offsets: an error, nothing launched
      EXPECT_FALSE(dc::moe_build_groups(dex.as<int32_t>(), c.T, k, c.E, dptrs.as<dc::ExpertPtrs>(), f, f, f, f, f, 0,
                                        0, mg, dpos2.as<int32_t>(), o13.as<dc::Mxfp4Group>(), o2.as<dc::Mxfp4Group>(),
                                        nullptr, gr));
    }
    std::printf("moe_sort_tokens T=%-5lld k=%d E=%-3lld%s: first wrong offset %lld, first wrong slot_pos %lld (-1: "
                "none), vs moe_build_groups %s\n",
                (long long)c.T, k, (long long)c.E, c.skewed ? " skewed" : "", (long long)off_bad, (long long)pos_bad,
                vs_groups);
    EXPECT_EQ(off_bad, -1) << "T=" << c.T << " E=" << c.E;
    EXPECT_EQ(pos_bad, -1) << "T=" << c.T << " E=" << c.E << " slot " << pos_bad;
  }
}

// The query heads' fused tail against the three kernels it replaces, bit for bit: D 256 / 512 /
// 1024 (RoPE on the last 64), 64 rows per position, positions up to 1M, rows of very different
// magnitudes (the norm's sum order shows there first); 64 rows (blocks of 2 warps) and 2,368 (of 8).
TEST(CudaModelOps, HeadNormRopeMatchesThreeKernels) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(31);
  for (int64_t D : {int64_t(256), int64_t(512), int64_t(1024)})
    for (int64_t rows : {int64_t(64), int64_t(64 * 37)}) {
      const int64_t R = 64;
      auto x = randn(rows * D, rng, 1.f);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < D; ++c) x[r * D + c] *= std::ldexp(1.f, int(r % 23) - 11);
      std::vector<int32_t> pos(rows / 64);
      for (auto& p : pos) p = static_cast<int32_t>(rng() % 1000000);
      std::vector<float> inv(R / 2);
      for (int64_t i = 0; i < R / 2; ++i) inv[i] = std::pow(10000.f, -2.f * float(i) / float(R));
      Dev dx(x.data(), x.size() * 4), dy(x.size() * 4), dpos(pos.data(), pos.size() * 4), dinv(inv.data(), inv.size() * 4);
      Dev ref16(rows * D * 2), out16(rows * D * 2);
      ASSERT_TRUE(dc::head_norm_rope_bf16(dx.as<float>(), rows, D, 1e-6f, D - R, int(R / 2), dpos.as<int32_t>(), 64,
                                          dinv.as<float>(), out16.as<uint16_t>(), nullptr))
          << dc::last_error();
      ASSERT_TRUE(dc::rms_norm(dx.as<float>(), rows, D, nullptr, 1e-6f, dy.as<float>()));
      ASSERT_TRUE(dc::rope_rows(dy.as<float>(), rows, D, D - R, int(R / 2), dpos.as<int32_t>(), 64, dinv.as<float>(),
                                nullptr));
      ASSERT_TRUE(dc::cast_f32_to_bf16(dy.as<float>(), rows, D, ref16.as<uint16_t>(), D));
      ASSERT_TRUE(dc::synchronize()) << dc::last_error();
      const auto a = download<uint16_t>(out16, rows * D), b = download<uint16_t>(ref16, rows * D);
      int64_t bad = -1;
      for (int64_t i = 0; i < rows * D && bad < 0; ++i)
        if (a[i] != b[i]) bad = i;
      EXPECT_LT(bad, 0) << "D=" << D << " rows " << rows << ": first mismatch at row " << bad / D << " col " << bad % D;
      EXPECT_EQ(download<float>(dx, rows * D), x) << "x must not be modified";
    }
  EXPECT_FALSE(dc::head_norm_rope_bf16(nullptr, 1, 320, 1e-6f, 256, 32, nullptr, 1, nullptr, nullptr, nullptr));
}

// The K=V row's fused tail against the four kernels it replaces, bit for bit: rms_norm with the
// kv_norm weight, RoPE on the last 64 of 512, bf16, and the first n_ring rows into their rings
// (positions wrapping the window of 128, one negative: slot by rows_to_rings' rule). Every ring
// starts from the same random bytes, so a slot written in one run and not the other shows. Rows of
// very different magnitudes; 1 row (batch 1), 37 rows of which 29 decode, 300 prefill rows.
TEST(CudaModelOps, KvNormRopeMatchesFourKernels) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(41);
  const int64_t D = 512, R = 64, W = 128;
  for (const auto& [rows, n_ring] : {std::pair<int64_t, int64_t>{1, 1}, {37, 29}, {300, 0}}) {
    auto x = randn(rows * D, rng, 1.f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < D; ++c) x[r * D + c] *= std::ldexp(1.f, int(r % 23) - 11);
    const auto w = randn(D, rng, 1.f);
    std::vector<int32_t> pos(rows);
    for (auto& p : pos) p = static_cast<int32_t>(rng() % 1000000);
    if (rows > 2) pos[2] = -3;
    std::vector<float> inv(R / 2);
    for (int64_t i = 0; i < R / 2; ++i) inv[i] = std::pow(10000.f, -2.f * float(i) / float(R));
    std::vector<uint16_t> ring0(std::max<int64_t>(n_ring, 1) * W * D);
    for (auto& v : ring0) v = static_cast<uint16_t>(rng());
    Dev dx(x.data(), x.size() * 4), dy(x.size() * 4), dw(w.data(), w.size() * 4), dpos(pos.data(), pos.size() * 4),
        dinv(inv.data(), inv.size() * 4), ref16(rows * D * 2), out16(rows * D * 2),
        ref_rings(ring0.data(), ring0.size() * 2), out_rings(ring0.data(), ring0.size() * 2);
    std::vector<uint16_t*> pr(std::max<int64_t>(n_ring, 1)), po(pr.size());
    for (size_t b = 0; b < pr.size(); ++b) {
      pr[b] = ref_rings.as<uint16_t>() + b * W * D;
      po[b] = out_rings.as<uint16_t>() + b * W * D;
    }
    Dev dpr(pr.data(), pr.size() * sizeof(void*)), dpo(po.data(), po.size() * sizeof(void*));
    ASSERT_TRUE(dc::kv_norm_rope_bf16(dx.as<float>(), rows, D, dw.as<float>(), 1e-6f, D - R, int(R / 2),
                                      dpos.as<int32_t>(), dinv.as<float>(), out16.as<uint16_t>(),
                                      dpo.as<uint16_t* const>(), n_ring, W, nullptr))
        << dc::last_error();
    ASSERT_TRUE(dc::rms_norm(dx.as<float>(), rows, D, dw.as<float>(), 1e-6f, dy.as<float>()));
    ASSERT_TRUE(dc::rope_rows(dy.as<float>(), rows, D, D - R, int(R / 2), dpos.as<int32_t>(), 1, dinv.as<float>(),
                              nullptr));
    ASSERT_TRUE(dc::cast_f32_to_bf16(dy.as<float>(), rows, D, ref16.as<uint16_t>(), D));
    if (n_ring > 0) {
      ASSERT_TRUE(dc::rows_to_rings(dy.as<float>(), n_ring, D, dpr.as<uint16_t* const>(), dpos.as<int32_t>(), W));
    }
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    int64_t bad = first_bit_mismatch(download<uint16_t>(out16, rows * D), download<uint16_t>(ref16, rows * D));
    EXPECT_LT(bad, 0) << rows << " rows: first mismatch at row " << bad / D << " col " << bad % D;
    bad = first_bit_mismatch(download<uint16_t>(out_rings, ring0.size()), download<uint16_t>(ref_rings, ring0.size()));
    EXPECT_LT(bad, 0) << rows << " rows: rings differ first in ring " << bad / (W * D) << " slot " << bad % (W * D) / D;
    EXPECT_EQ(download<float>(dx, rows * D), x) << "x must not be modified";
  }
  EXPECT_FALSE(dc::kv_norm_rope_bf16(nullptr, 1, 320, nullptr, 1e-6f, 256, 32, nullptr, nullptr, nullptr, nullptr, 0, 128,
                                     nullptr));
  EXPECT_FALSE(dc::kv_norm_rope_bf16(nullptr, 1, 512, nullptr, 1e-6f, 448, 32, nullptr, nullptr, nullptr, nullptr, 1, 128,
                                     nullptr))
      << "ring rows without rings";
}

// The bf16-input form (wq_b's bf16 output on cuBLASLt) against the fp32 form on the same values:
// each bf16 widens exactly, so every output bit must agree. D 256 / 512 / 1024, rows of very
// different magnitudes, 64 rows a position.
TEST(CudaModelOps, HeadNormRopeFromBf16MatchesFp32Form) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(37);
  for (int64_t D : {int64_t(256), int64_t(512), int64_t(1024)}) {
    const int64_t rows = 64 * 29 + 64, R = 64;
    std::vector<uint16_t> x16(rows * D);
    std::vector<float> x(rows * D);
    const auto v = randn(rows * D, rng, 1.f);
    for (int64_t i = 0; i < rows * D; ++i) {
      x16[i] = f32_to_bf16(v[i] * std::ldexp(1.f, int((i / D) % 19) - 9));
      x[i] = bf16_to_f32(x16[i]);
    }
    std::vector<int32_t> pos(rows / 64);
    for (auto& p : pos) p = static_cast<int32_t>(rng() % 1000000);
    std::vector<float> inv(R / 2);
    for (int64_t i = 0; i < R / 2; ++i) inv[i] = std::pow(10000.f, -2.f * float(i) / float(R));
    Dev dx(x.data(), x.size() * 4), dx16(x16.data(), x16.size() * 2), dpos(pos.data(), pos.size() * 4),
        dinv(inv.data(), inv.size() * 4), ref16(rows * D * 2), out16(rows * D * 2);
    ASSERT_TRUE(dc::head_norm_rope_bf16(dx.as<float>(), rows, D, 1e-6f, D - R, int(R / 2), dpos.as<int32_t>(), 64,
                                        dinv.as<float>(), ref16.as<uint16_t>(), nullptr))
        << dc::last_error();
    ASSERT_TRUE(dc::head_norm_rope_bf16_in(dx16.as<uint16_t>(), rows, D, 1e-6f, D - R, int(R / 2),
                                           dpos.as<int32_t>(), 64, dinv.as<float>(), out16.as<uint16_t>(), nullptr))
        << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const int64_t bad = first_bit_mismatch(download<uint16_t>(out16, rows * D), download<uint16_t>(ref16, rows * D));
    EXPECT_LT(bad, 0) << "D=" << D << ": first mismatch at row " << bad / D << " col " << bad % D;
  }
  EXPECT_FALSE(dc::head_norm_rope_bf16_in(nullptr, 1, 320, 1e-6f, 256, 32, nullptr, 1, nullptr, nullptr, nullptr));
}

}  // namespace
}  // namespace deepinfer
