// Parity of the decode-layer ops (mHC pre/post, MoE routing, clamped SwiGLU, rows_to_rings)
// against the CPU backend's functions (model/deepseek_v4/mhc.h, moe.h) on random inputs (the MoE
// grouping, experts and combine: cuda_experts_test.cpp). Tolerances: mHC pre/post/comb max abs
// 1e-5, collapsed input and hc_post rel L2 1e-5; routing ids exact on tokens whose k-th and
// (k+1)-th keys differ by > 1e-3 (no near-tie), weights max abs 1e-5; SwiGLU rel 1e-6. Row
// invariance: a token's mHC and routing outputs are bitwise equal whether computed alone (T = 1,
// the decode kernels) or inside T = 7, 40, 300, 4100 (the prefill kernels). rows_to_rings exact
// (bf16 RNE into slot pos % window of each ring, nothing else written). PrefillSpeed prints
// CUDA-event times (no assertion). Skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>

#include "backend/cuda/layer_ops.h"
#include "backend/cuda/model_ops.h"
#include "backend/cuda/v4_ops.h"
#include "cuda_test_util.h"
#include "model/deepseek_v4/mhc.h"
#include "model/deepseek_v4/moe.h"
#include "model/numerics.h"

namespace deepinfer::cudatest {
namespace {

Weight f32_weight(int64_t rows, int64_t cols, const std::vector<float>& v) {
  Weight w;
  w.name = "w";
  w.format = WeightFormat::kF32;
  w.rows = rows;
  w.cols = cols;
  w.data = Tensor::zeros(DType::kF32, {rows, cols});
  std::copy(v.begin(), v.end(), w.data.mutable_span<float>().begin());
  return w;
}

double max_abs(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

template <class T>
std::vector<T> slice(const std::vector<T>& v, int64_t row, int64_t width) {
  return std::vector<T>(v.begin() + row * width, v.begin() + (row + 1) * width);
}

TEST(CudaLayerOps, HcPreAndPostMatchCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(11);
  const int64_t n = 4, mix = 24;
  struct Case {
    int64_t d;
    std::vector<int64_t> Ts;
  };
  // chunk partials per token: d / 128 = 32 (one load batch of the chunk sum), 40 (a batch of 32,
  // then one of 8), 24 (batches of 8 only)
  const Case cases[] = {{4096, {1, 5, 7, 33, 300, 4100}}, {5120, {1, 40, 300}}, {3072, {1, 40, 300}}};
  for (const Case& cs : cases) {
    const int64_t d = cs.d;
    v4::HcParams p;
    p.n = n, p.d = d, p.rms_eps = 1e-6f, p.hc_eps = 1e-6f, p.sinkhorn_iters = 20;
    v4::HcWeights w;
    const auto fnv = randn(mix * n * d, rng, 0.01f);
    w.fn = f32_weight(mix, n * d, fnv);
    w.base = randn(mix, rng, 0.5f);
    w.scale = {0.8f, 1.3f, 2.0f};
    Dev dfn(fnv.data(), fnv.size() * 4), dbase(w.base.data(), mix * 4), dscale(w.scale.data(), 12);
    for (int64_t T : cs.Ts) {
      const auto X = randn(T * n * d, rng);
      const auto f = randn(T * d, rng);
      v4::HcMix ref = v4::hc_mix(cpu, p, w, X.data(), T);
      ref.input.resize(T * d);
      v4::hc_collapse(cpu, p, ref.pre.data(), X.data(), T, ref.input.data());
      std::vector<float> Xpost = X;
      v4::hc_expand(cpu, p, ref.post.data(), ref.comb.data(), f.data(), Xpost.data(), T);

      Dev dX(X.data(), X.size() * 4), df(f.data(), f.size() * 4);
      Dev dpre(T * n * 4), dpost(T * n * 4), dcomb(T * n * n * 4), din(T * d * 4);
      Dev ws(dc::hc_pre_workspace_bytes(T, d));
      ASSERT_TRUE(dc::hc_pre(dX.as<float>(), T, d, dfn.as<float>(), dbase.as<float>(), dscale.as<float>(), p.rms_eps,
                             p.hc_eps, 20, dpre.as<float>(), dpost.as<float>(), dcomb.as<float>(), din.as<float>(),
                             ws.p))
          << dc::last_error();
      ASSERT_TRUE(dc::synchronize()) << dc::last_error();
      const double e_pre = max_abs(download<float>(dpre, T * n), ref.pre);
      const double e_post = max_abs(download<float>(dpost, T * n), ref.post);
      const double e_comb = max_abs(download<float>(dcomb, T * n * n), ref.comb);
      const double e_in = rel_l2(download<float>(din, T * d), ref.input);
      std::printf("hc_pre d=%lld T=%lld: max abs pre %.3g post %.3g comb %.3g, input rel L2 %.3g\n", (long long)d,
                  (long long)T, e_pre, e_post, e_comb, e_in);
      EXPECT_LT(e_pre, 1e-5) << "d=" << d << " T=" << T;
      EXPECT_LT(e_post, 1e-5) << "d=" << d << " T=" << T;
      EXPECT_LT(e_comb, 1e-5) << "d=" << d << " T=" << T;
      EXPECT_LT(e_in, 1e-5) << "d=" << d << " T=" << T;
      // hc_post on the CPU's own mix (isolates the expand)
      Dev cpost(ref.post.data(), T * n * 4), ccomb(ref.comb.data(), T * n * n * 4);
      ASSERT_TRUE(dc::hc_post(dX.as<float>(), T, d, cpost.as<float>(), ccomb.as<float>(), df.as<float>()));
      const double e_post_x = rel_l2(download<float>(dX, T * n * d), Xpost);
      std::printf("hc_post d=%lld T=%lld: rel L2 %.3g\n", (long long)d, (long long)T, e_post_x);
      EXPECT_LT(e_post_x, 1e-5) << "d=" << d << " T=" << T;
    }
  }
}

// hc_pre / hc_post of a row alone (T = 1: decode kernels) == the same row inside T = 7, 40, 300,
// 4100 (the mid-T partial at 40 and 300, the prefill one at 4100, the fused and the split finish),
// bit for bit.
TEST(CudaLayerOps, HcRowInvariance) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(15);
  const int64_t d = 4096, n = 4, mix = 24, Tmax = 4100;
  const auto fnv = randn(mix * n * d, rng, 0.01f);
  const auto base = randn(mix, rng, 0.5f);
  const std::vector<float> scale = {0.8f, 1.3f, 2.0f};
  const auto X = randn(Tmax * n * d, rng);
  const auto f = randn(Tmax * d, rng);
  Dev dfn(fnv.data(), fnv.size() * 4), dbase(base.data(), mix * 4), dscale(scale.data(), 12);
  Dev dX(X.data(), X.size() * 4), df(f.data(), f.size() * 4);
  struct Out {
    std::vector<float> pre, post, comb, input, xpost;
  };
  // outputs of rows [row0, row0 + T)
  auto run = [&](int64_t row0, int64_t T) {
    Dev xin(X.data() + row0 * n * d, T * n * d * 4);
    Dev dpre(T * n * 4), dpost(T * n * 4), dcomb(T * n * n * 4), din(T * d * 4), ws(dc::hc_pre_workspace_bytes(T, d));
    Out o;
    EXPECT_TRUE(dc::hc_pre(xin.as<float>(), T, d, dfn.as<float>(), dbase.as<float>(), dscale.as<float>(), 1e-6f, 1e-6f,
                           20, dpre.as<float>(), dpost.as<float>(), dcomb.as<float>(), din.as<float>(), ws.p))
        << dc::last_error();
    EXPECT_TRUE(dc::hc_post(xin.as<float>(), T, d, dpost.as<float>(), dcomb.as<float>(), df.as<float>() + row0 * d))
        << dc::last_error();
    EXPECT_TRUE(dc::synchronize()) << dc::last_error();
    o.pre = download<float>(dpre, T * n), o.post = download<float>(dpost, T * n);
    o.comb = download<float>(dcomb, T * n * n), o.input = download<float>(din, T * d);
    o.xpost = download<float>(xin, T * n * d);
    return o;
  };
  for (int64_t T : {int64_t(7), int64_t(40), int64_t(300), Tmax}) {
    const Out big = run(0, T);
    for (int64_t t : {int64_t(0), T / 2, T - 1}) {
      const Out one = run(t, 1);
      const int64_t m_pre = first_bit_mismatch(one.pre, slice(big.pre, t, n));
      const int64_t m_post = first_bit_mismatch(one.post, slice(big.post, t, n));
      const int64_t m_comb = first_bit_mismatch(one.comb, slice(big.comb, t, n * n));
      const int64_t m_in = first_bit_mismatch(one.input, slice(big.input, t, d));
      const int64_t m_x = first_bit_mismatch(one.xpost, slice(big.xpost, t, n * d));
      EXPECT_TRUE(m_pre < 0 && m_post < 0 && m_comb < 0 && m_in < 0 && m_x < 0)
          << "row " << t << " of T=" << T << " vs alone: first mismatch pre " << m_pre << " post " << m_post
          << " comb " << m_comb << " input " << m_in << " hc_post X " << m_x
          << (m_comb >= 0 ? " (comb " + std::to_string(one.comb[m_comb]) + " vs " +
                                std::to_string(big.comb[t * n * n + m_comb]) + ")"
                          : std::string());
    }
  }
}

// moe_combine_hc_post (the MoE's combine and the mHC post in one pass) == moe_combine then hc_post,
// bit for bit: with and without the shared expert's rows, top-k 6 and 1, T of a decode step and
// of a prefill chunk, a d that leaves the last column block part-filled.
TEST(CudaLayerOps, MoeCombineHcPostBitwise) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(16);
  const int64_t n = 4;
  for (const int64_t d : {int64_t(4096), int64_t(1280)})
    for (const int64_t T : {int64_t(1), int64_t(37), int64_t(600)})
      for (const int K : {6, 1})
        for (const bool with_shared : {true, false}) {
          const int64_t R = T * K;
          const auto X = randn(T * n * d, rng), y = randn(R * d, rng), sh = randn(T * d, rng);
          const auto w = randn(R, rng), post = randn(T * n, rng), comb = randn(T * n * n, rng, 0.5f);
          std::vector<int32_t> pos(R);
          std::iota(pos.begin(), pos.end(), 0);
          std::shuffle(pos.begin(), pos.end(), rng);
          Dev dX1(X.data(), X.size() * 4), dX2(X.data(), X.size() * 4), dy(y.data(), y.size() * 4);
          Dev dsh(sh.data(), sh.size() * 4), dw(w.data(), w.size() * 4), dpos(pos.data(), pos.size() * 4);
          Dev dpost(post.data(), post.size() * 4), dcomb(comb.data(), comb.size() * 4), df(T * d * 4);
          const float* shp = with_shared ? dsh.as<float>() : nullptr;
          ASSERT_TRUE(dc::moe_combine(dy.as<float>(), dpos.as<int32_t>(), dw.as<float>(), shp, T, K, d, df.as<float>()));
          ASSERT_TRUE(dc::hc_post(dX1.as<float>(), T, d, dpost.as<float>(), dcomb.as<float>(), df.as<float>()));
          ASSERT_TRUE(dc::moe_combine_hc_post(dy.as<float>(), dpos.as<int32_t>(), dw.as<float>(), shp, T, K, d,
                                              dX2.as<float>(), dpost.as<float>(), dcomb.as<float>()))
              << dc::last_error();
          ASSERT_TRUE(dc::synchronize()) << dc::last_error();
          const auto x1 = download<float>(dX1, T * n * d), x2 = download<float>(dX2, T * n * d);
          const int64_t bad = first_bit_mismatch(x1, x2);
          EXPECT_EQ(bad, -1) << "d " << d << " T " << T << " K " << K << " shared " << with_shared
                             << ": fused differs first at " << bad;
          EXPECT_NE(first_bit_mismatch(x1, X), -1) << "hc_post left X unchanged";
        }
}

// hc_pre(comb_later) then hc_pre_comb (the Sinkhorn on its own launch, e.g. another stream) ==
// hc_pre, bit for bit: pre, post, comb and input, at decode and mid sizes (1, 7, 300 tokens: the
// split applies) and past 1,024 tokens (hc_pre writes comb itself, hc_pre_comb does nothing).
// A random mHC site on the device: fn [24, 4d] (scale 0.01), base [24] (0.5), scale {0.8, 1.3, 2}.
struct HcSiteDev {
  std::vector<float> fn, base, scale;
  Dev dfn, dbase, dscale;
  HcSiteDev(std::mt19937& rng, int64_t d)
      : fn(randn(24 * 4 * d, rng, 0.01f)), base(randn(24, rng, 0.5f)), scale{0.8f, 1.3f, 2.0f},
        dfn(fn.data(), fn.size() * 4), dbase(base.data(), base.size() * 4), dscale(scale.data(), 12) {}
};

// hc_post / moe_combine_hc_post with an HcNext (the next sub-layer's chunk partials in the same
// launch), then hc_pre(..., partials_ready) == the post, then hc_pre, bit for bit: the new X and
// hc_pre's pre, post, comb and input, at 1 and 4 tokens (the kernel in clusters of 4 blocks), 5, 7
// and 16 (one block a column group; 16: the most hc_post_partial_fits takes), d 4096 and 1024, with
// and without the MoE combine; 17 tokens do not fit.
TEST(CudaLayerOps, HcPostNextPartialsBitwise) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(18);
  const int64_t n = 4;
  EXPECT_FALSE(dc::hc_post_partial_fits(17, 4096));
  EXPECT_FALSE(dc::hc_post_partial_fits(1, 1280));
  for (const int64_t d : {int64_t(4096), int64_t(1024)}) {
    HcSiteDev site(rng, d);
    for (const int64_t T : {int64_t(1), int64_t(4), int64_t(5), int64_t(7), int64_t(16)})
      for (const bool combine : {false, true}) {
        ASSERT_TRUE(dc::hc_post_partial_fits(T, d));
        const int K = 6;
        const auto X = randn(T * n * d, rng), f = randn(T * d, rng), y = randn(T * K * d, rng), sh = randn(T * d, rng);
        const auto w = randn(T * K, rng), post = randn(T * n, rng), comb = randn(T * n * n, rng, 0.5f);
        std::vector<int32_t> pos(T * K);
        std::iota(pos.begin(), pos.end(), 0);
        std::shuffle(pos.begin(), pos.end(), rng);
        Dev df(f.data(), f.size() * 4), dy(y.data(), y.size() * 4), dsh(sh.data(), sh.size() * 4);
        Dev dw(w.data(), w.size() * 4), dpos(pos.data(), pos.size() * 4);
        Dev dpost(post.data(), post.size() * 4), dcomb(comb.data(), comb.size() * 4);
        std::vector<float> outs[2][5];
        for (int fused = 0; fused < 2; ++fused) {
          Dev dX(X.data(), X.size() * 4), ws(dc::hc_pre_workspace_bytes(T, d));
          Dev pre(T * n * 4), po(T * n * 4), co(T * n * n * 4), in(T * d * 4);
          const dc::HcNext next{site.dfn.as<float>(), ws.p};
          const dc::HcNext* np = fused ? &next : nullptr;
          if (combine) {
            ASSERT_TRUE(dc::moe_combine_hc_post(dy.as<float>(), dpos.as<int32_t>(), dw.as<float>(), dsh.as<float>(), T, K,
                                                d, dX.as<float>(), dpost.as<float>(), dcomb.as<float>(), nullptr, np))
                << dc::last_error();
          } else {
            ASSERT_TRUE(dc::hc_post(dX.as<float>(), T, d, dpost.as<float>(), dcomb.as<float>(), df.as<float>(), nullptr, np))
                << dc::last_error();
          }
          ASSERT_TRUE(dc::hc_pre(dX.as<float>(), T, d, site.dfn.as<float>(), site.dbase.as<float>(),
                                 site.dscale.as<float>(), 1e-6f, 1e-6f, 20, pre.as<float>(), po.as<float>(),
                                 co.as<float>(), in.as<float>(), ws.p, nullptr, false, nullptr, fused == 1))
              << dc::last_error();
          ASSERT_TRUE(dc::synchronize()) << dc::last_error();
          outs[fused][0] = download<float>(dX, T * n * d), outs[fused][1] = download<float>(pre, T * n);
          outs[fused][2] = download<float>(po, T * n), outs[fused][3] = download<float>(co, T * n * n);
          outs[fused][4] = download<float>(in, T * d);
        }
        EXPECT_NE(first_bit_mismatch(outs[0][0], X), -1) << "the post left X unchanged";
        for (int o = 0; o < 5; ++o)
          EXPECT_EQ(first_bit_mismatch(outs[0][o], outs[1][o]), -1)
              << "d " << d << " T " << T << " combine " << combine << " output " << o << " (X, pre, post, comb, input)";
      }
  }
}

