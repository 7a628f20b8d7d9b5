// The MoE sublayer's grouping, experts and combine on the GPU against the CPU backend
// (model/deepseek_v4/moe.h) on random inputs (split from cuda_layer_ops_test.cpp): the whole routed
// sublayer (MXFP4 experts, activations rounded to fp16 by the GPU kernel) rel L2 2e-3, by the
// narrow and the wide expert kernels alike, and the two within 1e-4 of each other (also at the
// V4-Flash expert shapes); moe_rows_fp8 bit for bit against the reference's act_quant; the FP8
// expert kernels step by step against the CPU (see their test). Skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>

#include "backend/cuda/layer_ops.h"
#include "backend/cuda/model_ops.h"
#include "cuda_test_util.h"
#include "model/deepseek_v4/moe.h"
#include "model/numerics.h"


namespace deepinfer::cudatest {
namespace {

// Host tensors copied to the device for one test and kept alive with it.
struct DeviceCopies {
  std::vector<std::unique_ptr<Dev>> keep;
  uint8_t* up(const Tensor& t) {
    keep.push_back(std::make_unique<Dev>(t.data(), t.nbytes()));
    return keep.back()->as<uint8_t>();
  }
  uint8_t* upw(const Tensor& t) {  // packed e2m1 -> the device layout the MXFP4 ops read
    uint8_t* p = up(t);
    EXPECT_TRUE(dc::mxfp4_to_device_layout(p, static_cast<int64_t>(t.nbytes()))) << dc::last_error();
    return p;
  }
  dc::ExpertPtrs expert(const Weight& w1, const Weight& w3, const Weight& w2) {  // one expert's MXFP4 weights
    return {upw(w1.data), up(w1.scale), upw(w3.data), up(w3.scale), upw(w2.data), up(w2.scale)};
  }
  // A 64-row tiled copy (dc::mxfp4_tile64) of an MXFP4 weight [N, K] and its scales: wt, st.
  void tiled(const uint8_t* w, const uint8_t* sc, int64_t N, int64_t K, const uint8_t*& wt, const uint8_t*& st) {
    keep.push_back(std::make_unique<Dev>(N * K / 2)), keep.push_back(std::make_unique<Dev>(N * K / 32));
    EXPECT_TRUE(dc::mxfp4_tile64(w, sc, N, K, keep[keep.size() - 2]->as<uint8_t>(), keep.back()->as<uint8_t>()))
        << dc::last_error();
    wt = keep[keep.size() - 2]->as<uint8_t>(), st = keep.back()->as<uint8_t>();
  }
};

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

// The whole routed sublayer on the GPU (route, group, permute, grouped MXFP4 w1/w3, SwiGLU, w2,
// combine; the shared expert as one more MXFP4 group) vs the CPU's moe_forward.
TEST(CudaExperts, MoeSublayerMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(14);
  const int64_t E = 16, d = 256, I = 256;
  const int K = 4;
  v4::MoeParams p;
  p.n_experts = E, p.top_k = K, p.routed_scaling = 1.5f, p.swiglu_limit = 10.f;
  v4::MoeWeights w;
  std::vector<uint16_t> gb;
  w.gate = bf16_random_weight("gate", E, d, 0.1f, rng, gb);
  w.bias = randn(E, rng, 0.05f);
  for (int64_t e = 0; e < E; ++e) {
    w.w1.push_back(mxfp4_weight(I, d, rng));
    w.w3.push_back(mxfp4_weight(I, d, rng));
    w.w2.push_back(mxfp4_weight(d, I, rng));
  }
  w.shared_w1 = mxfp4_weight(I, d, rng);
  w.shared_w3 = mxfp4_weight(I, d, rng);
  w.shared_w2 = mxfp4_weight(d, I, rng);
  DeviceCopies dev;
  std::vector<dc::ExpertPtrs> hp(E);
  for (int64_t e = 0; e < E; ++e) hp[e] = dev.expert(w.w1[e], w.w3[e], w.w2[e]);
  const dc::ExpertPtrs sp = dev.expert(w.shared_w1, w.shared_w3, w.shared_w2);
  Dev dptrs(hp.data(), hp.size() * sizeof(dc::ExpertPtrs)), dg(gb.data(), gb.size() * 2), dbias(w.bias.data(), E * 4);
  for (int64_t T : {1, 7, 9, 40, 300, 2048}) {  // moe_build_groups takes T * k <= 8192
    const auto h = randn(T * d, rng, 0.5f);
    std::vector<float> ref(T * d);
    v4::moe_forward(cpu, p, w, false, h.data(), nullptr, T, d, ref.data());
    const int R = static_cast<int>(T * K), G = dc::moe_max_groups(T, K, E);
    Dev dh(h.data(), h.size() * 4), dl(T * E * 4), dex(R * 4), dw(R * 4), pos(R * 4), rtok(R * 4);
    Dev xp(R * d * 4), gp(R * I * 4), upm(R * I * 4), ap(R * I * 4), yp(R * d * 4);
    Dev g13(2 * G * sizeof(dc::Mxfp4Group)), g2(G * sizeof(dc::Mxfp4Group));
    Dev sg(T * I * 4), su(T * I * 4), sa(T * I * 4), sy(T * d * 4), out(T * d * 4);
    ASSERT_TRUE(dc::moe_route(dh.as<float>(), T, d, dg.as<uint16_t>(), E, dbias.as<float>(), K, 1.5f, dl.as<float>(),
                              dex.as<int32_t>(), dw.as<float>()))
        << dc::last_error();
    ASSERT_TRUE(dc::moe_build_groups(dex.as<int32_t>(), T, K, E, dptrs.as<dc::ExpertPtrs>(), xp.as<float>(),
                                     gp.as<float>(), upm.as<float>(), ap.as<float>(), yp.as<float>(), d, I, G,
                                     pos.as<int32_t>(), g13.as<dc::Mxfp4Group>(), g2.as<dc::Mxfp4Group>(), nullptr, 16,
                                     nullptr, rtok.as<int32_t>()))
        << dc::last_error();
    ASSERT_TRUE(dc::moe_permute(dh.as<float>(), T, K, d, pos.as<int32_t>(), xp.as<float>()));
    const int mm = static_cast<int>(std::min<int64_t>(T, dc::moe_group_rows()));
    const int ms = static_cast<int>(std::min<int64_t>(T, 64));
    ASSERT_TRUE(dc::mxfp4_linear_grouped(g13.as<dc::Mxfp4Group>(), 2 * G, mm, I, d)) << dc::last_error();
    ASSERT_TRUE(dc::swiglu(gp.as<float>(), upm.as<float>(), I, R, I, 10.f, ap.as<float>()));
    ASSERT_TRUE(dc::mxfp4_linear_grouped(g2.as<dc::Mxfp4Group>(), G, mm, d, I)) << dc::last_error();
    // shared expert: groups on the host, 64 rows each (a group holds m <= 64)
    std::vector<dc::Mxfp4Group> s13, s2;
    for (int64_t r0 = 0; r0 < T; r0 += 64) {
      const int32_t m = static_cast<int32_t>(std::min<int64_t>(64, T - r0));
      s13.push_back({sp.w1, sp.s1, dh.as<float>() + r0 * d, sg.as<float>() + r0 * I, m, 0});
      s13.push_back({sp.w3, sp.s3, dh.as<float>() + r0 * d, su.as<float>() + r0 * I, m, 0});
      s2.push_back({sp.w2, sp.s2, sa.as<float>() + r0 * I, sy.as<float>() + r0 * d, m, 0});
    }
    Dev ds13(s13.data(), s13.size() * sizeof(dc::Mxfp4Group)), ds2(s2.data(), s2.size() * sizeof(dc::Mxfp4Group));
    ASSERT_TRUE(dc::mxfp4_linear_grouped(ds13.as<dc::Mxfp4Group>(), static_cast<int>(s13.size()), ms, I, d));
    ASSERT_TRUE(dc::swiglu(sg.as<float>(), su.as<float>(), I, T, I, 10.f, sa.as<float>()));
    ASSERT_TRUE(dc::mxfp4_linear_grouped(ds2.as<dc::Mxfp4Group>(), static_cast<int>(s2.size()), ms, d, I));
    ASSERT_TRUE(dc::moe_combine(yp.as<float>(), pos.as<int32_t>(), dw.as<float>(), sy.as<float>(), T, K, d,
                                out.as<float>()));
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    // slot_pos is a permutation of 0..R-1; row_token its rows' tokens
    auto pv = download<int32_t>(pos, R);
    const auto rt = download<int32_t>(rtok, R);
    for (int i = 0; i < R; ++i) ASSERT_EQ(rt[pv[i]], i / K) << "row_token of slot " << i;
    std::sort(pv.begin(), pv.end());
    for (int i = 0; i < R; ++i) ASSERT_EQ(pv[i], i);
    const auto narrow = download<float>(out, T * d);
    const double err = rel_l2(narrow, ref);
    // The wide kernels (64-row groups, fp16 rows, SwiGLU fused into w1/w3) on the same routing.
    const int Gw = dc::moe_max_groups(T, K, E, 64);
    Dev w13(2 * Gw * sizeof(dc::Mxfp4Group)), w2(Gw * sizeof(dc::Mxfp4Group)), x16(R * d * 2), a16(R * I * 2);
    Dev ypw(R * d * 4), outw(T * d * 4);
    ASSERT_TRUE(dc::moe_build_groups(dex.as<int32_t>(), T, K, E, dptrs.as<dc::ExpertPtrs>(), xp.as<float>(),
                                     gp.as<float>(), upm.as<float>(), ap.as<float>(), ypw.as<float>(), d, I, Gw,
                                     pos.as<int32_t>(), w13.as<dc::Mxfp4Group>(), w2.as<dc::Mxfp4Group>(), nullptr, 64))
        << dc::last_error();
    ASSERT_TRUE(dc::moe_permute_f16(dh.as<float>(), T, K, d, pos.as<int32_t>(), x16.as<uint16_t>()));
    ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu(w13.as<dc::Mxfp4Group>(), Gw, ms, x16.as<uint16_t>(), I, d, 10.f,
                                             a16.as<uint16_t>()))
        << dc::last_error();
    ASSERT_TRUE(dc::mxfp4_experts_w2(w2.as<dc::Mxfp4Group>(), Gw, ms, a16.as<uint16_t>(), d, I)) << dc::last_error();
    ASSERT_TRUE(dc::moe_combine(ypw.as<float>(), pos.as<int32_t>(), dw.as<float>(), sy.as<float>(), T, K, d,
                                outw.as<float>()));
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const auto wide = download<float>(outw, T * d);
    // The wgmma kernels (128-row groups) on the same routing.
    const int Gg = dc::moe_max_groups(T, K, E, 128);
    const int mg = static_cast<int>(std::min<int64_t>(T, 128));
    Dev g13w(2 * Gg * sizeof(dc::Mxfp4Group)), g2w(Gg * sizeof(dc::Mxfp4Group)), ypg(R * d * 4), outg(T * d * 4);
    ASSERT_TRUE(dc::moe_build_groups(dex.as<int32_t>(), T, K, E, dptrs.as<dc::ExpertPtrs>(), nullptr, nullptr,
                                     nullptr, nullptr, ypg.as<float>(), d, I, Gg, pos.as<int32_t>(),
                                     g13w.as<dc::Mxfp4Group>(), g2w.as<dc::Mxfp4Group>(), nullptr, 128))
        << dc::last_error();
    // scales 121..124 (mxfp4_weight): foldable, so the fast kernel
    ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu_wgmma(g13w.as<dc::Mxfp4Group>(), Gg, mg, x16.as<uint16_t>(), I, d, 10.f,
                                                   a16.as<uint16_t>(), dc::Mxfp4Scales::foldable))
        << dc::last_error();
    ASSERT_TRUE(dc::mxfp4_experts_w2_wgmma(g2w.as<dc::Mxfp4Group>(), Gg, mg, a16.as<uint16_t>(), d, I,
                                           dc::Mxfp4Scales::foldable))
        << dc::last_error();
    ASSERT_TRUE(dc::moe_combine(ypg.as<float>(), pos.as<int32_t>(), dw.as<float>(), sy.as<float>(), T, K, d,
                                outg.as<float>()));
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const auto wgm = download<float>(outg, T * d);
    const double err_w = rel_l2(wide, ref), wide_vs_narrow = rel_l2(wide, narrow);
    const double err_g = rel_l2(wgm, ref), wgmma_vs_narrow = rel_l2(wgm, narrow);
    std::printf("moe sublayer T=%lld: rel L2 %.3g (narrow), %.3g (wide), %.3g (wgmma); vs narrow: wide %.3g, "
                "wgmma %.3g\n",
                (long long)T, err, err_w, err_g, wide_vs_narrow, wgmma_vs_narrow);
    EXPECT_LT(err, 2e-3) << "T=" << T;
    EXPECT_LT(err_w, 2e-3) << "T=" << T;
    EXPECT_LT(err_g, 2e-3) << "T=" << T;
    // Same fp16 inputs and per-32 scaling; only the fp32 sum order (and so an fp16 rounding of
    // the SwiGLU output now and then) differs.
    EXPECT_LT(wide_vs_narrow, 1e-4) << "T=" << T;
    EXPECT_LT(wgmma_vs_narrow, 1e-4) << "T=" << T;
  }
}

