// `deepinfer inspect` on a V4.1-Flash folder holding only the published config.json (V4-MODEL.md
// 1.3) and a synthetic model.safetensors.index.json of its tensor names (V4-MODEL.md 3 and 7,
// tools/reference/README.md item 10). Expected numbers worked out from the architecture by hand:
//   backbone    2*129280*5120 + 5120 + 40 * per-layer + compressors/indexers = 551,566,165,104
//   Engram      (384006168 + 384016682) * 256 = 196,613,849,600 table values
//               2 * (5*5120 * 24*256 + 2*4*5120)  =     314,654,720
//   state f32   per KV source (512 + 128) * 4 / ratio: 3 * 1280 + 2560 = 6400 B per token;
//               40 rings * 128 * 512 * 4 + 3 ratio-2 open groups * 2*2*512*4 + 3 history ids * 4
//               = 10,510,348 B per sequence.
//   memory      stored formats (README item 10): FP8 32x32 = out*in + ceil(out/32)*ceil(in/32) B,
//               MXFP4 = out*in*(1/2 + 1/32) B, Engram rows FP8 + 1 B per 32, BF16 2 B, F32 4 B.
//     routed    40 layers * 384 experts * 3 * 2304*5120 * 17/32 = 288,777,830,400 B (split by id)
//     FP8       per layer wq_a 6,560,000 + wq_b 41,984,000 + wkv 2,624,000 + wo_a 33,587,200
//               + wo_b 41,984,000 + shared 3 * 11,808,000 = 162,163,200; * 40 = 6,486,528,000
//               + 8 indexer wq_b * 5,248,000 + 2 engram wkv * 157,440,000 = 6,843,392,000
//     BF16      2 * (2*129280*5120 + 5120 + 40*(2*5120 + 1280 + 512 + 384*5120)
//               + 4*(512*5120 + 512 + 128*512 + 128) + 3 wgate*512*5120 + 8*32*5120 + 2*2*4*5120)
//               = 2,845,928,448
//     F32       4 * 40 * (2*(24*20480 + 24 + 3) + 64 + 384) = 157,366,720
//     replicated 9,846,687,168; per GPU = replicated + routed / G:
//               G=1 298,624,517,568  G=2 154,235,602,368  G=4 82,041,144,768  G=8 45,943,915,968
//     Engram tables (host) 768,022,850 rows * (256 + 8) = 202,758,032,400 B
//   DSpark      3 stages (docs/v41.md section 7; E' = 128 experts, R = 256, k = 3 target layers):
//     per stage BF16 2 * (2*5120 + 1280 + 512 + 128*5120) = 1,334,784
//               F32  4 * (2*(24*20480 + 24 + 3) + 64 + 128) = 3,933,144
//               FP8  as a backbone layer's linears = 162,163,200 -> replicated 167,431,128
//               routed 128 * 3 * 2304*5120 * 17/32 = 2,406,481,920 (split by id: 128 / G per GPU)
//     stage 0   main_proj FP8 5120 x 15360: 78,643,200 + 160*480 = 78,720,000; main_norm 10,240
//     stage 2   norm 10,240 + markov_head.embed / .head BF16 2 * 2 * 129280*256 = 132,382,720
//               + confidence_head.proj BF16 2 * 5376 = 10,752 -> 132,403,712
//     replicated 3 * 167,431,128 + 78,730,240 + 132,403,712 = 713,427,336; routed 7,219,445,760
//     parameters 3 * (667,392 + 983,286 + 162,004,992 + 4,529,848,320) + 78,643,200 + 2*5120
//               + 2*33,095,680 + 5376 = 14,225,362,146
//   per GPU with DSpark = above + 713,427,336 + 7,219,445,760 / G:
//               G=1 306,557,390,664  G=2 158,558,752,584  G=4 84,559,433,544  G=8 47,559,774,024
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