TEST(CudaLayerOps, HcCombLaterBitwise) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(17);
  const int64_t d = 4096, n = 4;
  HcSiteDev site(rng, d);
  Dev &dfn = site.dfn, &dbase = site.dbase, &dscale = site.dscale;
  for (const int64_t T : {int64_t(1), int64_t(7), int64_t(300), int64_t(1100)}) {
    const auto X = randn(T * n * d, rng);
    Dev dX(X.data(), X.size() * 4);
    std::vector<float> outs[2][4];
    for (int split = 0; split < 2; ++split) {
      Dev pre(T * n * 4), post(T * n * 4), comb(T * n * n * 4), in(T * d * 4), ws(dc::hc_pre_workspace_bytes(T, d));
      ASSERT_TRUE(dc::hc_pre(dX.as<float>(), T, d, dfn.as<float>(), dbase.as<float>(), dscale.as<float>(), 1e-6f, 1e-6f,
                             20, pre.as<float>(), post.as<float>(), comb.as<float>(), in.as<float>(), ws.p, nullptr,
                             split == 1))
          << dc::last_error();
      if (split == 1) {
        ASSERT_TRUE(dc::hc_pre_comb(T, d, dbase.as<float>(), dscale.as<float>(), 1e-6f, 1e-6f, 20, comb.as<float>(),
                                    ws.p))
            << dc::last_error();
      }
      ASSERT_TRUE(dc::synchronize()) << dc::last_error();
      outs[split][0] = download<float>(pre, T * n), outs[split][1] = download<float>(post, T * n);
      outs[split][2] = download<float>(comb, T * n * n), outs[split][3] = download<float>(in, T * d);
    }
    for (int o = 0; o < 4; ++o)
      EXPECT_EQ(first_bit_mismatch(outs[0][o], outs[1][o]), -1) << "T " << T << " output " << o
                                                                 << " (pre, post, comb, input)";
  }
}

