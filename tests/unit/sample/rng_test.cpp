#include "sample/rng.h"

#include <set>

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

// Known-answer vectors from Random123 (kat_vectors: philox4x32 10 rounds).
TEST(RngTest, Philox4x32_10KnownAnswers) {
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (A4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (A4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (A4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(RngTest, UniformIsInRangeAndRoughlyUniform) {
  const RngKey key{1234, 0};
  double sum = 0;
  int buckets[10] = {};
  constexpr int kN = 20000;
  for (int i = 0; i < kN; ++i) {
    const double u = rng_uniform(key, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++buckets[static_cast<int>(u * 10)];
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.01);
  for (int b : buckets) EXPECT_NEAR(b / static_cast<double>(kN), 0.1, 0.01);
}

TEST(RngTest, PureFunctionOfKeyPositionDraw) {
  const RngKey key{42, 3};
  EXPECT_EQ(rng_uniform(key, 17), rng_uniform(RngKey{42, 3}, 17));
  std::set<double> seen;
  seen.insert(rng_uniform(key, 17));
  seen.insert(rng_uniform(RngKey{43, 3}, 17));              // other seed
  seen.insert(rng_uniform(RngKey{42, 4}, 17));              // other sample index
  seen.insert(rng_uniform(key, 18));                        // other position
  seen.insert(rng_uniform(key, 17 + (int64_t{1} << 32)));   // high position bits count
  seen.insert(rng_uniform(RngKey{42 + (uint64_t{1} << 32), 3}, 17));  // high seed bits count
  seen.insert(rng_uniform(key, 17, RngDraw::kSpecAccept));  // other draw purpose
  EXPECT_EQ(seen.size(), 7u);
}

TEST(RngTest, SeedSourceAndResolveSeed) {
  SeedSource a(7), b(7), c(8);
  const uint64_t a1 = a.next(), a2 = a.next();
  EXPECT_EQ(a1, b.next());
  EXPECT_NE(a1, a2);
  EXPECT_NE(a1, c.next());
  SeedSource s(1);
  EXPECT_EQ(resolve_seed(uint64_t{99}, s), 99u);
  SeedSource t(1);
  const uint64_t drawn = resolve_seed(std::nullopt, s);
  EXPECT_EQ(drawn, t.next());  // the seeded call did not consume from the source
}

}  // namespace
}  // namespace deepinfer
