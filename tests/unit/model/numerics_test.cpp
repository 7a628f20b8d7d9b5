// The reference-rounding helpers (model/numerics.h) against hand-worked values: e4m3 / e2m1
// round-to-nearest-even with saturation and subnormals, the ue8m0 and e4m3 scale choices, block
// fake-quantisation (partial last block) and the normalised Hadamard transform.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/numerics.h"

namespace deepinfer::numerics {
namespace {

TEST(Numerics, E4m3RoundsToNearestEven) {
  // [1, 2): quantum 1/8. 1.0625 is halfway between 1 and 1.125 -> even mantissa (1.0).
  EXPECT_EQ(round_e4m3(1.0625f), 1.0f);
  EXPECT_EQ(round_e4m3(1.1875f), 1.25f);  // halfway 1.125 / 1.25 -> 1.25 (mantissa 2, even)
  EXPECT_EQ(round_e4m3(1.07f), 1.125f);
  EXPECT_EQ(round_e4m3(-3.3f), -3.25f);   // [2, 4): quantum 1/4
  // [256, 448]: quantum 32. 432 is halfway between 416 = 256 * 1.625 (mantissa 101) and
  // 448 = 256 * 1.75 (110): the even one is 448.
  EXPECT_EQ(round_e4m3(432.f), 448.f);
  EXPECT_EQ(round_e4m3(400.f), 384.f);    // halfway 384 (100) / 416 (101) -> 384
  EXPECT_EQ(round_e4m3(1000.f), 448.f);   // saturates (e4m3fn has no inf)
  EXPECT_EQ(round_e4m3(-1e9f), -448.f);
  // Subnormals: quantum 2^-9 below 2^-6.
  EXPECT_EQ(round_e4m3(std::ldexp(3.f, -10)), std::ldexp(2.f, -9));  // 1.5 quanta -> 2 (even)
  EXPECT_EQ(round_e4m3(std::ldexp(1.f, -10)), 0.f);                   // 0.5 quantum -> 0 (even)
  EXPECT_EQ(round_e4m3(std::ldexp(1.1f, -10)), std::ldexp(1.f, -9));
  EXPECT_EQ(round_e4m3(0.f), 0.f);
  EXPECT_TRUE(std::signbit(round_e4m3(-0.f)));
  EXPECT_EQ(round_e4m3(std::ldexp(1.f, -6)), std::ldexp(1.f, -6));  // smallest normal, exact
}

TEST(Numerics, E2m1RoundsToNearestEven) {
  // Grid 0 .5 1 1.5 2 3 4 6; ties go to the even code (0, 1, 2, 4, ...).
  const float in[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f, 0.26f, 2.6f, 4.9f, 5.1f, 7.f, 100.f};
  const float want[] = {0.f, 1.f, 1.f, 2.f, 2.f, 4.f, 4.f, 0.5f, 3.f, 4.f, 6.f, 6.f, 6.f};
  for (size_t i = 0; i < std::size(in); ++i) {
    EXPECT_EQ(round_e2m1(in[i]), want[i]) << in[i];
    EXPECT_EQ(round_e2m1(-in[i]), -want[i]) << -in[i];
  }
}

TEST(Numerics, ScaleChoices) {
  EXPECT_EQ(pow2_ceil(1.f), 1.f);
  EXPECT_EQ(pow2_ceil(1.0001f), 2.f);
  EXPECT_EQ(pow2_ceil(0.75f), 1.f);
  EXPECT_EQ(pow2_ceil(0.5f), 0.5f);
  // FP8: 2^ceil(log2(amax / 448)).
  EXPECT_EQ(fp8_scale(448.f), 1.f);
  EXPECT_EQ(fp8_scale(449.f), 2.f);
  EXPECT_EQ(fp8_scale(1.f), std::ldexp(1.f, -8));     // 1/448 in (2^-9, 2^-8]
  EXPECT_EQ(fp8_scale(0.f), pow2_ceil(1e-4f / 448.f));  // the 1e-4 floor: 2^-22
  EXPECT_EQ(fp8_scale(0.f), std::ldexp(1.f, -22));
  // FP4 ue8m0: 2^ceil(log2(amax / 6)).
  EXPECT_EQ(fp4_scale(6.f), 1.f);
  EXPECT_EQ(fp4_scale(7.f), 2.f);
  EXPECT_EQ(fp4_scale(3.f), 0.5f);
  EXPECT_EQ(fp4_scale(0.f), std::ldexp(1.f, -126));
  // FP4 e4m3 scale: round_e4m3(amax / 6), floor 6 * 2^-9.
  EXPECT_EQ(fp4_scale_e4m3(6.f), 1.f);
  EXPECT_EQ(fp4_scale_e4m3(7.f), 1.125f);  // 7/6 = 1.1667 -> 1.125
  EXPECT_EQ(fp4_scale_e4m3(0.f), std::ldexp(1.f, -9));
}

TEST(Numerics, BlockFakeQuant) {
  // FP8 per 2: block {3, 0.1}: s = 2^ceil(log2(3/448)) = 2^-7; 3/s = 384 exact; 0.1/s = 12.8 -> 13.
  // Block {1000} (partial): s = 4, 250 -> 256 (quantum 16 in [128,256)... 250 between 240 and 256).
  std::vector<float> x = {3.f, 0.1f, 1000.f};
  fake_fp8(x.data(), 3, 2);
  EXPECT_EQ(x[0], 3.f);
  EXPECT_EQ(x[1], 13.f / 128.f);
  EXPECT_EQ(x[2], 1024.f);
  // FP4 per 4, ue8m0: amax 5 -> s = 1: {5, 1.2, -0.3, 2.5} -> {4, 1, -0.5, 2}.
  std::vector<float> y = {5.f, 1.2f, -0.3f, 2.5f};
  fake_fp4(y.data(), 4, 4);
  EXPECT_EQ(y, (std::vector<float>{4.f, 1.f, -0.5f, 2.f}));
  // FP4 per 2 with e4m3 scale: amax 7 -> s = 1.125; 7/1.125 = 6.22 -> 6 (clamped) -> 6.75;
  // 1/1.125 = 0.889 -> 1 -> 1.125.
  std::vector<float> z = {7.f, 1.f};
  fake_fp4(z.data(), 2, 2, /*e4m3_scale=*/true);
  EXPECT_EQ(z, (std::vector<float>{6.75f, 1.125f}));
}

TEST(Numerics, HadamardIsNormalisedAndInvolutive) {
  std::vector<float> x = {1.f, 0.f, 0.f, 0.f};
  hadamard(x.data(), 4);
  EXPECT_EQ(x, (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
  std::vector<float> y = {1.f, 2.f, 3.f, 4.f};
  hadamard(y.data(), 4);  // H4 [1 2 3 4] / 2 = [10, -2, -4, 0] / 2
  EXPECT_EQ(y, (std::vector<float>{5.f, -1.f, -2.f, 0.f}));
  hadamard(y.data(), 4);
  EXPECT_EQ(y, (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
}

}  // namespace
}  // namespace deepinfer::numerics