// hc_pre with its norm (dc::HcNormPack: in hc_finish's launch below 1,025 tokens, its own launch
// from there) == hc_pre, then rms_norm_pack on its input, bit for bit: pre, post, comb, input, the
// normed rows, their e4m3 bytes and scales (row-major and K-block-major) and their bf16 copy; and
// the normed rows alone (no forms) == rms_norm. d 4096: 1, 7 (comb on the side), 32 tokens (the
// norm spread over a token's column blocks), 33 and 300 (one block a token) and 1,100; d 1024 and
// 2048 (one and two column blocks) at 1 and 7.
TEST(CudaLayerOps, HcPreNormPackBitwise) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(23);
  const int64_t n = 4;
  for (const int64_t d : {int64_t(4096), int64_t(1024), int64_t(2048)}) {
    HcSiteDev site(rng, d);
    Dev &dfn = site.dfn, &dbase = site.dbase, &dscale = site.dscale;
    const auto w = randn(d, rng, 0.3f);
    Dev dw(w.data(), d * 4);
    const std::vector<int64_t> Ts = d == 4096 ? std::vector<int64_t>{1, 7, 32, 33, 300, 1100} : std::vector<int64_t>{1, 7};
    for (const int64_t T : Ts) {
      const auto X = randn(T * n * d, rng);
      Dev dX(X.data(), X.size() * 4);
      for (const int forms : {0, 1, 2}) {  // 0: y alone; 1: e4m3 (row-major scales) + bf16; 2: e4m3, K-block-major
        const bool later = T == 7;
        // The FP8 expert kernels' token rows (qe, qes) below 1,025 tokens, with and without q:
        // moe_rows_fp8's bits at k = 1 from the same y.
        const bool experts = forms != 1 && T < 1025;
        std::vector<float> f32[2][5];
        std::vector<uint8_t> q8[2], e8[2];
        std::vector<float> es[2];
        std::vector<uint16_t> b16[2];
        for (int fused = 0; fused < 2; ++fused) {
          Dev pre(T * n * 4), post(T * n * 4), comb(T * n * n * 4), in(T * d * 4), ws(dc::hc_pre_workspace_bytes(T, d));
          Dev y(T * d * 4), q(T * d), qs(T * d / 128 * 4), y16(T * d * 2), qe(T * d), qes(T * d / 128 * 4);
          dc::HcNormPack pk;
          pk.weight = dw.as<float>(), pk.eps = 1e-6f, pk.y = y.as<float>();
          if (forms > 0) pk.q = q.as<uint8_t>(), pk.scales = qs.as<float>(), pk.scales_t = forms == 2;
          if (forms == 1) pk.y16 = y16.as<uint16_t>();
          if (fused && experts) pk.qe = qe.as<uint8_t>(), pk.qes = qes.as<float>();
          ASSERT_TRUE(dc::hc_pre(dX.as<float>(), T, d, dfn.as<float>(), dbase.as<float>(), dscale.as<float>(), 1e-6f,
                                 1e-6f, 20, pre.as<float>(), post.as<float>(), comb.as<float>(), in.as<float>(), ws.p,
                                 nullptr, later, fused ? &pk : nullptr))
              << dc::last_error();
          if (later) {
            ASSERT_TRUE(dc::hc_pre_comb(T, d, dbase.as<float>(), dscale.as<float>(), 1e-6f, 1e-6f, 20, comb.as<float>(),
                                        ws.p))
                << dc::last_error();
          }
          if (!fused) {
            ASSERT_TRUE(forms == 0 ? dc::rms_norm(in.as<float>(), T, d, dw.as<float>(), 1e-6f, y.as<float>())
                                   : dc::rms_norm_pack(in.as<float>(), T, d, dw.as<float>(), 1e-6f, y.as<float>(), pk.q,
                                                       pk.scales, pk.scales_t, pk.y16))
                << dc::last_error();
            if (experts) {
              ASSERT_TRUE(dc::moe_rows_fp8(y.as<float>(), T, 1, d, nullptr, qe.as<uint8_t>(), qes.as<float>(), T))
                  << dc::last_error();
            }
          }
          ASSERT_TRUE(dc::synchronize()) << dc::last_error();
          f32[fused][0] = download<float>(pre, T * n), f32[fused][1] = download<float>(post, T * n);
          f32[fused][2] = download<float>(comb, T * n * n), f32[fused][3] = download<float>(in, T * d);
          f32[fused][4] = download<float>(y, T * d);
          if (forms > 0) q8[fused] = download<uint8_t>(q, T * d);
          if (forms > 0) {
            const auto sc = download<float>(qs, T * d / 128);
            f32[fused][4].insert(f32[fused][4].end(), sc.begin(), sc.end());
          }
          if (forms == 1) b16[fused] = download<uint16_t>(y16, T * d);
          if (experts) e8[fused] = download<uint8_t>(qe, T * d), es[fused] = download<float>(qes, T * d / 128);
        }
        for (int o = 0; o < 5; ++o)
          EXPECT_EQ(first_bit_mismatch(f32[0][o], f32[1][o]), -1)
              << "d " << d << " T " << T << " forms " << forms << " output " << o << " (pre, post, comb, input, y + scales)";
        EXPECT_TRUE(q8[0] == q8[1]) << "d " << d << " T " << T << " forms " << forms << ": e4m3 bytes differ";
        EXPECT_TRUE(b16[0] == b16[1]) << "d " << d << " T " << T << " forms " << forms << ": bf16 copies differ";
        EXPECT_TRUE(e8[0] == e8[1]) << "d " << d << " T " << T << " forms " << forms << ": the experts' e4m3 rows differ";
        EXPECT_EQ(first_bit_mismatch(es[0], es[1]), -1) << "d " << d << " T " << T << " forms " << forms << ": their scales";
      }
    }
  }
  const int64_t d = 4096;
  HcSiteDev site(rng, d);
  Dev &dfn = site.dfn, &dbase = site.dbase, &dscale = site.dscale;
  // Bad input: q without scales.
  dc::HcNormPack bad;
  Dev y(4096 * 4), q(4096), X(4 * 4096 * 4), pre(16), post(16), comb(64), in(4096 * 4), ws(dc::hc_pre_workspace_bytes(1, d));
  bad.y = y.as<float>(), bad.q = q.as<uint8_t>();
  EXPECT_FALSE(dc::hc_pre(X.as<float>(), 1, d, dfn.as<float>(), dbase.as<float>(), dscale.as<float>(), 1e-6f, 1e-6f, 20,
                          pre.as<float>(), post.as<float>(), comb.as<float>(), in.as<float>(), ws.p, nullptr, false, &bad));
  // ... the experts' rows without their scales, or from 1,025 tokens (no launch: T's checks first).
  dc::HcNormPack bad_e;
  bad_e.y = y.as<float>(), bad_e.qe = q.as<uint8_t>();
  EXPECT_FALSE(dc::hc_pre(X.as<float>(), 1, d, dfn.as<float>(), dbase.as<float>(), dscale.as<float>(), 1e-6f, 1e-6f, 20,
                          pre.as<float>(), post.as<float>(), comb.as<float>(), in.as<float>(), ws.p, nullptr, false, &bad_e));
  bad_e.qes = y.as<float>();
  EXPECT_FALSE(dc::hc_pre(X.as<float>(), 1025, d, dfn.as<float>(), dbase.as<float>(), dscale.as<float>(), 1e-6f, 1e-6f,
                          20, pre.as<float>(), post.as<float>(), comb.as<float>(), in.as<float>(), ws.p, nullptr, false,
                          &bad_e));
}