// The wide expert kernels (mma.sync, 64-row groups; wgmma, 64- and 128-row groups) against the
// narrow ones at the V4-Flash expert shapes (d 4096, I 2048, the long K loops), host-built groups:
// expert 0 with 70 rows (groups of 64 + 6; one of 70 at wgmma width 96), expert 1 with 33 (width
// 48), expert 2 with 1 (width 16), expert 3 with 150 (128 + 22: widths 128 and 32), expert 4 with
// 60 (width 64 in either launch; the 128-row launch runs it 8 stages deep), and an empty
// (m = 0) descriptor whose rows must stay unwritten; expert 1 has scale bytes outside the foldable
// range [106, 132] in some chunks (the unfolded path). Every path rounds x to fp16; y rows within
// rel L2 1e-4 of the narrow ones; the padding rows after each expert keep NaN. The wgmma kernels run
// both ways: able to take any scales (every expert), and promised foldable scales (the fast kernel:
// every expert but 1); mxfp4_scales_foldable tells the experts apart. Every kernel again on 64-row
// tiled weights (mxfp4_tile64): bitwise the same rows.
TEST(CudaExperts, WideExpertsMatchNarrowAtV4Shapes) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(21);
  const int64_t d = 4096, I = 2048;
  const std::vector<int> rows = {70, 33, 1, 150, 60};
  DeviceCopies dev;
  std::vector<dc::ExpertPtrs> ex;
  for (size_t e = 0; e < rows.size(); ++e) {
    Weight w1 = mxfp4_weight(I, d, rng), w3 = mxfp4_weight(I, d, rng), w2 = mxfp4_weight(d, I, rng);
    if (e == 1) {  // scales outside [106, 132] here and there: those chunks take the unfolded path
      auto s1 = w1.scale.mutable_span<uint8_t>(), s2 = w2.scale.mutable_span<uint8_t>();
      for (size_t i = 0; i < s1.size(); i += 97) s1[i] = 133;
      for (size_t i = 0; i < s2.size(); i += 89) s2[i] = 101;
    }
    ex.push_back(dev.expert(w1, w3, w2));
  }
  // Each expert's rows start at a multiple of 256 rows (padding rows in between stay unused).
  const int64_t stride = 256, R = stride * int64_t(rows.size());
  const auto x = randn(R * d, rng, 0.5f);
  std::vector<int32_t> ident(R);
  std::iota(ident.begin(), ident.end(), 0);
  const std::vector<float> nan_y(R * d, NAN);
  Dev dx(x.data(), x.size() * 4), dpos(ident.data(), R * 4), x16(R * d * 2), a16(R * I * 2);
  Dev gp(R * I * 4), upm(R * I * 4), ap(R * I * 4), yn(nan_y.data(), R * d * 4), yw(nan_y.data(), R * d * 4);
  Dev yg(nan_y.data(), R * d * 4), yg64(nan_y.data(), R * d * 4), yf(nan_y.data(), R * d * 4);
  ASSERT_TRUE(dc::moe_permute_f16(dx.as<float>(), R, 1, d, dpos.as<int32_t>(), x16.as<uint16_t>()));
  auto groups = [&](int gr, float* y, std::vector<dc::Mxfp4Group>& g13, std::vector<dc::Mxfp4Group>& g2) {
    for (size_t e = 0; e < rows.size(); ++e)
      for (int r0 = 0; r0 < rows[e]; r0 += gr) {
        const int m = std::min(gr, rows[e] - r0);
        const int64_t row = int64_t(e) * stride + r0;
        g13.push_back({ex[e].w1, ex[e].s1, dx.as<float>() + row * d, gp.as<float>() + row * I, m, int32_t(row)});
        g13.push_back({ex[e].w3, ex[e].s3, dx.as<float>() + row * d, upm.as<float>() + row * I, m, int32_t(row)});
        g2.push_back({ex[e].w2, ex[e].s2, ap.as<float>() + row * I, y + row * d, m, int32_t(row)});
      }
    g13.push_back({}), g13.push_back({}), g2.push_back({});  // an empty group
  };
  std::vector<dc::Mxfp4Group> n13, n2, w13, w2, q13, q2, h13, h2, f13, f2;
  groups(16, yn.as<float>(), n13, n2);
  groups(64, yw.as<float>(), w13, w2);
  groups(128, yg.as<float>(), q13, q2);
  groups(64, yg64.as<float>(), h13, h2);
  groups(128, yf.as<float>(), f13, f2);
  Dev dn13(n13.data(), n13.size() * sizeof(n13[0])), dn2(n2.data(), n2.size() * sizeof(n2[0]));
  Dev dw13(w13.data(), w13.size() * sizeof(w13[0])), dw2(w2.data(), w2.size() * sizeof(w2[0]));
  Dev dq13(q13.data(), q13.size() * sizeof(q13[0])), dq2(q2.data(), q2.size() * sizeof(q2[0]));
  Dev dh13(h13.data(), h13.size() * sizeof(h13[0])), dh2(h2.data(), h2.size() * sizeof(h2[0]));
  Dev df13(f13.data(), f13.size() * sizeof(f13[0])), df2(f2.data(), f2.size() * sizeof(f2[0]));
  const int nn = static_cast<int>(n2.size()), nw = static_cast<int>(w2.size()), nq = static_cast<int>(q2.size());
  ASSERT_TRUE(dc::mxfp4_linear_grouped(dn13.as<dc::Mxfp4Group>(), 2 * nn, 16, I, d)) << dc::last_error();
  ASSERT_TRUE(dc::swiglu(gp.as<float>(), upm.as<float>(), I, R, I, 10.f, ap.as<float>()));
  ASSERT_TRUE(dc::mxfp4_linear_grouped(dn2.as<dc::Mxfp4Group>(), nn, 16, d, I)) << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu(dw13.as<dc::Mxfp4Group>(), nw, 64, x16.as<uint16_t>(), I, d, 10.f,
                                           a16.as<uint16_t>()))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w2(dw2.as<dc::Mxfp4Group>(), nw, 64, a16.as<uint16_t>(), d, I)) << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu_wgmma(dq13.as<dc::Mxfp4Group>(), nq, 128, x16.as<uint16_t>(), I, d, 10.f,
                                                 a16.as<uint16_t>()))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w2_wgmma(dq2.as<dc::Mxfp4Group>(), nq, 128, a16.as<uint16_t>(), d, I))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu_wgmma(dh13.as<dc::Mxfp4Group>(), nw, 64, x16.as<uint16_t>(), I, d, 10.f,
                                                 a16.as<uint16_t>()))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w2_wgmma(dh2.as<dc::Mxfp4Group>(), nw, 64, a16.as<uint16_t>(), d, I))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu_wgmma(df13.as<dc::Mxfp4Group>(), nq, 128, x16.as<uint16_t>(), I, d, 10.f,
                                                 a16.as<uint16_t>(), dc::Mxfp4Scales::foldable))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w2_wgmma(df2.as<dc::Mxfp4Group>(), nq, 128, a16.as<uint16_t>(), d, I,
                                         dc::Mxfp4Scales::foldable))
      << dc::last_error();
  // Which experts have foldable scales (w1, w3 [I, d], w2 [d, I]): all but expert 1.
  for (size_t e = 0; e < rows.size(); ++e) {
    const int32_t one = 1;
    Dev flag(&one, 4);
    ASSERT_TRUE(dc::mxfp4_scales_foldable(ex[e].s1, I * d / 32, flag.as<int32_t>()));
    ASSERT_TRUE(dc::mxfp4_scales_foldable(ex[e].s3, I * d / 32, flag.as<int32_t>()));
    ASSERT_TRUE(dc::mxfp4_scales_foldable(ex[e].s2, d * I / 32, flag.as<int32_t>()));
    EXPECT_EQ(download<int32_t>(flag, 1)[0], e == 1 ? 0 : 1) << "expert " << e;
  }
  ASSERT_TRUE(dc::synchronize()) << dc::last_error();
  const auto vn = download<float>(yn, R * d);
  const std::pair<const char*, Dev*> paths[] = {
      {"wide", &yw}, {"wgmma 128", &yg}, {"wgmma 64", &yg64}, {"wgmma 128 foldable", &yf}};
  for (const auto& [name, dev] : paths) {
    const auto vw = download<float>(*dev, R * d);
    for (size_t e = 0; e < rows.size(); ++e) {
      if (dev == &yf && e == 1) continue;  // not foldable: the fast kernel's promise does not hold
      const int64_t r0 = int64_t(e) * stride;
      const std::vector<float> a(vw.begin() + r0 * d, vw.begin() + (r0 + rows[e]) * d);
      const std::vector<float> b(vn.begin() + r0 * d, vn.begin() + (r0 + rows[e]) * d);
      const double err = rel_l2(a, b);
      std::printf("%s vs narrow, expert %zu (%d rows): rel L2 %.3g\n", name, e, rows[e], err);
      EXPECT_LT(err, 1e-4) << name << ", expert " << e;
      for (int64_t i = (r0 + rows[e]) * d; i < (r0 + stride) * d; ++i)
        ASSERT_TRUE(std::isnan(vw[i])) << name << ": padding row " << i / d << " written";
    }
  }
  // Every kernel again on 64-row tiled copies of the weights (mxfp4_tile64): bitwise the same rows.
  std::vector<dc::ExpertPtrs> tx(ex.size());
  for (size_t e = 0; e < ex.size(); ++e) {
    dev.tiled(ex[e].w1, ex[e].s1, I, d, tx[e].w1, tx[e].s1);
    dev.tiled(ex[e].w3, ex[e].s3, I, d, tx[e].w3, tx[e].s3);
    dev.tiled(ex[e].w2, ex[e].s2, d, I, tx[e].w2, tx[e].s2);
  }
  std::swap(ex, tx);
  Dev tn(nan_y.data(), R * d * 4), tw(nan_y.data(), R * d * 4), tq(nan_y.data(), R * d * 4), tf(nan_y.data(), R * d * 4);
  std::vector<dc::Mxfp4Group> m13, m2, v13, v2, u13, u2, o13, o2;
  groups(16, tn.as<float>(), m13, m2);
  groups(64, tw.as<float>(), v13, v2);
  groups(128, tq.as<float>(), u13, u2);
  groups(128, tf.as<float>(), o13, o2);
  std::swap(ex, tx);
  Dev dm13(m13.data(), m13.size() * sizeof(m13[0])), dm2(m2.data(), m2.size() * sizeof(m2[0]));
  Dev dv13(v13.data(), v13.size() * sizeof(v13[0])), dv2(v2.data(), v2.size() * sizeof(v2[0]));
  Dev du13(u13.data(), u13.size() * sizeof(u13[0])), du2(u2.data(), u2.size() * sizeof(u2[0]));
  Dev do13(o13.data(), o13.size() * sizeof(o13[0])), do2(o2.data(), o2.size() * sizeof(o2[0]));
  ASSERT_TRUE(dc::mxfp4_linear_grouped(dm13.as<dc::Mxfp4Group>(), 2 * nn, 16, I, d, dc::Mxfp4Layout::tiles64))
      << dc::last_error();
  ASSERT_TRUE(dc::swiglu(gp.as<float>(), upm.as<float>(), I, R, I, 10.f, ap.as<float>()));
  ASSERT_TRUE(dc::mxfp4_linear_grouped(dm2.as<dc::Mxfp4Group>(), nn, 16, d, I, dc::Mxfp4Layout::tiles64))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu(dv13.as<dc::Mxfp4Group>(), nw, 64, x16.as<uint16_t>(), I, d, 10.f,
                                           a16.as<uint16_t>(), dc::Mxfp4Layout::tiles64))
      << dc::last_error();
  ASSERT_TRUE(
      dc::mxfp4_experts_w2(dv2.as<dc::Mxfp4Group>(), nw, 64, a16.as<uint16_t>(), d, I, dc::Mxfp4Layout::tiles64))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu_wgmma(du13.as<dc::Mxfp4Group>(), nq, 128, x16.as<uint16_t>(), I, d, 10.f,
                                                 a16.as<uint16_t>(), dc::Mxfp4Scales::any, dc::Mxfp4Layout::tiles64))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w2_wgmma(du2.as<dc::Mxfp4Group>(), nq, 128, a16.as<uint16_t>(), d, I,
                                         dc::Mxfp4Scales::any, dc::Mxfp4Layout::tiles64))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu_wgmma(do13.as<dc::Mxfp4Group>(), nq, 128, x16.as<uint16_t>(), I, d, 10.f,
                                                 a16.as<uint16_t>(), dc::Mxfp4Scales::foldable,
                                                 dc::Mxfp4Layout::tiles64))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w2_wgmma(do2.as<dc::Mxfp4Group>(), nq, 128, a16.as<uint16_t>(), d, I,
                                         dc::Mxfp4Scales::foldable, dc::Mxfp4Layout::tiles64))
      << dc::last_error();
  ASSERT_TRUE(dc::synchronize()) << dc::last_error();
  const std::pair<Dev*, Dev*> same[] = {{&tn, &yn}, {&tw, &yw}, {&tq, &yg}, {&tf, &yf}};
  const char* names[] = {"narrow", "wide", "wgmma 128", "wgmma 128 foldable"};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(first_bit_mismatch(download<float>(*same[i].first, R * d), download<float>(*same[i].second, R * d)), -1)
        << names[i] << ": tiled weights give other bits";
}

