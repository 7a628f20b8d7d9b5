// Pieces of the V4 forward checked against hand-derived values: YaRN blend limits, top-k ties,
// state sizes and the compressor's window/overlap bookkeeping.
#include <gtest/gtest.h>

#include <cmath>

#include "model/deepseek_v4/attention.h"
#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/state.h"

namespace deepinfer::v4 {
namespace {

TEST(Rope, YarnBlendMatchesV4FlashLimits) {
  // V4-Flash: 64 rope dims, base 160000, factor 16, original 65536: pairs 0..15 keep their
  // frequency, pairs >= 25 are divided by 16 (V4-MODEL.md 2.3).
  RopeConfig plain{160000.0, false};
  RopeConfig yarn{160000.0, true, 16.0, 65536.0, 32.0, 1.0};
  Rope p(plain, 64), y(yarn, 64);
  for (int i = 0; i <= 15; ++i) EXPECT_FLOAT_EQ(y.inv_freq()[i], p.inv_freq()[i]) << i;
  for (int i = 25; i < 32; ++i) EXPECT_FLOAT_EQ(y.inv_freq()[i], p.inv_freq()[i] / 16) << i;
  for (int i = 16; i < 25; ++i) {
    EXPECT_LT(y.inv_freq()[i], p.inv_freq()[i]);
    EXPECT_GT(y.inv_freq()[i], p.inv_freq()[i] / 16);
  }
}

TEST(Rope, InverseUndoesRotationAndPairsAreInterleaved) {
  Rope r(RopeConfig{10000.0, false}, 4);
  std::vector<float> x{1, 2, 3, 4, 5, 6}, y = x;
  r.apply(y.data(), 6, 37);
  EXPECT_EQ(y[0], 1);  // nope dims untouched
  EXPECT_EQ(y[1], 2);
  // Pair (x2, x3) rotates by 37 * inv_freq[0] = 37 rad.
  EXPECT_NEAR(y[2], 3 * std::cos(37.f) - 4 * std::sin(37.f), 1e-5);
  EXPECT_NEAR(y[3], 4 * std::cos(37.f) + 3 * std::sin(37.f), 1e-5);
  r.apply(y.data(), 6, 37, /*inverse=*/true);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
}

TEST(TopK, TiesResolveToLowerIndexAndResultIsSorted) {
  const float s[] = {0.5f, 2.f, 2.f, -1.f, 2.f, 0.7f};
  EXPECT_EQ(select_top_k(s, 6, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(select_top_k(s, 6, 4), (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(select_top_k(s, 3, 10), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(select_top_k(s, 0, 3).empty());
}

std::vector<float> normed(std::vector<float> v) {
  double ms = 0;
  for (float x : v) ms += x * x;
  const float r = 1.f / std::sqrt(static_cast<float>(ms / v.size()) + 1e-6f);
  for (float& x : v) x *= r;
  return v;
}

TEST(Compressor, CsaEntryPoolsPreviousAHalvesWithItsOwnBHalves) {
  const std::vector<float> norm(4, 1.0f);
  Rope rope(RopeConfig{10000.0, false}, 2);  // rotates dims 2..3 only
  CompressorParams p{&norm, 1e-6f, &rope};
  CompressorState s(/*ratio=*/2, /*width=*/4, /*overlap=*/true, /*rows_per_block=*/2);
  const float rows[4][8] = {{1, 2, 3, 4, 10, 20, 30, 40}, {2, 2, 2, 2, 20, 20, 20, 20},
                            {0, 0, 0, 0, 1, 1, 1, 1},     {9, 9, 9, 9, 3, 3, 3, 3}};
  const float gate[8] = {};  // equal gates: each entry is the mean of the rows it pools
  for (int t = 0; t < 4; ++t) {
    compressor_push(s, rows[t], gate, p);
    EXPECT_EQ(s.entries.size(), (t + 1) / 2);
  }
  // Entry 0: B halves of tokens 0, 1 (no previous window). Entry 1: A halves of 0, 1 + B of 2, 3.
  const auto e0 = normed({15, 20, 25, 30}), e1 = normed({1.75f, 2.f, 2.25f, 2.5f});
  EXPECT_NEAR(s.entries.row(0)[0], e0[0], 1e-6);
  EXPECT_NEAR(s.entries.row(0)[1], e0[1], 1e-6);
  EXPECT_NEAR(s.entries.row(0)[2], e0[2], 1e-6);  // position 0: no rotation
  EXPECT_NEAR(s.entries.row(1)[0], e1[0], 1e-6);
  EXPECT_NEAR(s.entries.row(1)[1], e1[1], 1e-6);
  // Entry 1 is roped at its window's first position, 2.
  EXPECT_NEAR(s.entries.row(1)[2], e1[2] * std::cos(2.f) - e1[3] * std::sin(2.f), 1e-5);
  EXPECT_EQ(s.buffered, 0);
}

TEST(Compressor, HcaGateSoftmaxWeightsRowsPerChannel) {
  const std::vector<float> norm(2, 1.0f);
  Rope rope(RopeConfig{10000.0, false}, 0 + 2);
  CompressorParams p{&norm, 1e-6f, &rope};
  CompressorState s(/*ratio=*/2, /*width=*/2, /*overlap=*/false, 4);
  const float r0[2] = {1, 5}, r1[2] = {3, 5};
  const float g0[2] = {0, 0}, g1[2] = {std::log(3.f), 0};
  compressor_push(s, r0, g0, p);
  EXPECT_EQ(s.entries.size(), 0);
  compressor_push(s, r1, g1, p);
  ASSERT_EQ(s.entries.size(), 1);
  const auto e = normed({1 * 0.25f + 3 * 0.75f, 5});  // channel 0 weighted 1:3, channel 1 equal
  EXPECT_NEAR(s.entries.row(0)[0], e[0], 1e-5);       // position 0: rope is the identity
  EXPECT_NEAR(s.entries.row(0)[1], e[1], 1e-5);
}

TEST(StateSizes, TinyV4AByHand) {
  V4Config c;
  c.num_layers = 4;
  c.head_dim = 32;
  c.window = 8;
  c.index_head_dim = 16;
  c.attn_kinds = {AttnKind::kSliding, AttnKind::kCsa, AttnKind::kHca, AttnKind::kCsa};
  c.ratios = {0, 4, 16, 4};
  const StateSizes z = state_sizes(c, false);
  // Per token: 2 CSA x (32 + 16 floats) / 4 + 1 HCA x 32 floats / 16.
  EXPECT_DOUBLE_EQ(z.bytes_per_token, 2 * (32 + 16) * 4.0 / 4 + 32 * 4.0 / 16);
  // Per sequence: 4 rings of 8 x 32 floats; CSA open windows 2x[4, 64] + overlap 2x[4, 32] (kv)
  // and 2x[4, 32] + 2x[4, 16] (index); HCA open window 2x[16, 32].
  const size_t ring = 8 * 32 * 4, csa = (2 * 4 * 64 + 2 * 4 * 32 + 2 * 4 * 32 + 2 * 4 * 16) * 4,
               hca = 2 * 16 * 32 * 4;
  EXPECT_EQ(z.bytes_per_sequence, 4 * ring + 2 * csa + hca);
}

}  // namespace
}  // namespace deepinfer::v4