TEST(CudaLayerOps, RouteMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(12);
  const int64_t E = 256, d = 4096;
  const int K = 6;
  v4::MoeParams p;
  p.n_experts = E, p.top_k = K, p.routed_scaling = 1.5f, p.norm_topk_prob = true;
  v4::MoeWeights w;
  std::vector<uint16_t> gb;
  w.gate = bf16_random_weight("gate", E, d, 0.02f, rng, gb);
  w.bias = randn(E, rng, 0.1f);
  Dev dg(gb.data(), gb.size() * 2), dbias(w.bias.data(), E * 4);
  int checked = 0, skipped = 0;
  for (int64_t T : {1, 7, 64, 128, 300, 4100}) {
    const auto h = randn(T * d, rng);
    const v4::Routing ref = v4::route(cpu, p, w, false, h.data(), nullptr, T);
    // CPU keys, to find near-ties
    std::vector<float> logits(T * E);
    cpu.linear(h.data(), T, w.gate, logits.data());
    Dev dh(h.data(), h.size() * 4), dl(T * E * 4), dex(T * K * 4), dw(T * K * 4);
    // The fp32 kernel, then the bf16 GEMM of three-part rows (model_ops.h), each against the CPU.
    for (const bool gemm : {false, true}) {
      Dev ws(gemm ? dc::moe_route_gemm_workspace_bytes(T, d, E) : 16);
      ASSERT_TRUE(gemm ? dc::moe_route_gemm(dh.as<float>(), T, d, dg.as<uint16_t>(), E, dbias.as<float>(), K, 1.5f,
                                            dl.as<float>(), dex.as<int32_t>(), dw.as<float>(), ws.p)
                       : dc::moe_route(dh.as<float>(), T, d, dg.as<uint16_t>(), E, dbias.as<float>(), K, 1.5f,
                                       dl.as<float>(), dex.as<int32_t>(), dw.as<float>()))
          << dc::last_error();
      const auto ex = download<int32_t>(dex, T * K);
      const auto wt = download<float>(dw, T * K);
      const auto gl = download<float>(dl, T * E);
      {  // The logits only (experts and weights null, as hash layers call it): the same bits.
        Dev dl2(T * E * 4);
        ASSERT_TRUE(gemm ? dc::moe_route_gemm(dh.as<float>(), T, d, dg.as<uint16_t>(), E, dbias.as<float>(), K, 1.5f,
                                              dl2.as<float>(), nullptr, nullptr, ws.p)
                         : dc::moe_route(dh.as<float>(), T, d, dg.as<uint16_t>(), E, dbias.as<float>(), K, 1.5f,
                                         dl2.as<float>(), nullptr, nullptr))
            << dc::last_error();
        EXPECT_EQ(first_bit_mismatch(download<float>(dl2, T * E), gl), -1) << "logits only, gemm " << gemm << " T=" << T;
        // One of the two null: an error, not a half-done route.
        EXPECT_FALSE(gemm ? dc::moe_route_gemm(dh.as<float>(), T, d, dg.as<uint16_t>(), E, dbias.as<float>(), K, 1.5f,
                                               dl2.as<float>(), dex.as<int32_t>(), nullptr, ws.p)
                          : dc::moe_route(dh.as<float>(), T, d, dg.as<uint16_t>(), E, dbias.as<float>(), K, 1.5f,
                                          dl2.as<float>(), nullptr, dw.as<float>()));
      }
      double lerr = 0, lmax = 0;
      for (size_t i = 0; i < gl.size(); ++i) {
        lerr = std::max(lerr, std::fabs(double(gl[i]) - logits[i]));
        lmax = std::max(lmax, std::fabs(double(logits[i])));
      }
      std::printf("route%s T=%lld: logits max abs err %.3g (max |logit| %.3g)\n", gemm ? " (bf16x3 GEMM)" : "",
                  (long long)T, lerr, lmax);
      // fp32 dot products of 4096 terms in another order: a few ulps of the terms' magnitudes
      EXPECT_LT(lerr, 2e-5 * lmax) << (gemm ? "gemm" : "kernel") << " T=" << T;
      for (int64_t t = 0; t < T; ++t) {
        std::vector<float> key(E);
        for (int64_t e = 0; e < E; ++e) {
          const float x = logits[t * E + e];
          key[e] = std::sqrt(x > 20.f ? x : std::log1p(std::exp(x))) + w.bias[e];
        }
        std::vector<float> s = key;
        std::sort(s.begin(), s.end(), std::greater<float>());
        bool near_tie = false;
        for (int j = 0; j < K; ++j) near_tie |= s[j] - s[j + 1] < 1e-3f;
        if (near_tie) {
          ++skipped;
          continue;
        }
        ++checked;
        for (int j = 0; j < K; ++j) {
          EXPECT_EQ(ex[t * K + j], ref.experts[t * K + j]) << "T=" << T << " t=" << t << " slot " << j << " gemm " << gemm;
          EXPECT_NEAR(wt[t * K + j], ref.weights[t * K + j], 1e-5) << "T=" << T << " t=" << t << " gemm " << gemm;
        }
      }
    }
  }
  EXPECT_GT(checked, 200);
  std::printf("routing: %d tokens compared, %d with near-ties skipped\n", checked, skipped);
}