nlohmann::json published_config() {
  std::vector<int> ratios{0, 0};
  for (int i = 0; i < 18; ++i) ratios.push_back(2);
  for (int i = 0; i < 20; ++i) ratios.push_back(1);
  for (int i = 0; i < 3; ++i) ratios.push_back(0);
  nlohmann::json t = {
      {"model_type", "deepseek_v41_text"}, {"vocab_size", 129280}, {"hidden_size", 5120},
      {"moe_intermediate_size", 2304}, {"num_hidden_layers", 40}, {"num_attention_heads", 64},
      {"num_key_value_heads", 1}, {"head_dim", 512}, {"qk_rope_head_dim", 64}, {"q_lora_rank", 1280},
      {"o_lora_rank", 1024}, {"o_groups", 8}, {"hidden_act", "silu"}, {"swiglu_limit", 10.0},
      {"rms_norm_eps", 1e-20}, {"max_position_embeddings", 1048576}, {"rope_theta", 10000.0},
      {"rope_scaling", {{"type", "yarn"}, {"factor", 16}, {"original_max_position_embeddings", 65536},
                        {"beta_fast", 32}, {"beta_slow", 1}}},
      {"n_routed_experts", 384}, {"n_shared_experts", 1}, {"num_experts_per_tok", 6},
      {"scoring_func", "sqrtsoftplus"}, {"topk_method", "noaux_tc"}, {"norm_topk_prob", true},
      {"routed_scaling_factor", 1.5}, {"sliding_window", 128}, {"compress_ratios", ratios},
      {"compress_rope_theta", 160000.0}, {"kv_source_layer_ids", {2, 8, 14, 20}},
      {"index_source_layer_ids", {2, 8, 14, 20, 24, 28, 32, 36}}, {"index_n_heads", 32},
      {"index_head_dim", 128}, {"index_topk", 512}, {"candidate_source_layer_id", 20},
      {"candidate_topk_blocks", 2048}, {"candidate_block_size", 8}, {"hc_mult", 4},
      {"hc_sinkhorn_iters", 20}, {"hc_eps", 1e-6}, {"engram_layer_ids", {1, 14}},
      {"engram_num_embeddings", {384006168, 384016682}}, {"engram_max_ngram_size", 4},
      {"engram_vocab_size", 16000000}, {"engram_n_heads", 8}, {"engram_head_dim", 256},
      {"engram_pad_token_id", 2}, {"engram_compressed_vocab_size", 99092}, {"num_nextn_predict_layers", 3},
      {"dspark_block_size", 5}, {"dspark_noise_token_id", 128799}, {"dspark_target_layer_ids", {37, 38, 39}},
      {"dspark_markov_rank", 256}, {"dspark_n_routed_experts", 128}, {"dspark_num_experts_per_tok", 3}};
  return {{"architectures", {"DeepseekV41ForCausalLM"}}, {"model_type", "deepseek_v41"}, {"bos_token_id", 0},
          {"eos_token_id", 1}, {"pad_token_id", 2}, {"image_token_id", 129264},
          {"quantization_config", {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"},
                                   {"weight_block_size", {32, 32}}, {"scale_fmt", "ue8m0"}, {"expert_dtype", "fp4"}}},
          {"text_config", t}, {"vision_config", {{"num_hidden_layers", 32}, {"hidden_size", 1024}}}};
}

// Tensor names per V4-MODEL.md 3.1-3.2 with section 7's changes; FP8/FP4 weights carry `.scale`.
nlohmann::json synthetic_index() {
  nlohmann::json wm = nlohmann::json::object();
  int shard = 0;
  auto put = [&](const std::string& n) { wm[n] = "model-" + std::to_string(1 + (shard++ / 2000) % 48) + "-of-00048.safetensors"; };
  auto q = [&](const std::string& p) { put(p + ".weight"); put(p + ".scale"); };
  put("embed.weight"); put("head.weight"); put("norm.weight");
  const std::vector<int> kv{2, 8, 14, 20}, ix{2, 8, 14, 20, 24, 28, 32, 36};
  for (int l = 0; l < 40; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    put(p + "attn_norm.weight"); put(p + "ffn_norm.weight");
    for (const char* s : {"hc_attn_", "hc_ffn_"}) for (const char* k : {"fn", "base", "scale"}) put(p + s + k);
    put(p + "attn.attn_sink");
    q(p + "attn.wq_a"); put(p + "attn.q_norm.weight"); q(p + "attn.wq_b"); q(p + "attn.wkv");
    put(p + "attn.kv_norm.weight"); q(p + "attn.wo_a"); q(p + "attn.wo_b");
    if (std::count(kv.begin(), kv.end(), l)) {
      put(p + "attn.compressor.wkv.weight");
      if (l < 20) put(p + "attn.compressor.wgate.weight");
      put(p + "attn.compressor.norm.weight"); put(p + "attn.indexer.wk.weight"); put(p + "attn.indexer.k_norm.weight");
    }
    if (std::count(ix.begin(), ix.end(), l)) { q(p + "attn.indexer.wq_b"); put(p + "attn.indexer.weights_proj.weight"); }
    put(p + "ffn.gate.weight"); put(p + "ffn.gate.bias"); put(p + "ffn.gate.bias_vl");
    for (int e = 0; e < 384; ++e)
      for (const char* w : {"w1", "w2", "w3"}) q(p + "ffn.experts." + std::to_string(e) + "." + w);
    for (const char* w : {"w1", "w2", "w3"}) q(p + "ffn.shared_experts." + w);
    if (l == 1 || l == 14) { q(p + "engram.embed"); q(p + "engram.wkv"); put(p + "engram.q_weight"); put(p + "engram.k_weight"); }
  }
  for (int s = 0; s < 3; ++s) { q("mtp." + std::to_string(s) + ".attn.wq_a"); put("mtp." + std::to_string(s) + ".attn_norm.weight"); }
  return {{"metadata", {{"total_size", 510000000000LL}}}, {"weight_map", wm}};
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  return out;
}

