// v4::decode_part_floors (model/deepseek_v4/decode_floor.h), the floor of a decode step by the
// CUDA profile's parts: on the first four V4-Flash layers (SWA, SWA, CSA, HCA) its weight bytes
// against the checkpoint's shapes written out by hand, its FLOPs against v4::prefill_flops (a
// decode token multiplies the same weights as a prefill token; its attention rows are the
// prefill's at the next position), its state against a count by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "model/deepseek_v4/decode_floor.h"
#include "model/deepseek_v4/flash_config.h"
#include "model/deepseek_v4/prefill_flops.h"

namespace deepinfer::v4 {
namespace {

V4Config flash4() {
  auto c = flash_config(4, 256);
  EXPECT_TRUE(c.is_ok());
  return *c;
}

const DecodePartFloor& find(const std::vector<DecodePartFloor>& p, std::string_view name) {
  for (const auto& f : p)
    if (f.part == name) return f;
  ADD_FAILURE() << "no part " << name;
  static const DecodePartFloor none;
  return none;
}

double fp8(double r, double c) { return r * c + std::ceil(r / 128) * std::ceil(c / 128) * 4; }

TEST(DecodeFloor, EveryPartOnceInForwardOrder) {
  const auto p = decode_part_floors(flash4(), 8, 4096);
  ASSERT_EQ(p.size(), 15u);
  EXPECT_EQ(p.front().part, part::kEmbedding);
  EXPECT_EQ(p[1].part, part::kAttnPre);
  EXPECT_EQ(p[12].part, part::kMoeExperts);
  EXPECT_EQ(p.back().part, part::kHead);
  std::set<std::string_view> names;
  for (const auto& f : p) names.insert(f.part);
  EXPECT_EQ(names.size(), p.size());
}

TEST(DecodeFloor, WeightBytesFromTheCheckpointShapes) {
  const V4Config c = flash4();
  const auto p = decode_part_floors(c, 1, 4096);
  // four layers of each dense FP8 linear (e4m3 + an fp32 scale per 128 x 128)
  EXPECT_DOUBLE_EQ(find(p, part::kAttnQ).weight_bytes, 4 * fp8(64 * 512, 1024));
  EXPECT_DOUBLE_EQ(find(p, part::kAttnKv).weight_bytes, 4 * (fp8(512, 4096) + 512 * 4));
  EXPECT_DOUBLE_EQ(find(p, part::kAttnWoA).weight_bytes, 4 * fp8(8 * 1024, 4096));
  EXPECT_DOUBLE_EQ(find(p, part::kAttnPost).weight_bytes, 4 * fp8(4096, 8 * 1024));
  EXPECT_DOUBLE_EQ(find(p, part::kMoeShared).weight_bytes, 4 * 3 * fp8(2048, 4096));
  // mHC site: fn [24, 4 x 4096] + base [24] + scale [3] fp32, then the norm(s)
  const double hc = 4 * (24.0 * 16384 + 24 + 3);
  EXPECT_DOUBLE_EQ(find(p, part::kAttnPre).weight_bytes, 4 * (hc + 4096 * 4 + fp8(1024, 4096) + 1024 * 4));
  EXPECT_DOUBLE_EQ(find(p, part::kMoePre).weight_bytes, 4 * (hc + 4096 * 4));
  // compressors: layer 2 (CSA, ratio 4, overlapping: 1024 rows) and layer 3 (HCA, ratio 128, 512
  // rows), wkv + wgate bf16, ape [ratio, rows] and norm [512] fp32; the SWA layers none
  const double csa = 2 * (2.0 * 1024 * 4096) + 4 * (4.0 * 1024 + 512);
  const double hca = 2 * (2.0 * 512 * 4096) + 4 * (128.0 * 512 + 512);
  EXPECT_DOUBLE_EQ(find(p, part::kAttnCompressor).weight_bytes, csa + hca);
  // the indexer (layer 2 only): its compressor (2 x 128 rows), wq_b FP8, weights_proj bf16
  const double icmp = 2 * (2.0 * 256 * 4096) + 4 * (4.0 * 256 + 128);
  EXPECT_DOUBLE_EQ(find(p, part::kAttnIndexer).weight_bytes, icmp + fp8(64 * 128, 1024) + 2.0 * 64 * 4096);
  // the router: gate bf16 [256, 4096] + bias fp32
  EXPECT_DOUBLE_EQ(find(p, part::kMoeRouting).weight_bytes, 4 * (2.0 * 256 * 4096 + 256 * 4));
  // batch 1: exactly top-6 experts a layer, each w1, w3, w2 of 2048 x 4096 codes (half a byte +
  // an E8M0 byte per 32)
  const double expert = 3 * (2048.0 * 4096 / 2 + 2048.0 * 4096 / 32);
  EXPECT_NEAR(find(p, part::kMoeExperts).weight_bytes, 4 * 6 * expert, 1e-6 * expert);
  // the head: bf16 [129280, 4096], its mHC site fn [4, 16384] + base [4] + scale [1], the norm
  EXPECT_DOUBLE_EQ(find(p, part::kHead).weight_bytes, 2.0 * 129280 * 4096 + 4 * (4.0 * 16384 + 4 + 1) + 4096 * 4);
  // distinct experts grow with the batch towards all 256
  EXPECT_NEAR(expected_distinct_experts(c, 1), 6, 1e-12);
  EXPECT_NEAR(expected_distinct_experts(c, 256), 256 * (1 - std::pow(1 - 6.0 / 256, 256)), 1e-9);
  EXPECT_GT(expected_distinct_experts(c, 4096), 255.9);
  EXPECT_EQ(expected_distinct_experts(c, 0), 0);
}

TEST(DecodeFloor, FlopsAreThePrefillsAtTheNextPosition) {
  const V4Config c = flash4();
  for (const int64_t B : {1, 32}) {
    for (const int64_t C : {0, 100, 4096, 32768}) {
      const auto p = decode_part_floors(c, B, C);
      // every linear of a token: the parts' FLOPs but attention's and the head's
      double linear = 0;
      for (const auto& f : p)
        if (f.part != part::kAttnCore && f.part != part::kHead) linear += f.fp8_flops + f.bf16_flops;
      const double Bd = static_cast<double>(B);
      EXPECT_NEAR(linear, Bd * prefill_flops(c, 1).linear, 1e-9 * linear) << "B " << B << " C " << C;
      // attention + indexer scores of the query at position C: the prefill's of C + 1 tokens
      // minus those of C
      const PrefillFlops a = prefill_flops(c, C + 1), b = prefill_flops(c, C);
      const double core = (a.attention + a.indexer) - (b.attention + b.indexer);
      EXPECT_NEAR(find(p, part::kAttnCore).bf16_flops, Bd * core, 1e-9 * Bd * core) << "B " << B << " C " << C;
      EXPECT_DOUBLE_EQ(find(p, part::kHead).bf16_flops, Bd * a.head);
    }
  }
}

TEST(DecodeFloor, AttentionByHand) {
  // context 4096: the query attends 128 window rows in each layer, plus 512 of layer 2's 1024 CSA
  // entries (whose 1024 indexer keys it scores) and layer 3's 32 HCA entries
  const double rows = 128 + 128 + (128 + 512) + (128 + 32);
  const double flops = 4 * 64 * 512 * rows + 2 * 64 * 128 * 1024.0;
  EXPECT_DOUBLE_EQ(find(decode_part_floors(flash4(), 3, 4096), part::kAttnCore).bf16_flops, 3 * flops);
}

TEST(DecodeFloor, PrefillPartsAddUpToPrefillFlops) {
  const V4Config c = flash4();
  for (const int64_t P : {1, 1000, 8192}) {
    const auto p = prefill_part_floors(c, 2, P);
    double flops = 0;
    for (const auto& f : p) flops += f.fp8_flops + f.bf16_flops;
    const double want = 2 * prefill_flops(c, P).total();
    EXPECT_NEAR(flops, want, 1e-9 * want) << "P " << P;
    // the prefill path runs the compressors and the indexer's projections in the attention part
    EXPECT_EQ(find(p, part::kAttnCompressor).weight_bytes + find(p, part::kAttnCompressor).bf16_flops, 0);
    EXPECT_DOUBLE_EQ(find(p, part::kAttnIndexer).weight_bytes, fp8(64 * 128, 1024));
    for (const auto& f : p) EXPECT_EQ(f.state_bytes, 0) << f.part;
  }
  // the same weights as a decode step reaching the same experts, moved between parts
  const auto pre = prefill_part_floors(c, 1, 8192), dec = decode_part_floors(c, 8192, 100);
  double wp = 0, wd = 0;
  for (const auto& f : pre) wp += f.weight_bytes;
  for (const auto& f : dec) wd += f.weight_bytes;
  EXPECT_NEAR(wp, wd, 1e-9 * wd);
  EXPECT_GT(find(pre, part::kAttnCore).weight_bytes, find(dec, part::kAttnCore).weight_bytes);
}

TEST(DecodeFloor, StateByHand) {
  const V4Config c = flash4();
  // context 4096 (the new token is the 4097th): 4 window rings of 128 rows of 512 bf16; layer 2
  // (CSA, ratio 4) keeps 512 of its 1024 entries and reads 1024 indexer keys of 128 bf16; layer 3
  // (HCA, ratio 128) attends its 32 entries
  const double per_seq = 4 * 128 * 1024.0 + 512 * 1024.0 + 1024 * 256.0 + 32 * 1024.0;
  EXPECT_DOUBLE_EQ(decode_state_bytes_per_sequence(c, 4096), per_seq);
  EXPECT_DOUBLE_EQ(find(decode_part_floors(c, 64, 4096), part::kAttnCore).state_bytes, 64 * per_seq);
  // context 10: every row still in the window, no closed HCA entry, 2 CSA entries
  EXPECT_DOUBLE_EQ(decode_state_bytes_per_sequence(c, 10), 4 * 11 * 1024.0 + 2 * 1024.0 + 2 * 256.0);
  for (const auto& f : decode_part_floors(c, 64, 4096)) {
    if (f.part != part::kAttnCore) {
      EXPECT_EQ(f.state_bytes, 0) << f.part;
    }
  }
}

TEST(DecodeFloor, FloorIsTheLargerOfBytesAndFlops) {
  DecodePartFloor f;
  f.weight_bytes = 3e9, f.state_bytes = 1e9, f.fp8_flops = 2e12, f.bf16_flops = 1e12;
  EXPECT_DOUBLE_EQ(f.bytes(), 4e9);
  EXPECT_DOUBLE_EQ(f.floor_s(4e12, 1e16, 4e15), 1e-3);         // bytes: 4e9 / 4e12 (FLOPs 4.5e-4 s)
  EXPECT_DOUBLE_EQ(f.floor_s(4e13, 1e15, 5e14), 4e-3);         // FLOPs: 2e12 / 1e15 + 1e12 / 5e14
  EXPECT_DOUBLE_EQ(f.floor_s(0, 0, 0), 0);                     // no rates measured: no floor
  const auto none = decode_part_floors(flash4(), 0, 4096);  // no sequences: nothing but the weights
  for (const auto& p : none) EXPECT_EQ(p.fp8_flops + p.bf16_flops + p.state_bytes, 0) << p.part;
}

}  // namespace
}  // namespace deepinfer::v4