// Hash-routed layers in one launch (hash_route_direct): the same experts and weight bits as the
// router's logits (moe_route, logits only) followed by hash_route, at decode and prefill sizes, for
// V4's shape and a narrow one; bad shapes refused.
TEST(CudaLayerOps, HashRouteDirectBitwise) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(41);
  const int64_t E = 256, V = 1000;
  for (const auto& [d, K] : {std::pair<int64_t, int>{4096, 6}, {512, 16}}) {
    std::vector<uint16_t> gb;
    bf16_random_weight("gate", E, d, 0.02f, rng, gb);
    std::vector<int32_t> tid2eid(V * K);
    for (auto& e : tid2eid) e = static_cast<int32_t>(rng() % E);
    Dev dg(gb.data(), gb.size() * 2), dt(tid2eid.data(), tid2eid.size() * 4);
    for (int64_t T : {1, 8, 300}) {
      const auto h = randn(T * d, rng);
      std::vector<int32_t> ids(T);
      for (auto& i : ids) i = static_cast<int32_t>(rng() % V);
      Dev dh(h.data(), h.size() * 4), di(ids.data(), T * 4), dl(T * E * 4), dex(T * K * 4), dw(T * K * 4),
          dex2(T * K * 4), dw2(T * K * 4);
      ASSERT_TRUE(dc::moe_route(dh.as<float>(), T, d, dg.as<uint16_t>(), E, nullptr, K, 1.5f, dl.as<float>(), nullptr,
                                nullptr))
          << dc::last_error();
      ASSERT_TRUE(dc::hash_route(dl.as<float>(), T, E, di.as<int32_t>(), dt.as<int32_t>(), K, 1.5f, dex.as<int32_t>(),
                                 dw.as<float>(), nullptr))
          << dc::last_error();
      ASSERT_TRUE(dc::hash_route_direct(dh.as<float>(), T, d, dg.as<uint16_t>(), di.as<int32_t>(), dt.as<int32_t>(), K,
                                        1.5f, dex2.as<int32_t>(), dw2.as<float>()))
          << dc::last_error();
      const auto ex = download<int32_t>(dex, T * K), ex2 = download<int32_t>(dex2, T * K);
      const auto w = download<float>(dw, T * K), w2 = download<float>(dw2, T * K);
      EXPECT_EQ(first_bit_mismatch(ex2, ex), -1) << "experts, d=" << d << " T=" << T;
      EXPECT_EQ(first_bit_mismatch(w2, w), -1) << "weights, d=" << d << " T=" << T;
      // Either half alone (the decode step's early experts, h not read; the weights on their own)
      Dev dex3(T * K * 4), dw3(T * K * 4);
      ASSERT_TRUE(dc::hash_route_direct(nullptr, T, d, nullptr, di.as<int32_t>(), dt.as<int32_t>(), K, 1.5f,
                                        dex3.as<int32_t>(), nullptr))
          << dc::last_error();
      ASSERT_TRUE(dc::hash_route_direct(dh.as<float>(), T, d, dg.as<uint16_t>(), di.as<int32_t>(), dt.as<int32_t>(), K,
                                        1.5f, nullptr, dw3.as<float>()))
          << dc::last_error();
      EXPECT_EQ(first_bit_mismatch(download<int32_t>(dex3, T * K), ex), -1) << "experts alone, d=" << d << " T=" << T;
      EXPECT_EQ(first_bit_mismatch(download<float>(dw3, T * K), w), -1) << "weights alone, d=" << d << " T=" << T;
      std::printf("hash_route_direct d=%lld k=%d T=%lld: experts %s, weights %s (first %g)\n", (long long)d, K,
                  (long long)T, ex2 == ex ? "equal" : "DIFFER", first_bit_mismatch(w2, w) < 0 ? "bitwise" : "DIFFER",
                  w2[0]);
    }
  }
  Dev any(16);
  EXPECT_FALSE(dc::hash_route_direct(any.as<float>(), 1, 4352, any.as<uint16_t>(), any.as<int32_t>(),
                                     any.as<int32_t>(), 6, 1.f, any.as<int32_t>(), any.as<float>()));
  EXPECT_NE(dc::last_error().find("d <= 4096"), std::string::npos) << dc::last_error();
  EXPECT_FALSE(dc::hash_route_direct(any.as<float>(), 1, 4096, any.as<uint16_t>(), any.as<int32_t>(),
                                     any.as<int32_t>(), 0, 1.f, any.as<int32_t>(), any.as<float>()));
  EXPECT_FALSE(dc::hash_route_direct(nullptr, 1, 4096, nullptr, any.as<int32_t>(), any.as<int32_t>(), 6, 1.f, nullptr,
                                     any.as<float>()))
      << "neither h nor experts";
  EXPECT_FALSE(dc::hash_route_direct(any.as<float>(), 1, 4096, any.as<uint16_t>(), any.as<int32_t>(),
                                     any.as<int32_t>(), 6, 1.f, any.as<int32_t>(), nullptr))
      << "h without weights";
}

