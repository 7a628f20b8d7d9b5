// Parity of the decode-layer ops (mHC pre/post, MoE routing, grouping + experts + combine,
// clamped SwiGLU) against the CPU backend's functions (model/deepseek_v4/mhc.h, moe.h) on
// random inputs. Tolerances: mHC pre/post/comb max abs 1e-5, collapsed input and hc_post rel L2
// 1e-5; routing ids exact on tokens whose k-th and (k+1)-th keys differ by > 1e-3 (no near-tie),
// weights max abs 1e-5; SwiGLU rel 1e-6; the MoE sublayer (MXFP4 experts, activations rounded
// to fp16 by the GPU kernel) rel L2 2e-3. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

#include "backend/cuda/layer_ops.h"
#include "cuda_test_util.h"
#include "model/deepseek_v4/mhc.h"
#include "model/deepseek_v4/moe.h"

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

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

Weight mxfp4_weight(int64_t rows, int64_t cols, std::mt19937& rng) {
  Weight w;
  w.name = "e";
  w.format = WeightFormat::kMxfp4;
  w.rows = rows;
  w.cols = cols;
  w.data = Tensor::zeros(DType::kU8, {rows, cols / 2});
  w.scale = Tensor::zeros(DType::kF8E8M0, {rows, cols / 32});
  for (auto& b : w.data.mutable_span<uint8_t>()) b = static_cast<uint8_t>(rng());
  std::uniform_int_distribution<int> ex(121, 124);
  for (auto& e : w.scale.mutable_span<uint8_t>()) e = static_cast<uint8_t>(ex(rng));
  return w;
}

double max_abs(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

TEST(CudaLayerOps, HcPreAndPostMatchCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(11);
  const int64_t d = 4096, n = 4, mix = 24;
  v4::HcParams p;
  p.n = n, p.d = d, p.rms_eps = 1e-6f, p.hc_eps = 1e-6f, p.sinkhorn_iters = 20;
  v4::HcWeights w;
  const auto fnv = randn(mix * n * d, rng, 0.01f);
  w.fn = f32_weight(mix, n * d, fnv);
  w.base = randn(mix, rng, 0.5f);
  w.scale = {0.8f, 1.3f, 2.0f};
  Dev dfn(fnv.data(), fnv.size() * 4), dbase(w.base.data(), mix * 4), dscale(w.scale.data(), 12);
  for (int64_t T : {1, 5, 33}) {
    const auto X = randn(T * n * d, rng);
    const auto f = randn(T * d, rng);
    v4::HcMix ref = v4::hc_mix(cpu, p, w, X.data(), T);
    ref.input.resize(T * d);
    v4::hc_collapse(cpu, p, ref.pre.data(), X.data(), T, ref.input.data());
    std::vector<float> Xpost = X;
    v4::hc_expand(cpu, p, ref.post.data(), ref.comb.data(), f.data(), Xpost.data(), T);

    Dev dX(X.data(), X.size() * 4), df(f.data(), f.size() * 4);
    Dev dpre(T * n * 4), dpost(T * n * 4), dcomb(T * n * n * 4), din(T * d * 4), ws(dc::hc_pre_workspace_bytes(T, d));
    ASSERT_TRUE(dc::hc_pre(dX.as<float>(), T, d, dfn.as<float>(), dbase.as<float>(), dscale.as<float>(), p.rms_eps,
                           p.hc_eps, 20, dpre.as<float>(), dpost.as<float>(), dcomb.as<float>(), din.as<float>(), ws.p))
        << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    EXPECT_LT(max_abs(download<float>(dpre, T * n), ref.pre), 1e-5) << "T=" << T;
    EXPECT_LT(max_abs(download<float>(dpost, T * n), ref.post), 1e-5) << "T=" << T;
    EXPECT_LT(max_abs(download<float>(dcomb, T * n * n), ref.comb), 1e-5) << "T=" << T;
    EXPECT_LT(rel_l2(download<float>(din, T * d), ref.input), 1e-5) << "T=" << T;
    // hc_post on the CPU's own mix (isolates the expand)
    Dev cpost(ref.post.data(), T * n * 4), ccomb(ref.comb.data(), T * n * n * 4);
    ASSERT_TRUE(dc::hc_post(dX.as<float>(), T, d, cpost.as<float>(), ccomb.as<float>(), df.as<float>()));
    EXPECT_LT(rel_l2(download<float>(dX, T * n * d), Xpost), 1e-5) << "T=" << T;
  }
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
  const auto gf = randn(E * d, rng, 0.02f);
  std::vector<uint16_t> gb(gf.size());
  for (size_t i = 0; i < gf.size(); ++i) gb[i] = to_bf16(gf[i]);
  w.gate.name = "gate";
  w.gate.format = WeightFormat::kBF16;
  w.gate.rows = E, w.gate.cols = d;
  w.gate.data = Tensor::zeros(DType::kBF16, {E, d});
  std::copy(gb.begin(), gb.end(), w.gate.data.mutable_span<uint16_t>().begin());
  w.bias = randn(E, rng, 0.1f);
  Dev dg(gb.data(), gb.size() * 2), dbias(w.bias.data(), E * 4);
  int checked = 0, skipped = 0;
  for (int64_t T : {1, 7, 64, 128}) {
    const auto h = randn(T * d, rng);
    const v4::Routing ref = v4::route(cpu, p, w, false, h.data(), nullptr, T);
    // CPU keys, to find near-ties
    std::vector<float> logits(T * E);
    cpu.linear(h.data(), T, w.gate, logits.data());
    Dev dh(h.data(), h.size() * 4), dl(T * E * 4), dex(T * K * 4), dw(T * K * 4);
    ASSERT_TRUE(dc::moe_route(dh.as<float>(), T, d, dg.as<uint16_t>(), E, dbias.as<float>(), K, 1.5f, dl.as<float>(),
                              dex.as<int32_t>(), dw.as<float>()))
        << dc::last_error();
    const auto ex = download<int32_t>(dex, T * K);
    const auto wt = download<float>(dw, T * K);
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
        EXPECT_EQ(ex[t * K + j], ref.experts[t * K + j]) << "T=" << T << " t=" << t << " slot " << j;
        EXPECT_NEAR(wt[t * K + j], ref.weights[t * K + j], 1e-5) << "T=" << T << " t=" << t;
      }
    }
  }
  EXPECT_GT(checked, 100);
  std::printf("routing: %d tokens compared, %d with near-ties skipped\n", checked, skipped);
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