// The FP8 expert kernels (mxfp4_fp8.cu) at the V4-Flash expert shapes: experts with 1, 12, 20, 33
// and 64 rows (widths 16, 16, 32, 64, 64) and an empty group; tokens scattered to their rows by a
// random slot_pos. Checked step by step against the CPU:
//   moe_rows_fp8: each row, un-permuted and dequantised, equals numerics::fake_fp8_rows (the
//     reference's act_quant) of its token bit for bit;
//   w13 + SwiGLU (fp32 rows) against the CPU linears on those same rows: rel L2 <= 5e-4 per expert;
//   w2 against the CPU linear on the GPU's own quantised SwiGLU rows: rel L2 <= 5e-4 (measured on
//     the H200: 1.1e-4 and 1.7e-4, the tensor core's FP8 sums within each 128 of K);
//   end to end against expert_forward with the reference rounding (act_block 128): rel L2 <= 5e-3
//     (the SwiGLU rows' e4m3 rounding amplifies the fp32 sums' differences where a value sits near
//     a rounding boundary).
// 64-row tiled weights (mxfp4_tile64) give bitwise the same rows. mxfp4_scales_fp8_foldable: scale
// bytes 121..124 fold, one byte of 126 does not.
// Rows [n, K] of e4m3 in the FP8 expert kernels' K order with scales [K / 128, n], back to plain
// floats.
std::vector<float> dequant_rows(const std::vector<uint8_t>& q, const std::vector<float>& sc, int64_t n, int64_t K) {
  std::vector<float> out(n * K);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < K; ++c) {
      const int64_t P = c % 128, tq = P / 32, qq = (P % 32) / 8, hh = (P % 8) / 4, j = P % 4;
      const uint8_t b = q[r * K + c / 128 * 128 + 32 * qq + 16 * hh + 4 * tq + j];
      const int ex = (b >> 3) & 15, mt = b & 7;
      const float mag = ex ? std::ldexp(1.f + mt / 8.f, ex - 7) : std::ldexp(mt / 8.f, -6);
      out[r * K + c] = ((b & 0x80) ? -mag : mag) * sc[c / 128 * n + r];
    }
  return out;
}