// moe_route_gemm's workspace (host arithmetic, runs without a device): GEMMs of at most 2048
// rows, so an 8k-token prefill chunk needs cuBLASLt's 32 MB + 2048 x 3d bf16 + the tripled gate,
// not 8192 x 3d (192 MB at d = 4096).
TEST(CudaLayerOps, RouteGemmWorkspaceIsBounded) {
  const int64_t d = 4096, E = 256, MiB = int64_t(1) << 20;
  const auto at = [&](int64_t T) { return static_cast<int64_t>(dc::moe_route_gemm_workspace_bytes(T, d, E)); };
  EXPECT_EQ(at(8192), at(2048));
  EXPECT_EQ(at(2048), 32 * MiB + 2048 * 3 * d * 2 + E * 3 * d * 2);
  EXPECT_LT(at(300), at(2048));
}

// Router logits / experts / weights of a row alone (T = 1: the decode tile) == the same row
// inside T = 7, 64, 128, 300, 4100 (the 8x8, 8x16 and 16x32 tiles), bit for bit; also with the
// EP slice's 32 experts (8x8 tiles from 8 to 300 rows: wider ones would leave SMs idle there).
TEST(CudaLayerOps, RouteRowInvariance) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(16);
  const int64_t Emax = 256, d = 4096, Tmax = 4100;
  const int K = 6;
  const auto gf = randn(Emax * d, rng, 0.02f);
  std::vector<uint16_t> gb(gf.size());
  for (size_t i = 0; i < gf.size(); ++i) gb[i] = f32_to_bf16(gf[i]);
  const auto bias = randn(Emax, rng, 0.1f);
  const auto h = randn(Tmax * d, rng);
  Dev dg(gb.data(), gb.size() * 2), dbias(bias.data(), Emax * 4), dh(h.data(), h.size() * 4);
  struct Out {
    std::vector<float> logits, weights;
    std::vector<int32_t> experts;
  };
  for (const int64_t E : {int64_t(256), int64_t(32)}) {  // the first E rows of the gate
    auto run = [&](int64_t row0, int64_t T) {
      Dev dl(T * E * 4), dex(T * K * 4), dw(T * K * 4);
      EXPECT_TRUE(dc::moe_route(dh.as<float>() + row0 * d, T, d, dg.as<uint16_t>(), E, dbias.as<float>(), K, 1.5f,
                                dl.as<float>(), dex.as<int32_t>(), dw.as<float>()))
          << dc::last_error();
      EXPECT_TRUE(dc::synchronize()) << dc::last_error();
      return Out{download<float>(dl, T * E), download<float>(dw, T * K), download<int32_t>(dex, T * K)};
    };
    for (int64_t T : {int64_t(7), int64_t(64), int64_t(128), int64_t(300), Tmax}) {
      const Out big = run(0, T);
      for (int64_t t : {int64_t(0), T / 2, T - 1}) {
        const Out one = run(t, 1);
        const int64_t ml = first_bit_mismatch(one.logits, slice(big.logits, t, E));
        const int64_t me = first_bit_mismatch(one.experts, slice(big.experts, t, K));
        const int64_t mw = first_bit_mismatch(one.weights, slice(big.weights, t, K));
        EXPECT_TRUE(ml < 0 && me < 0 && mw < 0)
            << "row " << t << " of T=" << T << " vs alone: first mismatch logits " << ml << " experts " << me
            << " weights " << mw << " (E=" << E << ")"
            << (ml >= 0 ? " (logit " + std::to_string(one.logits[ml]) + " vs " + std::to_string(big.logits[t * E + ml]) +
                              ")"
                        : std::string());
      }
    }
  }
}

