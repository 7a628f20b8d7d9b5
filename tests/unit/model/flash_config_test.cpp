// v4::flash_config (model/deepseek_v4/flash_config.h): the published V4-Flash shapes through
// V4Config::from_json, the first-N-layer and EP-slice variants, and the `deepinfer bench
// --synthetic` spellings.
#include <gtest/gtest.h>

#include <vector>

#include "model/deepseek_v4/flash_config.h"

namespace deepinfer::v4 {
namespace {

std::vector<int64_t> published_ratios() {
  std::vector<int64_t> r{0, 0};
  for (int i = 0; i < 20; ++i) r.push_back(4), r.push_back(128);
  r.push_back(4);
  return r;
}

TEST(FlashConfig, PublishedShapes) {
  auto r = flash_config();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const V4Config& c = *r;
  EXPECT_EQ(c.num_layers, 43);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.rope_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 1024);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.o_lora_rank, 1024);
  EXPECT_EQ(c.window, 128);
  EXPECT_EQ(c.index_n_heads, 64);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.experts_per_tok, 6);
  EXPECT_EQ(c.moe_inter, 2048);
  EXPECT_EQ(c.scoring_func, "sqrtsoftplus");
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c.routed_scaling, 1.5);
  EXPECT_DOUBLE_EQ(c.swiglu_limit, 10.0);
  EXPECT_DOUBLE_EQ(c.rms_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.fp8_block_rows, 128);
  EXPECT_EQ(c.fp8_block_cols, 128);
  EXPECT_DOUBLE_EQ(c.rope_main.theta, 10000.0);
  EXPECT_FALSE(c.rope_main.yarn);
  EXPECT_DOUBLE_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_TRUE(c.rope_compress.yarn);
  EXPECT_DOUBLE_EQ(c.rope_compress.factor, 16.0);
  EXPECT_DOUBLE_EQ(c.rope_compress.original_max_position, 65536.0);
  EXPECT_EQ(c.ratios, published_ratios());
  int sliding = 0, csa = 0, hca = 0;
  for (int64_t l = 0; l < 43; ++l) {
    const AttnKind k = c.attn_kinds[l];
    sliding += k == AttnKind::kSliding, csa += k == AttnKind::kCsa, hca += k == AttnKind::kHca;
    EXPECT_EQ(k, c.ratios[l] == 0 ? AttnKind::kSliding : c.ratios[l] == 4 ? AttnKind::kCsa : AttnKind::kHca) << l;
    EXPECT_EQ(c.hash_moe[l], l < 3) << l;
  }
  EXPECT_EQ(sliding, 2);
  EXPECT_EQ(csa, 21);
  EXPECT_EQ(hca, 20);
  EXPECT_EQ(c.attn_kinds[2], AttnKind::kCsa);
  EXPECT_EQ(c.attn_kinds[3], AttnKind::kHca);
  EXPECT_EQ(c.attn_kinds[42], AttnKind::kCsa);
}

TEST(FlashConfig, JsonIsTheUpstreamSpelling) {
  const nlohmann::json j = flash_config_json();
  EXPECT_EQ(j["model_type"], "deepseek_v4");
  EXPECT_EQ(j["num_hidden_layers"], 43);
  ASSERT_EQ(j["compress_ratios"].size(), 44u);  // + the MTP stage's entry, as published
  EXPECT_EQ(j["compress_ratios"][43], 0);
  EXPECT_EQ(j["num_hash_layers"], 3);
  EXPECT_EQ(j["rope_scaling"]["type"], "yarn");
  EXPECT_EQ(j["quantization_config"]["scale_fmt"], "ue8m0");
}

TEST(FlashConfig, FirstNLayersInTheRealOrder) {
  for (int64_t n : {1, 2, 3, 4, 7, 42}) {
    auto r = flash_config(n);
    ASSERT_TRUE(r.is_ok()) << n << ": " << r.status().to_string();
    EXPECT_EQ(r->num_layers, n);
    const std::vector<int64_t> all = published_ratios();
    EXPECT_EQ(r->ratios, std::vector<int64_t>(all.begin(), all.begin() + n));
    ASSERT_EQ(static_cast<int64_t>(r->hash_moe.size()), n);
    for (int64_t l = 0; l < n; ++l) EXPECT_EQ(r->hash_moe[l], l < 3);
    EXPECT_EQ(r->n_routed_experts, 256);
  }
  auto four = flash_config(4);
  ASSERT_TRUE(four.is_ok());
  EXPECT_EQ(four->attn_kinds, (std::vector<AttnKind>{AttnKind::kSliding, AttnKind::kSliding, AttnKind::kCsa,
                                                     AttnKind::kHca}));
}

TEST(FlashConfig, ExpertSlice) {
  auto r = flash_config(43, 32);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->num_layers, 43);
  EXPECT_EQ(r->n_routed_experts, 32);
  EXPECT_EQ(r->experts_per_tok, 6);
  EXPECT_EQ(r->n_shared_experts, 1);
  auto small = flash_config(2, 16);
  ASSERT_TRUE(small.is_ok());
  EXPECT_EQ(small->n_routed_experts, 16);
  EXPECT_EQ(small->experts_per_tok, 6);
  auto tiny = flash_config(1, 4);  // fewer than six experts: top-4
  ASSERT_TRUE(tiny.is_ok());
  EXPECT_EQ(tiny->experts_per_tok, 4);
}

TEST(FlashConfig, OutOfRange) {
  EXPECT_FALSE(flash_config(0).is_ok());
  EXPECT_FALSE(flash_config(44).is_ok());
  EXPECT_FALSE(flash_config(4, 0).is_ok());
  EXPECT_FALSE(flash_config(4, 257).is_ok());
}

TEST(FlashConfig, BenchSpellings) {
  auto spec = [](const char* s) { return parse_flash_spec(s); };
  ASSERT_TRUE(spec("v4-flash").is_ok());
  EXPECT_EQ(spec("v4-flash")->layers, 4);
  EXPECT_EQ(spec("v4-flash")->experts, 256);
  EXPECT_EQ(spec("v4-flash:8")->layers, 8);
  EXPECT_EQ(spec("v4-flash:8")->experts, 256);
  EXPECT_EQ(spec("v4-flash:43:32")->layers, 43);
  EXPECT_EQ(spec("v4-flash:43:32")->experts, 32);
  EXPECT_EQ(spec("v4-flash:1:1")->experts, 1);
  EXPECT_EQ(spec("v4-flash-ep8")->layers, 43);
  EXPECT_EQ(spec("v4-flash-ep8")->experts, 32);
  for (const char* bad : {"v4-flash:0", "v4-flash:44", "foo", "", "v4-flash:", "v4-flash:4:", "v4-flash:4:0",
                          "v4-flash:4:257", "v4-flashy", "v4-flash:4:8:1", "v4-flash:x", "v4-flash:-1",
                          "v4-flash-ep4", "V4-FLASH"}) {
    auto r = spec(bad);
    EXPECT_FALSE(r.is_ok()) << "'" << bad << "' accepted";
    if (!r.is_ok()) {
      EXPECT_NE(r.status().message().find("--synthetic"), std::string_view::npos) << bad;
    }
  }
  EXPECT_NE(spec("v4-flash:44").status().message().find("1..43"), std::string_view::npos);
}

}  // namespace
}  // namespace deepinfer::v4