// moe_rows_fp8 at widths of 4 x 128 columns per warp (1536) and of 1 (384), top-k 2, 6, 11 (src row =
// token i / k) into shuffled slots: each slot's row, dequantised, is fake_fp8_rows of its token.
TEST(CudaExperts, MoeRowsFp8AnyWidth) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(44);
  const int64_t T = 5;
  for (const int64_t k : {int64_t(2), int64_t(6), int64_t(11)}) {  // 11: past the kernel's 8 slots at a time
    for (const int64_t K : {int64_t(1536), int64_t(384)}) {
      const int64_t R = T * k;
      const auto h = randn(T * K, rng, 0.5f);
      std::vector<int32_t> slot(R);
      std::iota(slot.begin(), slot.end(), 0);
      std::shuffle(slot.begin(), slot.end(), rng);
      Dev dh(h.data(), h.size() * 4), dslot(slot.data(), R * 4), x8(R * K), xs(R * K / 128 * 4);
      ASSERT_TRUE(dc::moe_rows_fp8(dh.as<float>(), T, static_cast<int>(k), K, dslot.as<int32_t>(), x8.as<uint8_t>(),
                                   xs.as<float>(), R))
          << dc::last_error();
      const auto got = dequant_rows(download<uint8_t>(x8, R * K), download<float>(xs, R * K / 128), R, K);
      auto ref = h;
      numerics::fake_fp8_rows(ref.data(), T, K, 128);
      for (int64_t i = 0; i < R; ++i)
        EXPECT_EQ(first_bit_mismatch(std::vector<float>(got.begin() + slot[i] * K, got.begin() + (slot[i] + 1) * K),
                                     std::vector<float>(ref.begin() + (i / k) * K, ref.begin() + (i / k + 1) * K)),
                  -1)
            << "k=" << k << " K=" << K << " row " << i;
    }
  }
}