TEST(CudaLayerOps, SwigluMatchesHost) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(13);
  const int64_t R = 37, I = 2048, ld = 2 * I;
  const auto gu = randn(R * ld, rng, 8.f);
  Dev dgu(gu.data(), gu.size() * 4), da(R * I * 4);
  const float L = 10.f;
  ASSERT_TRUE(dc::swiglu(dgu.as<float>(), dgu.as<float>() + I, ld, R, I, L, da.as<float>()));
  std::vector<float> ref(R * I);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < I; ++i) {
      const float g = std::min(gu[r * ld + i], L), u = std::clamp(gu[r * ld + I + i], -L, L);
      ref[r * I + i] = g / (1.f + std::exp(-g)) * u;
    }
  EXPECT_LT(rel_l2(download<float>(da, R * I), ref), 1e-6);
}

// rows_to_rings: row b (fp32) lands as bf16 (round to nearest even, ties included) in ring b's slot
// pos[b] % window; every other element of every ring stays as it was. Exact.
TEST(CudaLayerOps, RowsToRingsExact) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(17);
  const int64_t B = 4, C = 70, Wn = 5;
  const std::vector<int32_t> pos{0, 7, 12, 131};  // slots 0, 2, 2, 1
  auto src = randn(B * C, rng, 3.f);
  src[1] = 1.00390625f;   // 1 + 2^-8: a tie, rounds to even (1.0)
  src[2] = 1.01171875f;   // 1 + 3 * 2^-8: a tie, rounds to even (1 + 2^-6)
  src[3] = -0.f;
  std::vector<std::unique_ptr<Dev>> rings;
  std::vector<uint16_t*> ptrs;
  const std::vector<uint16_t> sentinel(Wn * C, 0xabcd);
  for (int64_t b = 0; b < B; ++b) {
    rings.push_back(std::make_unique<Dev>(sentinel.data(), sentinel.size() * 2));
    ptrs.push_back(rings.back()->as<uint16_t>());
  }
  Dev dsrc(src.data(), src.size() * 4), dptrs(ptrs.data(), ptrs.size() * sizeof(uint16_t*)),
      dpos(pos.data(), pos.size() * 4);
  ASSERT_TRUE(dc::rows_to_rings(dsrc.as<float>(), B, C, dptrs.as<uint16_t* const>(), dpos.as<int32_t>(), Wn))
      << dc::last_error();
  ASSERT_TRUE(dc::synchronize()) << dc::last_error();
  for (int64_t b = 0; b < B; ++b) {
    std::vector<uint16_t> want = sentinel;
    for (int64_t c = 0; c < C; ++c) want[(pos[b] % Wn) * C + c] = f32_to_bf16(src[b * C + c]);
    const auto got = download<uint16_t>(*rings[b], Wn * C);
    EXPECT_EQ(first_bit_mismatch(got, want), -1) << "ring " << b;
  }
  EXPECT_EQ(f32_to_bf16(src[1]), 0x3f80);
  EXPECT_EQ(f32_to_bf16(src[2]), 0x3f82);
}