// The whole routed sublayer on the GPU (route, group, permute, grouped MXFP4 w1/w3, SwiGLU, w2,
// combine; the shared expert as one more MXFP4 group) vs the CPU's moe_forward.
TEST(CudaLayerOps, MoeSublayerMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(14);
  const int64_t E = 16, d = 256, I = 256;
  const int K = 4;
  v4::MoeParams p;
  p.n_experts = E, p.top_k = K, p.routed_scaling = 1.5f, p.swiglu_limit = 10.f;
  v4::MoeWeights w;
  const auto gf = randn(E * d, rng, 0.1f);
  std::vector<uint16_t> gb(gf.size());
  for (size_t i = 0; i < gf.size(); ++i) gb[i] = to_bf16(gf[i]);
  w.gate.name = "gate";
  w.gate.format = WeightFormat::kBF16;
  w.gate.rows = E, w.gate.cols = d;
  w.gate.data = Tensor::zeros(DType::kBF16, {E, d});
  std::copy(gb.begin(), gb.end(), w.gate.data.mutable_span<uint16_t>().begin());
  w.bias = randn(E, rng, 0.05f);
  for (int64_t e = 0; e < E; ++e) {
    w.w1.push_back(mxfp4_weight(I, d, rng));
    w.w3.push_back(mxfp4_weight(I, d, rng));
    w.w2.push_back(mxfp4_weight(d, I, rng));
  }
  w.shared_w1 = mxfp4_weight(I, d, rng);
  w.shared_w3 = mxfp4_weight(I, d, rng);
  w.shared_w2 = mxfp4_weight(d, I, rng);
  std::vector<std::unique_ptr<Dev>> keep;
  auto up = [&](const Tensor& t) {
    keep.push_back(std::make_unique<Dev>(t.data(), t.nbytes()));
    return keep.back()->as<uint8_t>();
  };
  std::vector<dc::ExpertPtrs> hp(E);
  for (int64_t e = 0; e < E; ++e)
    hp[e] = {up(w.w1[e].data), up(w.w1[e].scale), up(w.w3[e].data), up(w.w3[e].scale), up(w.w2[e].data),
             up(w.w2[e].scale)};
  const dc::ExpertPtrs sp{up(w.shared_w1.data), up(w.shared_w1.scale), up(w.shared_w3.data),
                          up(w.shared_w3.scale), up(w.shared_w2.data), up(w.shared_w2.scale)};
  Dev dptrs(hp.data(), hp.size() * sizeof(dc::ExpertPtrs)), dg(gb.data(), gb.size() * 2), dbias(w.bias.data(), E * 4);
  for (int64_t T : {1, 9, 40}) {
    const auto h = randn(T * d, rng, 0.5f);
    std::vector<float> ref(T * d);
    v4::moe_forward(cpu, p, w, false, h.data(), nullptr, T, d, ref.data());
    const int R = static_cast<int>(T * K), G = dc::moe_max_groups(T, K, E);
    Dev dh(h.data(), h.size() * 4), dl(T * E * 4), dex(R * 4), dw(R * 4), pos(R * 4);
    Dev xp(R * d * 4), gp(R * I * 4), upm(R * I * 4), ap(R * I * 4), yp(R * d * 4);
    Dev g13(2 * G * sizeof(dc::Mxfp4Group)), g2(G * sizeof(dc::Mxfp4Group));
    Dev sg(T * I * 4), su(T * I * 4), sa(T * I * 4), sy(T * d * 4), out(T * d * 4);
    ASSERT_TRUE(dc::moe_route(dh.as<float>(), T, d, dg.as<uint16_t>(), E, dbias.as<float>(), K, 1.5f, dl.as<float>(),
                              dex.as<int32_t>(), dw.as<float>()))
        << dc::last_error();
    ASSERT_TRUE(dc::moe_build_groups(dex.as<int32_t>(), T, K, E, dptrs.as<dc::ExpertPtrs>(), xp.as<float>(),
                                     gp.as<float>(), upm.as<float>(), ap.as<float>(), yp.as<float>(), d, I, G,
                                     pos.as<int32_t>(), g13.as<dc::Mxfp4Group>(), g2.as<dc::Mxfp4Group>()))
        << dc::last_error();
    ASSERT_TRUE(dc::moe_permute(dh.as<float>(), T, K, d, pos.as<int32_t>(), xp.as<float>()));
    const int mm = static_cast<int>(std::min<int64_t>(T, dc::moe_group_rows()));
    const int ms = static_cast<int>(std::min<int64_t>(T, 64));
    ASSERT_TRUE(dc::mxfp4_linear_grouped(g13.as<dc::Mxfp4Group>(), 2 * G, mm, I, d)) << dc::last_error();
    ASSERT_TRUE(dc::swiglu(gp.as<float>(), upm.as<float>(), I, R, I, 10.f, ap.as<float>()));
    ASSERT_TRUE(dc::mxfp4_linear_grouped(g2.as<dc::Mxfp4Group>(), G, mm, d, I)) << dc::last_error();
    // shared expert: groups on the host (m = T <= 64)
    std::vector<dc::Mxfp4Group> s13 = {{sp.w1, sp.s1, dh.as<float>(), sg.as<float>(), static_cast<int32_t>(T), 0},
                                       {sp.w3, sp.s3, dh.as<float>(), su.as<float>(), static_cast<int32_t>(T), 0}};
    std::vector<dc::Mxfp4Group> s2 = {{sp.w2, sp.s2, sa.as<float>(), sy.as<float>(), static_cast<int32_t>(T), 0}};
    Dev ds13(s13.data(), 2 * sizeof(dc::Mxfp4Group)), ds2(s2.data(), sizeof(dc::Mxfp4Group));
    ASSERT_TRUE(dc::mxfp4_linear_grouped(ds13.as<dc::Mxfp4Group>(), 2, ms, I, d));
    ASSERT_TRUE(dc::swiglu(sg.as<float>(), su.as<float>(), I, T, I, 10.f, sa.as<float>()));
    ASSERT_TRUE(dc::mxfp4_linear_grouped(ds2.as<dc::Mxfp4Group>(), 1, ms, d, I));
    ASSERT_TRUE(dc::moe_combine(yp.as<float>(), pos.as<int32_t>(), dw.as<float>(), sy.as<float>(), T, K, d,
                                out.as<float>()));
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    // slot_pos is a permutation of 0..R-1
    auto pv = download<int32_t>(pos, R);
    std::sort(pv.begin(), pv.end());
    for (int i = 0; i < R; ++i) ASSERT_EQ(pv[i], i);
    EXPECT_LT(rel_l2(download<float>(out, T * d), ref), 2e-3) << "T=" << T;
  }
}

}  // namespace
}  // namespace deepinfer::cudatest