// The FP8 expert kernels on experts of `rows` rows each, launched for groups of up to max_m rows
// (64: the two-blocks-per-SM kernel; 128: the one-block kernel of 128-row prefill groups), step
// by step against the CPU on the same rows, and on 64-row tiled weights bitwise the same. split:
// the kernels' K split (0: by their rule, 1: never, 2: over clusters of 2 where the widths allow).
void expect_fp8_experts_match_cpu(const std::vector<int>& rows, int max_m, std::mt19937& rng, int split = 0) {
  ThreadPool pool(0);
  CpuOps cpu(pool);
  const int64_t d = 4096, I = 2048;
  v4::MoeParams p;
  p.swiglu_limit = 10.f, p.act_block = 128;
  DeviceCopies dev;
  std::vector<Weight> w1s, w2s, w3s;
  std::vector<dc::ExpertPtrs> ex;
  for (size_t e = 0; e < rows.size(); ++e) {
    w1s.push_back(mxfp4_weight(I, d, rng)), w3s.push_back(mxfp4_weight(I, d, rng)), w2s.push_back(mxfp4_weight(d, I, rng));
    ex.push_back(dev.expert(w1s[e], w3s[e], w2s[e]));
  }
  const int64_t R = std::accumulate(rows.begin(), rows.end(), int64_t(0));
  const auto h = randn(R * d, rng, 0.5f);  // token i (k = 1) goes to row slot_pos[i]
  std::vector<int32_t> slot(R);
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), rng);
  std::vector<int32_t> token_of(R);
  for (int64_t i = 0; i < R; ++i) token_of[slot[i]] = static_cast<int32_t>(i);
  // y and a32 start as NaN, with kGuard NaN rows past the last expert's (whose group is padded:
  // the callers put a group that is not a multiple of its width last), which must stay NaN.
  constexpr int64_t kGuard = 128;
  const std::vector<float> nan_y((R + kGuard) * d, NAN), nan_a((R + kGuard) * I, NAN);
  Dev dh(h.data(), h.size() * 4), dslot(slot.data(), R * 4), x8(R * d), xs(R * d / 128 * 4), a32(nan_a.data(), nan_a.size() * 4);
  Dev a8(R * I), as(R * I / 128 * 4), y(nan_y.data(), nan_y.size() * 4);
  std::vector<dc::Mxfp4Group> g13, g2;
  int64_t row0 = 0;
  for (size_t e = 0; e < rows.size(); row0 += rows[e], ++e) {
    g13.push_back({ex[e].w1, ex[e].s1, nullptr, nullptr, rows[e], int32_t(row0)});
    g13.push_back({ex[e].w3, ex[e].s3, nullptr, nullptr, rows[e], int32_t(row0)});
    g2.push_back({ex[e].w2, ex[e].s2, nullptr, y.as<float>() + row0 * d, rows[e], int32_t(row0)});
  }
  g13.push_back({}), g13.push_back({}), g2.push_back({});  // an empty group
  Dev dg13(g13.data(), g13.size() * sizeof(g13[0])), dg2(g2.data(), g2.size() * sizeof(g2[0]));
  const int G = static_cast<int>(g2.size());
  ASSERT_TRUE(dc::moe_rows_fp8(dh.as<float>(), R, 1, d, dslot.as<int32_t>(), x8.as<uint8_t>(), xs.as<float>(), R))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu_fp8(dg13.as<dc::Mxfp4Group>(), G, max_m, x8.as<uint8_t>(), xs.as<float>(), R,
                                               I, d, 10.f, a32.as<float>(), dc::Mxfp4Layout::rows, nullptr, split))
      << dc::last_error();
  ASSERT_TRUE(dc::moe_rows_fp8(a32.as<float>(), R, 1, I, nullptr, a8.as<uint8_t>(), as.as<float>(), R))
      << dc::last_error();
  ASSERT_TRUE(dc::mxfp4_experts_w2_fp8(dg2.as<dc::Mxfp4Group>(), G, max_m, a8.as<uint8_t>(), as.as<float>(), R, d, I,
                                       dc::Mxfp4Layout::rows, nullptr, split))
      << dc::last_error();
  ASSERT_TRUE(dc::synchronize()) << dc::last_error();
  const auto gy = download<float>(y, R * d), ga = download<float>(a32, R * I);
  {  // The token-row form: x8 / xs one row per token (in token order), each group row's token by
     // row_token: the same a32 bit for bit.
    Dev xt8(R * d), xts(R * d / 128 * 4), drt(token_of.data(), R * 4), at(nan_a.data(), nan_a.size() * 4);
    ASSERT_TRUE(dc::moe_rows_fp8(dh.as<float>(), R, 1, d, nullptr, xt8.as<uint8_t>(), xts.as<float>(), R))
        << dc::last_error();
    ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu_fp8(dg13.as<dc::Mxfp4Group>(), G, max_m, xt8.as<uint8_t>(), xts.as<float>(),
                                                 R, I, d, 10.f, at.as<float>(), dc::Mxfp4Layout::rows, nullptr, split,
                                                 drt.as<int32_t>()))
        << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    EXPECT_EQ(first_bit_mismatch(download<float>(at, R * I), ga), -1) << "token rows by row_token: other bits";
  }
  {
    const auto all_y = download<float>(y, (R + kGuard) * d), all_a = download<float>(a32, (R + kGuard) * I);
    EXPECT_TRUE(std::all_of(all_y.begin() + R * d, all_y.end(), [](float v) { return std::isnan(v); }))
        << "w2 wrote past the last group's rows (padding rows)";
    EXPECT_TRUE(std::all_of(all_a.begin() + R * I, all_a.end(), [](float v) { return std::isnan(v); }))
        << "w13 wrote past the last group's rows (padding rows)";
  }
  const auto gx = dequant_rows(download<uint8_t>(x8, R * d), download<float>(xs, R * d / 128), R, d);
  const auto gaq = dequant_rows(download<uint8_t>(a8, R * I), download<float>(as, R * I / 128), R, I);
  row0 = 0;
  for (size_t e = 0; e < rows.size(); row0 += rows[e], ++e) {
    const int m = rows[e];
    std::vector<float> xe(m * d), xq(m * d), g(m * I), u(m * I), a(m * I), y2(m * d), ref(m * d);
    for (int r = 0; r < m; ++r)
      std::copy_n(h.begin() + int64_t(token_of[row0 + r]) * d, d, xe.begin() + int64_t(r) * d);
    xq = xe;
    numerics::fake_fp8_rows(xq.data(), m, d, 128);
    EXPECT_EQ(first_bit_mismatch(std::vector<float>(gx.begin() + row0 * d, gx.begin() + (row0 + m) * d), xq), -1)
        << "expert " << e << ": moe_rows_fp8 differs from fake_fp8_rows";
    cpu.linear(xq.data(), m, w1s[e], g.data());
    cpu.linear(xq.data(), m, w3s[e], u.data());
    for (int64_t i = 0; i < m * I; ++i) {
      const float gi = std::min(g[i], 10.f), ui = std::clamp(u[i], -10.f, 10.f);
      a[i] = gi / (1.f + std::exp(-gi)) * ui;
    }
    const double err_a = rel_l2(std::vector<float>(ga.begin() + row0 * I, ga.begin() + (row0 + m) * I), a);
    const std::vector<float> aq(gaq.begin() + row0 * I, gaq.begin() + (row0 + m) * I);
    cpu.linear(aq.data(), m, w2s[e], y2.data());
    const std::vector<float> got(gy.begin() + row0 * d, gy.begin() + (row0 + m) * d);
    const double err_y = rel_l2(got, y2);
    v4::expert_forward(cpu, p, w1s[e], w2s[e], w3s[e], xe.data(), m, ref.data());
    const double err = rel_l2(got, ref);
    std::printf("fp8 experts (groups to %d rows, split %d), expert %zu (%d rows): rel L2 w13+SwiGLU %.3g, w2 %.3g, end to end "
                "vs cpu reference rounding %.3g\n",
                max_m, split, e, m, err_a, err_y, err);
    EXPECT_LT(err_a, 5e-4) << "expert " << e;
    EXPECT_LT(err_y, 5e-4) << "expert " << e;
    EXPECT_LT(err, 5e-3) << "expert " << e;
  }
  // The same with 64-row tiled copies of the weights (mxfp4_tile64): bitwise the same rows.
  {
    Dev yt(nan_y.data(), nan_y.size() * 4), at32(R * I * 4), at8(R * I), ats(R * I / 128 * 4);
    std::vector<dc::Mxfp4Group> t13 = g13, t2 = g2;
    for (size_t e = 0; e < rows.size(); ++e) {
      dev.tiled(ex[e].w1, ex[e].s1, I, d, t13[2 * e].w, t13[2 * e].scale);
      dev.tiled(ex[e].w3, ex[e].s3, I, d, t13[2 * e + 1].w, t13[2 * e + 1].scale);
      dev.tiled(ex[e].w2, ex[e].s2, d, I, t2[e].w, t2[e].scale);
      t2[e].y = yt.as<float>() + (g2[e].y - y.as<float>());
    }
    Dev dt13(t13.data(), t13.size() * sizeof(t13[0])), dt2(t2.data(), t2.size() * sizeof(t2[0]));
    ASSERT_TRUE(dc::mxfp4_experts_w13_swiglu_fp8(dt13.as<dc::Mxfp4Group>(), G, max_m, x8.as<uint8_t>(), xs.as<float>(), R,
                                                 I, d, 10.f, at32.as<float>(), dc::Mxfp4Layout::tiles64, nullptr, split))
        << dc::last_error();
    ASSERT_TRUE(dc::moe_rows_fp8(at32.as<float>(), R, 1, I, nullptr, at8.as<uint8_t>(), ats.as<float>(), R));
    ASSERT_TRUE(dc::mxfp4_experts_w2_fp8(dt2.as<dc::Mxfp4Group>(), G, max_m, at8.as<uint8_t>(), ats.as<float>(), R, d, I,
                                         dc::Mxfp4Layout::tiles64, nullptr, split))
        << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    EXPECT_EQ(first_bit_mismatch(download<float>(yt, R * d), gy), -1) << "tiled weights: other bits";
  }
  // Bad input: an error, no launch.
  EXPECT_FALSE(dc::mxfp4_experts_w2_fp8(dg2.as<dc::Mxfp4Group>(), G, 129, a8.as<uint8_t>(), as.as<float>(), R, d, I));
  EXPECT_FALSE(dc::mxfp4_experts_w2_fp8(dg2.as<dc::Mxfp4Group>(), G, max_m, a8.as<uint8_t>(), as.as<float>(), R, d, I,
                                        dc::Mxfp4Layout::rows, nullptr, 3));
  EXPECT_FALSE(dc::moe_rows_fp8(dh.as<float>(), R, 1, 100, nullptr, x8.as<uint8_t>(), xs.as<float>(), R));
}