// Prefill speed (printed, not asserted): CUDA-event times of hc_pre, hc_post and moe_route on
// V4-Flash shapes (d 4096, 4 streams, 256 experts, top-6) at T = 1 .. 8192. GB/s counts the
// minimal traffic (hc_pre: X read once + fn + input written; hc_post: X read + written + f;
// route: h + gate + logits); TFLOP/s the dots (hc_pre 2*T*16384*25, route 2*T*4096*256).
TEST(CudaLayerOps, PrefillSpeed) {
  SKIP_WITHOUT_DEVICE();
  const int64_t d = 4096, n = 4, mix = 24, E = 256, Tmax = 8192;
  const int K = 6;
  Dev X(Tmax * n * d * 4), f(Tmax * d * 4), fn(mix * n * d * 4), base(mix * 4), scale(3 * 4);
  Dev pre(Tmax * n * 4), post(Tmax * n * 4), comb(Tmax * n * n * 4), in(Tmax * d * 4);
  Dev ws(dc::hc_pre_workspace_bytes(Tmax, d));
  Dev h(Tmax * d * 4), gate(E * d * 2), bias(E * 4), logits(Tmax * E * 4), ex(Tmax * K * 4), wt(Tmax * K * 4);
  ASSERT_TRUE(dc::fill_random(X.p, Tmax * n * d, dc::RandomKind::kF32, 1.f, 0.f, 1));
  ASSERT_TRUE(dc::fill_random(f.p, Tmax * d, dc::RandomKind::kF32, 1.f, 0.f, 2));
  ASSERT_TRUE(dc::fill_random(fn.p, mix * n * d, dc::RandomKind::kF32, 0.01f, 0.f, 3));
  ASSERT_TRUE(dc::fill_random(base.p, mix, dc::RandomKind::kF32, 0.5f, 0.f, 4));
  ASSERT_TRUE(dc::fill_random(scale.p, 3, dc::RandomKind::kF32, 1.f, 0.f, 5));
  ASSERT_TRUE(dc::fill_random(h.p, Tmax * d, dc::RandomKind::kF32, 1.f, 0.f, 6));
  ASSERT_TRUE(dc::fill_random(gate.p, E * d, dc::RandomKind::kBf16, 0.02f, 0.f, 7));
  ASSERT_TRUE(dc::fill_random(bias.p, E, dc::RandomKind::kF32, 0.1f, 0.f, 8));
  ASSERT_TRUE(dc::synchronize()) << dc::last_error();
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  // mean ms of `reps` calls after one warm-up call
  auto time_ms = [&](int reps, const std::function<bool()>& op) {
    if (!op()) return -1.0;
    cudaEventRecord(e0);
    for (int r = 0; r < reps; ++r)
      if (!op()) return -1.0;
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, e0, e1);
    return double(ms) / reps;
  };
  for (int64_t T : {1, 32, 256, 512, 1024, 2048, 8192}) {
    const int reps = T <= 1024 ? 100 : 10;
    const double t_pre = time_ms(reps, [&] {
      return dc::hc_pre(X.as<float>(), T, d, fn.as<float>(), base.as<float>(), scale.as<float>(), 1e-6f, 1e-6f, 20,
                        pre.as<float>(), post.as<float>(), comb.as<float>(), in.as<float>(), ws.p);
    });
    const double t_post = time_ms(reps, [&] {
      return dc::hc_post(X.as<float>(), T, d, post.as<float>(), comb.as<float>(), f.as<float>());
    });
    const double t_route = time_ms(reps, [&] {
      return dc::moe_route(h.as<float>(), T, d, gate.as<uint16_t>(), E, bias.as<float>(), K, 1.5f, logits.as<float>(),
                           ex.as<int32_t>(), wt.as<float>());
    });
    Dev rws(dc::moe_route_gemm_workspace_bytes(T, d, E));
    const double t_route_gemm = time_ms(reps, [&] {
      return dc::moe_route_gemm(h.as<float>(), T, d, gate.as<uint16_t>(), E, bias.as<float>(), K, 1.5f,
                                logits.as<float>(), ex.as<int32_t>(), wt.as<float>(), rws.p);
    });
    ASSERT_TRUE(t_pre > 0 && t_post > 0 && t_route > 0 && t_route_gemm > 0) << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const double b_pre = double(T) * n * d * 4 + double(mix) * n * d * 4 + double(T) * d * 4;
    const double f_pre = 2.0 * T * n * d * (mix + 1);
    const double b_post = 2.0 * T * n * d * 4 + double(T) * d * 4;
    const double b_route = double(T) * d * 4 + double(E) * d * 2 + double(T) * E * 4;
    const double f_route = 2.0 * T * d * E;
    std::printf("prefill speed T=%5lld: hc_pre %8.4f ms (%7.1f GB/s, %6.2f TFLOP/s) | hc_post %8.4f ms (%7.1f GB/s) | "
                "moe_route %8.4f ms (%7.1f GB/s, %6.2f TFLOP/s) | moe_route_gemm %8.4f ms (%6.2f TFLOP/s)\n",
                (long long)T, t_pre, b_pre / t_pre / 1e6, f_pre / t_pre / 1e9, t_post, b_post / t_post / 1e6, t_route,
                b_route / t_route / 1e6, f_route / t_route / 1e9, t_route_gemm, f_route / t_route_gemm / 1e9);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

}  // namespace
}  // namespace deepinfer::cudatest
