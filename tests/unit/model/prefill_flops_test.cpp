// v4::prefill_flops (model/deepseek_v4/prefill_flops.h), the bench's prefill compute floor:
// checked on the first four V4-Flash layers (SWA, SWA, CSA, HCA) against the checkpoint's tensor
// shapes written out by hand (linears: 2 x the weights a token multiplies) and against a
// position-by-position count of the rows each query attends to (the closed forms' check).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "model/deepseek_v4/flash_config.h"
#include "model/deepseek_v4/prefill_flops.h"

namespace deepinfer::v4 {
namespace {

struct Linear {
  double rows, cols, per_token;  // [rows, cols] weight, applied per_token times to each token
};

// Weights one token multiplies in V4-Flash layers 0..3 (hidden 4096, 64 heads x 512, q_lora 1024,
// 8 x 1024 output groups, 1 shared + 6 of 256 experts x 2048, index 64 x 128), as the checkpoint
// names them (V4-MODEL.md section 3).
std::vector<Linear> flash_layer_linears(AttnKind kind) {
  std::vector<Linear> l{
      {1024, 4096, 1},          // attn.wq_a
      {64 * 512, 1024, 1},      // attn.wq_b
      {512, 4096, 1},           // attn.wkv
      {8 * 1024, 4096, 1},      // attn.wo_a [o_groups * o_lora_rank, heads * head_dim / o_groups]
      {4096, 8 * 1024, 1},      // attn.wo_b
      {256, 4096, 1},           // ffn.gate (router)
      {2048, 4096, 2 * 7},      // ffn.{shared_experts, 6 experts}.w1, w3
      {4096, 2048, 7},          // ffn.{shared_experts, 6 experts}.w2
  };
  if (kind == AttnKind::kCsa) {
    l.push_back({2 * 512, 4096, 2});  // attn.compressor.wkv, wgate (overlap: 2 x 512 rows)
    l.push_back({2 * 128, 4096, 2});  // attn.indexer.compressor.wkv, wgate
    l.push_back({64 * 128, 1024, 1});  // attn.indexer.wq_b
    l.push_back({64, 4096, 1});        // attn.indexer.weights_proj
  }
  if (kind == AttnKind::kHca) l.push_back({512, 4096, 2});  // attn.compressor.wkv, wgate
  return l;
}

double linear_flops_per_token(const V4Config& c) {
  double f = 0;
  for (int64_t i = 0; i < c.num_layers; ++i)
    for (const Linear& w : flash_layer_linears(c.attn_kinds[static_cast<size_t>(i)]))
      f += 2 * w.rows * w.cols * w.per_token;
  return f;
}

// Rows each query attends to and indexer entries it scores, position by position.
void count_rows(const V4Config& c, int64_t T, double& attn_rows, double& idx_entries) {
  attn_rows = idx_entries = 0;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const AttnKind kind = c.attn_kinds[static_cast<size_t>(i)];
    const int64_t ratio = c.ratios[static_cast<size_t>(i)];
    for (int64_t p = 0; p < T; ++p) {
      attn_rows += static_cast<double>(std::min<int64_t>(p + 1, c.window));
      if (kind == AttnKind::kHca) attn_rows += static_cast<double>((p + 1) / ratio);
      if (kind == AttnKind::kCsa) {
        attn_rows += static_cast<double>(std::min<int64_t>((p + 1) / ratio, c.index_topk));
        idx_entries += static_cast<double>((p + 1) / ratio);
      }
    }
  }
}

TEST(PrefillFlops, FlashFourLayersByHand) {
  auto r = flash_config(4, 256);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const V4Config& c = *r;
  ASSERT_EQ(c.attn_kinds, (std::vector<AttnKind>{AttnKind::kSliding, AttnKind::kSliding, AttnKind::kCsa,
                                                  AttnKind::kHca}));
  const int64_t T = 8192;
  const PrefillFlops f = prefill_flops(c, T);
  // 4 x 284,164,096 common multiply-adds + CSA 19,136,512 + HCA 4,194,304 per token.
  EXPECT_DOUBLE_EQ(linear_flops_per_token(c), 2.0 * 1159987200.0);
  EXPECT_DOUBLE_EQ(f.linear, linear_flops_per_token(c) * T);
  double rows = 0, entries = 0;
  count_rows(c, T, rows, entries);
  EXPECT_DOUBLE_EQ(f.attention, 4.0 * 64 * 512 * rows);
  EXPECT_DOUBLE_EQ(f.indexer, 2.0 * 64 * 128 * entries);
  EXPECT_DOUBLE_EQ(f.head, 2.0 * 4096 * 129280);
  EXPECT_DOUBLE_EQ(f.total(), f.linear + f.attention + f.indexer + f.head);
}

// Short prompts (inside the window, before the first HCA entry, before the CSA top-k is full) and
// long ones (past all three) against the position-by-position count.
TEST(PrefillFlops, AttentionRowsMatchPositionCount) {
  auto r = flash_config(4, 256);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  for (int64_t T : {1, 3, 4, 5, 127, 128, 129, 255, 256, 2047, 2048, 2049, 2051, 5000}) {
    const PrefillFlops f = prefill_flops(*r, T);
    double rows = 0, entries = 0;
    count_rows(*r, T, rows, entries);
    EXPECT_DOUBLE_EQ(f.attention, 4.0 * 64 * 512 * rows) << "T=" << T;
    EXPECT_DOUBLE_EQ(f.indexer, 2.0 * 64 * 128 * entries) << "T=" << T;
  }
}

TEST(PrefillFlops, LinearPartGrowsLinearly) {
  auto r = flash_config(43, 256);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const PrefillFlops one = prefill_flops(*r, 1), f = prefill_flops(*r, 1000), g = prefill_flops(*r, 3000);
  EXPECT_DOUBLE_EQ(f.linear, 1000 * one.linear);
  EXPECT_DOUBLE_EQ(g.linear, 3 * f.linear);
  EXPECT_DOUBLE_EQ(g.head, f.head);  // once per prompt
  EXPECT_GT(g.attention, 3 * f.attention);  // each query sees more compressed rows
  // A token of the full model: 2 x the 12.7B weights it multiplies (V4-MODEL.md: 13B active,
  // embedding and head included) -> about 25.4 GFLOP.
  EXPECT_GT(one.linear, 20e9);
  EXPECT_LT(one.linear, 26e9);
}

TEST(PrefillFlops, EmptyPrompt) {
  auto r = flash_config(4, 256);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(prefill_flops(*r, 0).total(), 0.0);
}

}  // namespace
}  // namespace deepinfer::v4