TEST(CudaExperts, Fp8ExpertsMatchCpuReferenceRounding) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(41);
  // The last expert of each list fills its group only in part (padding rows must not be written).
  // Every MMA width of the 64-row launch: 16 (1, 12), 32 (20), 48 (33, 41, 48), 64.
  expect_fp8_experts_match_cpu({1, 12, 64, 33, 20, 48, 41}, 64, rng);
  // 128-row groups (prefill): every width the one-block kernel takes (<= 64 rows run at 64).
  expect_fp8_experts_match_cpu({128, 7, 64, 65, 100}, 128, rng);
  // Batch 1's shape (5 experts of one row and the empty group: 6 groups, as moe_max_groups gives
  // at one token of top-6: w13 split over clusters of 2 by the rule, w2 not), the split forced on groups of
  // up to 16 rows, and the same shapes unsplit.
  expect_fp8_experts_match_cpu({1, 1, 1, 1, 1}, 1, rng);
  expect_fp8_experts_match_cpu({1, 16, 5, 9}, 16, rng, 2);
  expect_fp8_experts_match_cpu({1, 16, 5, 9}, 16, rng, 1);
  // Which weights fold into the e4m3 tables: bytes 121..124 do, one 126 does not.
  const int32_t one = 1;
  Dev f_ok(&one, 4), f_bad(&one, 4);
  auto good = mxfp4_weight(128, 256, rng), bad = mxfp4_weight(128, 256, rng);
  bad.scale.mutable_span<uint8_t>()[77] = 126;
  Dev s_ok(good.scale.data(), good.scale.nbytes()), s_bad(bad.scale.data(), bad.scale.nbytes());
  ASSERT_TRUE(dc::mxfp4_scales_fp8_foldable(s_ok.as<uint8_t>(), 128 * 256 / 32, f_ok.as<int32_t>()));
  ASSERT_TRUE(dc::mxfp4_scales_fp8_foldable(s_bad.as<uint8_t>(), 128 * 256 / 32, f_bad.as<int32_t>()));
  EXPECT_EQ(download<int32_t>(f_ok, 1)[0], 1);
  EXPECT_EQ(download<int32_t>(f_bad, 1)[0], 0);
}

}  // namespace
}  // namespace deepinfer::cudatest