TEST(V41Inspect, PublishedConfigAndIndexGiveTheArchitecturesCounts) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "di_v41_inspect";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << published_config().dump(1);
  std::ofstream(dir / "model.safetensors.index.json") << synthetic_index().dump();
  const std::string out = run(std::string(DI_CLI_PATH) + " inspect --json " + dir.string() + " 2>&1");
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["parameters"]["backbone"].get<uint64_t>(), 551566165104ull);
  EXPECT_EQ(j["parameters"]["engram_tables"].get<uint64_t>(), 196613849600ull);
  EXPECT_EQ(j["parameters"]["engram_other"].get<uint64_t>(), 314654720ull);
  EXPECT_EQ(j["state"]["bytes_per_token"].get<double>(), 6400.0);
  EXPECT_EQ(j["state"]["bytes_per_sequence"].get<uint64_t>(), 10510348ull);
  EXPECT_EQ(j["tensors"]["dspark"].get<int64_t>(), 9);
  EXPECT_EQ(j["tensors"]["weights_present"].get<bool>(), false);
  const nlohmann::json& mem = j["memory"]["per_gpu_count"];
  ASSERT_EQ(mem.size(), 4u) << out;
  const int64_t gpus[] = {1, 2, 4, 8};
  const uint64_t per_gpu[] = {306557390664ull, 158558752584ull, 84559433544ull, 47559774024ull};
  EXPECT_EQ(j["parameters"]["dspark"].get<uint64_t>(), 14225362146ull);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(mem[i]["gpus"].get<int64_t>(), gpus[i]);
    EXPECT_EQ(mem[i]["experts_per_gpu"].get<int64_t>(), 384 / gpus[i]);
    EXPECT_EQ(mem[i]["routed_expert_bytes_per_gpu"].get<uint64_t>(), 288777830400ull / gpus[i]);
    EXPECT_EQ(mem[i]["replicated_bytes_per_gpu"].get<uint64_t>(), 9846687168ull);
    EXPECT_EQ(mem[i]["dspark_experts_per_gpu"].get<int64_t>(), 128 / gpus[i]);
    EXPECT_EQ(mem[i]["dspark_routed_bytes_per_gpu"].get<uint64_t>(), 7219445760ull / gpus[i]);
    EXPECT_EQ(mem[i]["dspark_replicated_bytes_per_gpu"].get<uint64_t>(), 713427336ull);
    EXPECT_EQ(mem[i]["weight_bytes_per_gpu"].get<uint64_t>(), per_gpu[i]);
    EXPECT_EQ(mem[i]["weight_bytes_per_gpu"].get<uint64_t>(),
              mem[i]["routed_expert_bytes_per_gpu"].get<uint64_t>() + mem[i]["replicated_bytes_per_gpu"].get<uint64_t>() +
                  mem[i]["dspark_routed_bytes_per_gpu"].get<uint64_t>() +
                  mem[i]["dspark_replicated_bytes_per_gpu"].get<uint64_t>());
    EXPECT_EQ(mem[i]["engram_table_host_bytes"].get<uint64_t>(), 202758032400ull);
    EXPECT_EQ(mem[i]["state_bytes_per_token"].get<double>(), 6400.0);
    EXPECT_EQ(mem[i]["state_bytes_per_sequence"].get<uint64_t>(), 10510348ull);
  }
  const std::string text = run(std::string(DI_CLI_PATH) + " inspect " + dir.string() + " 2>&1");
  EXPECT_NE(text.find("8 GPUs     47.560 GB weights per GPU"), std::string::npos) << text;

  // A missing tensor is an error naming the index and the tensor.
  nlohmann::json idx = synthetic_index();
  idx["weight_map"].erase("layers.20.attn.indexer.wk.weight");
  std::ofstream(dir / "model.safetensors.index.json") << idx.dump();
  const std::string err = run(std::string(DI_CLI_PATH) + " inspect " + dir.string() + " 2>&1");
  EXPECT_NE(err.find("missing tensor 'layers.20.attn.indexer.wk.weight'"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
