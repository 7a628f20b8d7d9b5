// V4Config::from_json in both config spellings, and V4Weights::load: name canonicalisation,
// upstream bare names giving bitwise the fixture's logits, and every inconsistency between the
// tensors and config.json being an error that names the file (or folder) and the tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"
#include "tests/util/checkpoint_writer.h"
#include "tests/util/v4_logits.h"

namespace deepinfer {
namespace {

using namespace deepinfer::testing;
using v4::AttnKind;
using v4::V4Config;
using json = nlohmann::json;

#define EXPECT_HAS(msg, needle) \
  EXPECT_NE(std::string(msg).find(needle), std::string::npos) << "'" << (needle) << "' not in: " << (msg)

// ---------------------------------------------------------------------------------------------
// Config: transformers spelling vs upstream spelling.

void expect_rope_eq(const v4::RopeConfig& a, const v4::RopeConfig& b, const char* what) {
  EXPECT_EQ(a.theta, b.theta) << what;
  EXPECT_EQ(a.yarn, b.yarn) << what;
  EXPECT_EQ(a.factor, b.factor) << what;
  EXPECT_EQ(a.original_max_position, b.original_max_position) << what;
  EXPECT_EQ(a.beta_fast, b.beta_fast) << what;
  EXPECT_EQ(a.beta_slow, b.beta_slow) << what;
}

void expect_config_eq(const V4Config& a, const V4Config& b) {
#define F(x) EXPECT_EQ(a.x, b.x) << #x
  F(vocab_size); F(hidden); F(num_layers); F(num_heads); F(head_dim); F(rope_dim); F(q_lora_rank);
  F(o_groups); F(o_lora_rank); F(window); F(attn_kinds); F(ratios); F(hash_moe); F(index_n_heads);
  F(index_head_dim); F(index_topk); F(hc_mult); F(hc_sinkhorn_iters); F(hc_eps); F(n_routed_experts);
  F(n_shared_experts); F(experts_per_tok); F(moe_inter); F(scoring_func); F(norm_topk_prob); F(routed_scaling);
  F(swiglu_limit); F(rms_eps); F(num_mtp_layers); F(tie_word_embeddings); F(fp8_block_rows); F(fp8_block_cols);
  F(bos_token_id); F(eos_token_id);
#undef F
  expect_rope_eq(a.rope_main, b.rope_main, "rope_main");
  expect_rope_eq(a.rope_compress, b.rope_compress, "rope_compress");
}

// Rewrites a transformers-spelled config.json in DeepSeek's upstream spelling, written out here
// by hand from V4-MODEL.md 1.1 (not through the parser under test).
json to_upstream(const json& hf, int mtp_entries = 1) {
  json j = hf;
  const int64_t csa = hf["compress_rates"]["compressed_sparse_attention"], hca = hf["compress_rates"]["heavily_compressed_attention"];
  json ratios = json::array();
  for (const auto& t : hf["layer_types"])
    ratios.push_back(t == "sliding_attention" ? 0 : t == "compressed_sparse_attention" ? csa : hca);
  for (int i = 0; i < mtp_entries; ++i) ratios.push_back(0);  // MTP stages' entries
  int64_t hash = 0;
  while (hash < static_cast<int64_t>(hf["mlp_layer_types"].size()) && hf["mlp_layer_types"][hash] == "hash_moe") ++hash;
  const json& comp = hf["rope_parameters"]["compress"];
  for (const char* k : {"layer_types", "compress_rates", "mlp_layer_types", "rope_parameters", "partial_rotary_factor"})
    j.erase(k);
  j["compress_ratios"] = ratios;
  j["num_hash_layers"] = hash;
  j["qk_rope_head_dim"] = static_cast<int64_t>(hf["head_dim"].get<int64_t>() * hf["partial_rotary_factor"].get<double>());
  j["rope_theta"] = hf["rope_parameters"]["main"]["rope_theta"];
  j["compress_rope_theta"] = comp["rope_theta"];
  j["rope_scaling"] = {{"type", "yarn"},
                       {"factor", comp["factor"]},
                       {"original_max_position_embeddings", comp["original_max_position_embeddings"]},
                       {"beta_fast", comp["beta_fast"]},
                       {"beta_slow", comp["beta_slow"]}};
  j["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                              {"weight_block_size", {128, 128}}, {"scale_fmt", "ue8m0"}};
  return j;
}

Result<V4Config> parse(const json& j) { return V4Config::from_json(j, "dir/config.json"); }

json fixture_config(const char* name) { return read_json_file(fixture_dir(name) + "/config.json"); }

TEST(V4ConfigTest, TransformersSpellingOfTinyA) {
  auto c = parse(fixture_config("tiny-v4-a"));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->attn_kinds, (std::vector<AttnKind>{AttnKind::kSliding, AttnKind::kCsa, AttnKind::kHca, AttnKind::kCsa}));
  EXPECT_EQ(c->ratios, (std::vector<int64_t>{0, 4, 16, 4}));
  EXPECT_EQ(c->hash_moe, (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(c->rope_dim, 8);
  EXPECT_EQ(c->rope_main.theta, 10000.0);
  EXPECT_FALSE(c->rope_main.yarn);
  EXPECT_EQ(c->rope_compress.theta, 160000.0);
  EXPECT_TRUE(c->rope_compress.yarn);
  EXPECT_EQ(c->rope_compress.factor, 16.0);
  EXPECT_EQ(c->rope_compress.original_max_position, 65536.0);
  EXPECT_EQ(c->rope_compress.beta_fast, 32.0);
  EXPECT_EQ(c->rope_compress.beta_slow, 1.0);
  EXPECT_EQ(c->fp8_block_rows, 128);
  EXPECT_EQ(c->num_mtp_layers, 1);
  EXPECT_EQ(c->routed_scaling, 1.5);
  EXPECT_EQ(c->swiglu_limit, 10.0);
  EXPECT_EQ(c->vocab_size, 1024);
}

class UpstreamConfig : public ::testing::TestWithParam<const char*> {};

TEST_P(UpstreamConfig, EqualsTransformersSpellingFieldByField) {
  const json hf = fixture_config(GetParam());
  auto a = parse(hf);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  for (int mtp_entries : {0, 1, 3}) {
    const json up = to_upstream(hf, mtp_entries);
    for (const char* k : {"layer_types", "compress_rates", "mlp_layer_types", "rope_parameters"})
      ASSERT_FALSE(up.contains(k));
    auto b = parse(up);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    expect_config_eq(*a, *b);
  }
  // rope_scaling spelled with rope_type instead of type.
  json up = to_upstream(hf);
  up["rope_scaling"].erase("type");
  up["rope_scaling"]["rope_type"] = "yarn";
  auto c = parse(up);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  expect_config_eq(*a, *c);
  // Both spellings at once, agreeing.
  json both = to_upstream(hf);
  for (const char* k : {"layer_types", "compress_rates", "mlp_layer_types", "rope_parameters", "partial_rotary_factor"})
    both[k] = hf[k];
  auto d = parse(both);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  expect_config_eq(*a, *d);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, UpstreamConfig, ::testing::Values("tiny-v4-a", "tiny-v4-b"));

TEST(V4ConfigTest, QuantizationBlockSize) {
  json up = to_upstream(fixture_config("tiny-v4-a"));
  up["quantization_config"]["weight_block_size"] = {16, 32};
  auto c = parse(up);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->fp8_block_rows, 16);
  EXPECT_EQ(c->fp8_block_cols, 32);
  for (json bad : {json{16}, json{0, 16}, json{16, -1}, json{"16", 16}, json(16), json{16, 16, 16}}) {
    up["quantization_config"]["weight_block_size"] = bad;
    auto e = parse(up);
    ASSERT_FALSE(e.is_ok()) << bad.dump();
    EXPECT_HAS(e.status().message(), "weight_block_size");
  }
}

// Each edit makes the two spellings disagree; every one must be an error naming the file.
TEST(V4ConfigTest, BothSpellingsDisagreeing) {
  const json hf = fixture_config("tiny-v4-a");
  json both = to_upstream(hf);
  for (const char* k : {"layer_types", "compress_rates", "mlp_layer_types", "rope_parameters", "partial_rotary_factor"})
    both[k] = hf[k];
  ASSERT_TRUE(parse(both).is_ok());
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"layer kind", [](json& j) { j["compress_ratios"][0] = 4; }, "compress_ratios"},
      {"HCA ratio", [](json& j) { j["compress_ratios"][2] = 8; }, "compress_ratios"},
      {"CSA rate", [](json& j) { j["compress_rates"]["compressed_sparse_attention"] = 8; }, "compress"},
      {"hash layers", [](json& j) { j["num_hash_layers"] = 2; }, "num_hash_layers"},
      {"hash layers 0", [](json& j) { j["num_hash_layers"] = 0; }, "num_hash_layers"},
      {"rope dims", [](json& j) { j["qk_rope_head_dim"] = 16; }, "qk_rope_head_dim"},
      {"main theta", [](json& j) { j["rope_theta"] = 50000.0; }, "rope_theta"},
      {"compress theta", [](json& j) { j["compress_rope_theta"] = 10000.0; }, "compress_rope_theta"},
      {"yarn factor", [](json& j) { j["rope_scaling"]["factor"] = 4.0; }, "rope_scaling"},
      {"yarn original", [](json& j) { j["rope_scaling"]["original_max_position_embeddings"] = 4096; }, "rope_scaling"},
      {"yarn beta", [](json& j) { j["rope_scaling"]["beta_fast"] = 16; }, "rope_scaling"},
  };
  for (const auto& c : cases) {
    json j = both;
    c.edit(j);
    auto r = parse(j);
    ASSERT_FALSE(r.is_ok()) << c.what << ": contradictory spellings accepted";
    EXPECT_HAS(r.status().message(), "dir/config.json");
    EXPECT_HAS(r.status().message(), c.needle);
  }
}

TEST(V4ConfigTest, InvalidConfigs) {
  const json hf = fixture_config("tiny-v4-a");
  struct Case {
    std::function<void(json&)> edit;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["model_type"] = "deepseek_v3"; }, "model_type 'deepseek_v3'"},
      {[](json& j) { j.erase("model_type"); }, "model_type"},
      {[](json& j) { j["model_type"] = 4; }, "model_type"},
      {[](json& j) { j["hidden_size"] = "64"; }, "hidden_size"},
      {[](json& j) { j.erase("vocab_size"); }, "vocab_size"},
      {[](json& j) { j["num_key_value_heads"] = 4; }, "num_key_value_heads"},
      {[](json& j) { j["layer_types"].push_back("sliding_attention"); }, "layer_types"},
      {[](json& j) { j["layer_types"][1] = "full_attention"; }, "full_attention"},
      {[](json& j) { j["mlp_layer_types"][1] = "dense"; }, "dense"},
      {[](json& j) { j["mlp_layer_types"].erase(0); }, "mlp_layer_types"},
      {[](json& j) { j.erase("layer_types"); }, "layer"},
      {[](json& j) { j["rope_parameters"]["compress"]["rope_type"] = "llama3"; }, "llama3"},
      {[](json& j) { j["rope_parameters"]["compress"]["attention_factor"] = 2.0; }, "attention_factor"},
      {[](json& j) { j["rope_parameters"].erase("compress"); }, "compress"},
      {[](json& j) { j["num_experts_per_tok"] = 9; }, "num_experts_per_tok"},
      {[](json& j) { j["num_attention_heads"] = 3; }, "o_groups"},
      {[](json& j) { j["hidden_act"] = "gelu"; }, "gelu"},
      {[](json& j) { j["num_hidden_layers"] = 0; }, "num_hidden_layers"},
      {[](json& j) { j["scoring_func"] = "relu"; }, "relu"},
      {[](json& j) { j["index_head_dim"] = 4; }, "index"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    json j = hf;
    cases[i].edit(j);
    auto r = parse(j);
    ASSERT_FALSE(r.is_ok()) << "case " << i << " accepted: " << cases[i].needle;
    EXPECT_HAS(r.status().message(), "dir/config.json");
    EXPECT_HAS(r.status().message(), cases[i].needle);
  }
  json up = to_upstream(hf);
  up["compress_ratios"] = {0, 4, 16};  // fewer entries than layers
  auto r = parse(up);
  ASSERT_FALSE(r.is_ok());
  EXPECT_HAS(r.status().message(), "compress_ratios");
  up = to_upstream(hf);
  up["compress_ratios"][1] = -4;
  EXPECT_FALSE(parse(up).is_ok());
  up = to_upstream(hf);
  up["num_hash_layers"] = 5;
  EXPECT_FALSE(parse(up).is_ok());
  up = to_upstream(hf);
  up["rope_scaling"]["type"] = "linear";
  EXPECT_FALSE(parse(up).is_ok());
  up = to_upstream(hf);
  up.erase("qk_rope_head_dim");
  EXPECT_FALSE(parse(up).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Tensor names.

TEST(CanonicalNames, BothSpellingsMapToUpstream) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"model.embed_tokens.weight", "embed.weight"},
      {"embed.weight", "embed.weight"},
      {"lm_head.weight", "head.weight"},
      {"model.embed_tokens.scale", "embed.scale"},
      {"lm_head.scale", "head.scale"},
      {"model.lm_head.weight", "head.weight"},
      {"head.weight", "head.weight"},
      {"model.norm.weight", "norm.weight"},
      {"model.hc_head.hc_fn", "hc_head_fn"},
      {"model.hc_head.hc_base", "hc_head_base"},
      {"model.hc_head.hc_scale", "hc_head_scale"},
      {"hc_head_fn", "hc_head_fn"},
      {"model.layers.3.attn.norm.weight", "layers.3.attn.kv_norm.weight"},
      {"layers.3.attn.kv_norm.weight", "layers.3.attn.kv_norm.weight"},
      {"model.layers.1.attn.compressor.norm.weight", "layers.1.attn.compressor.norm.weight"},
      {"model.layers.1.attn.indexer.compressor.norm.weight", "layers.1.attn.indexer.compressor.norm.weight"},
      {"model.layers.0.attn.q_norm.weight", "layers.0.attn.q_norm.weight"},
      {"model.layers.0.attn.wq_a.weight", "layers.0.attn.wq_a.weight"},
      {"model.layers.0.attn.wq_a.scale", "layers.0.attn.wq_a.scale"},
      {"model.layers.0.hc_attn_fn", "layers.0.hc_attn_fn"},
      {"mtp.0.hc_head.hc_fn", "mtp.0.hc_head_fn"},
      {"mtp.0.attn.norm.weight", "mtp.0.attn.kv_norm.weight"},
      {"mtp.0.e_proj.weight", "mtp.0.e_proj.weight"},
  };
  for (const auto& [in, out] : cases) EXPECT_EQ(v4::canonical_tensor_name(in), out) << in;
}

// The fixture's transformers names rewritten by hand to DeepSeek's bare names (V4-MODEL.md 3).
std::string upstream_name(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "embed.weight";
  if (hf == "head.weight" || hf == "lm_head.weight") return "head.weight";
  if (hf == "model.norm.weight") return "norm.weight";
  if (hf.rfind("model.hc_head.hc_", 0) == 0) return "hc_head_" + hf.substr(17);
  std::string s = hf.rfind("model.", 0) == 0 ? hf.substr(6) : hf;
  const std::string kv = ".attn.norm.weight";
  if (s.size() > kv.size() && s.compare(s.size() - kv.size(), kv.size(), kv) == 0)
    s = s.substr(0, s.size() - kv.size()) + ".attn.kv_norm.weight";
  return s;
}

class UpstreamNames : public ::testing::TestWithParam<const char*> {};

TEST_P(UpstreamNames, LoadAndGiveBitwiseTheFixtureLogits) {
  const std::string src = fixture_dir(GetParam());
  ModelFolder f = read_model_dir(src);
  const auto tokens = test_tokens(f.config["vocab_size"].get<int64_t>());
  auto ref = v4_logits(src, tokens);
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  TensorMap bare;
  for (const auto& [name, t] : f.tensors) bare[upstream_name(name)] = t;
  ASSERT_EQ(bare.size(), f.tensors.size());
  for (const char* must : {"embed.weight", "head.weight", "norm.weight", "hc_head_fn", "hc_head_base", "hc_head_scale",
                           "layers.0.attn.wq_a.weight", "layers.0.attn.kv_norm.weight", "layers.1.attn.kv_norm.weight"})
    ASSERT_TRUE(bare.count(must)) << must;
  for (const auto& [name, t] : bare) ASSERT_EQ(name.rfind("model.", 0), std::string::npos) << name;
  // Bare names with both config spellings.
  for (bool upstream_config : {false, true}) {
    TempDir dir("upstream-names");
    write_model_dir(dir.path, upstream_config ? to_upstream(f.config) : f.config, bare);
    auto got = v4_logits(dir.path, tokens);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_TRUE(bitwise_equal(*ref, *got)) << "max diff " << max_abs_diff(*ref, *got);
  }
  // Transformers names with the upstream config.
  TempDir dir("upstream-config");
  write_model_dir(dir.path, to_upstream(f.config), f.tensors);
  auto got = v4_logits(dir.path, tokens);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_TRUE(bitwise_equal(*ref, *got));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, UpstreamNames, ::testing::Values("tiny-v4-a", "tiny-v4-b"));

// ---------------------------------------------------------------------------------------------
// Model-level inconsistencies on tiny-v4-a.

class WeightsErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { fixture_ = new ModelFolder(read_model_dir(fixture_dir("tiny-v4-a"))); }
  static void TearDownTestSuite() { delete fixture_; }
  void SetUp() override { f_ = *fixture_; }

  // Writes f_ and loads it; returns the error message ("" when it loaded).
  std::string load_message() {
    f_.write(dir_.path);
    Status s = v4_load_status(dir_.path);
    return s.is_ok() ? std::string() : std::string(s.message());
  }
  std::string file() const { return dir_ / "model.safetensors"; }
  void expect_error(std::initializer_list<std::string> needles) {
    const std::string m = load_message();
    ASSERT_FALSE(m.empty()) << "loaded a checkpoint that should fail";
    EXPECT_HAS(m, dir_.path);
    for (const auto& n : needles) EXPECT_HAS(m, n);
  }

  static ModelFolder* fixture_;
  ModelFolder f_;
  TempDir dir_{"weights"};
};
ModelFolder* WeightsErrors::fixture_ = nullptr;

TEST_F(WeightsErrors, FixtureLoads) { EXPECT_EQ(load_message(), ""); }

TEST_F(WeightsErrors, MissingTensor) {
  for (const char* name : {"model.layers.1.attn.wq_b.weight", "model.layers.2.attn.compressor.ape",
                           "model.layers.3.attn.indexer.weights_proj.weight", "model.layers.0.ffn.experts.7.w2.weight",
                           "model.hc_head.hc_scale", "model.embed_tokens.weight", "head.weight"}) {
    SCOPED_TRACE(name);
    f_ = *fixture_;
    f_.tensors.erase(name);
    expect_error({"missing tensor", "'" + v4::canonical_tensor_name(name) + "'"});
  }
}

TEST_F(WeightsErrors, ExtraTensor) {
  f_.tensors["model.layers.0.attn.bogus.weight"] = f32_tensor({2}, {1, 2});
  expect_error({file(), "'model.layers.0.attn.bogus.weight'", "unexpected"});
  f_ = *fixture_;
  f_.tensors["model.layers.4.attn_norm.weight"] = f_.tensors["model.layers.3.attn_norm.weight"];  // no layer 4
  expect_error({file(), "'model.layers.4.attn_norm.weight'", "unexpected"});
  f_ = *fixture_;
  f_.tensors["model.layers.0.ffn.experts.8.w1.weight"] = f_.tensors["model.layers.0.ffn.experts.7.w1.weight"];
  expect_error({file(), "'model.layers.0.ffn.experts.8.w1.weight'", "unexpected"});
}

TEST_F(WeightsErrors, WrongShape) {
  f_.tensors["model.layers.0.attn.wq_a.weight"].shape = {64, 32};  // same bytes, transposed
  expect_error({file(), "'model.layers.0.attn.wq_a.weight'", "shape [64, 32]", "expected [32, 64]"});
  f_ = *fixture_;
  f_.tensors["model.layers.1.attn.attn_sink"].shape = {2, 2};
  expect_error({file(), "'model.layers.1.attn.attn_sink'", "shape [2, 2]", "expected [4]"});
  f_ = *fixture_;
  f_.tensors["model.layers.0.ffn.gate.tid2eid"].shape = {2, 1024};
  expect_error({file(), "'model.layers.0.ffn.gate.tid2eid'", "expected [1024, 2]"});
  f_ = *fixture_;
  f_.tensors["model.layers.0.hc_attn_fn"].shape = {48, 128};
  expect_error({file(), "'model.layers.0.hc_attn_fn'", "expected [24, 256]"});
}

TEST_F(WeightsErrors, WrongDtype) {
  f_.tensors["model.layers.1.attn.attn_sink"].dtype = "I32";
  expect_error({file(), "'model.layers.1.attn.attn_sink'", "dtype I32"});
  f_ = *fixture_;
  f_.tensors["model.layers.0.attn.wq_a.weight"].dtype = "I32";
  expect_error({file(), "'model.layers.0.attn.wq_a.weight'", "I32"});
  f_ = *fixture_;
  auto& t = f_.tensors["model.layers.0.ffn.gate.tid2eid"];
  t.dtype = "F32";
  t.shape = {1024, 4};  // same bytes as I64 [1024, 2]
  expect_error({file(), "'model.layers.0.ffn.gate.tid2eid'", "dtype F32"});
  f_ = *fixture_;
  auto& w = f_.tensors["model.layers.0.attn.wkv.weight"];  // F32 [32, 64] -> F8_E4M3 without scale
  w.dtype = "F8_E4M3";
  w.shape = {32, 256};
  expect_error({file(), "'model.layers.0.attn.wkv.weight'"});
  f_ = *fixture_;
  f_.tensors["model.layers.0.attn.wkv.scale"] = f32_tensor({1, 1}, {1.f});  // scale for an F32 weight
  expect_error({file(), "'model.layers.0.attn.wkv.scale'", "unexpected scale"});
}

TEST_F(WeightsErrors, Tid2eidOutOfRange) {
  for (int64_t bad : {int64_t{8}, int64_t{-1}, int64_t{1} << 40}) {
    SCOPED_TRACE(bad);
    f_ = *fixture_;
    auto& t = f_.tensors["model.layers.0.ffn.gate.tid2eid"];
    auto v = as_i64(t);
    v[2 * 517 + 1] = bad;
    t = i64_tensor(t.shape, v);
    expect_error({file(), "'model.layers.0.ffn.gate.tid2eid'", "entry 1035", std::to_string(bad), "[0, 8)"});
  }
  f_ = *fixture_;  // I32 tables are accepted and checked too
  auto& t = f_.tensors["model.layers.0.ffn.gate.tid2eid"];
  const auto v = as_i64(t);
  std::vector<int32_t> v32(v.begin(), v.end());
  t = raw_tensor("I32", t.shape, v32.data(), v32.size() * 4);
  EXPECT_EQ(load_message(), "");
  v32[3] = 9;
  t = raw_tensor("I32", t.shape, v32.data(), v32.size() * 4);
  expect_error({file(), "'model.layers.0.ffn.gate.tid2eid'", "9"});
}

TEST_F(WeightsErrors, UnknownModelType) {
  f_.config["model_type"] = "deepseek_v3";
  expect_error({"config.json", "model_type 'deepseek_v3'"});
}

TEST_F(WeightsErrors, ConfigSwitchesSlidingToCsa) {
  f_.config["layer_types"][0] = "compressed_sparse_attention";
  expect_error({"missing tensor 'layers.0.attn.compressor", "layer 0 is compressed_sparse_attention"});
}

TEST_F(WeightsErrors, ConfigSwitchesCsaToSliding) {
  f_.config["layer_types"][1] = "sliding_attention";
  expect_error({file(), "'model.layers.1.attn.", "unexpected"});
}

TEST_F(WeightsErrors, ConfigSwitchesHcaToCsa) {
  f_.config["layer_types"][2] = "compressed_sparse_attention";
  expect_error({"layers.2.attn.", "expected"});
}

TEST_F(WeightsErrors, ConfigSwitchesCsaToHca) {
  f_.config["layer_types"][3] = "heavily_compressed_attention";
  expect_error({"layers.3.attn."});
}

TEST_F(WeightsErrors, ConfigChangesCompressionRatio) {
  f_.config["compress_rates"]["heavily_compressed_attention"] = 8;  // ape is [16, 32]
  expect_error({"'model.layers.2.attn.compressor.ape'", "expected [8, 32]"});
}

TEST_F(WeightsErrors, ConfigSwitchesHashMoeToMoe) {
  f_.config["mlp_layer_types"][0] = "moe";
  expect_error({"missing tensor 'layers.0.ffn.gate.bias'", "layer 0 is sliding_attention, moe"});
}

TEST_F(WeightsErrors, ConfigSwitchesMoeToHashMoe) {
  f_.config["mlp_layer_types"][1] = "hash_moe";
  expect_error({"missing tensor 'layers.1.ffn.gate.tid2eid'", "hash_moe"});
}

TEST_F(WeightsErrors, ConfigHasFewerLayersOrExperts) {
  f_.config["num_hidden_layers"] = 3;
  for (const char* k : {"layer_types", "mlp_layer_types"}) f_.config[k].erase(3);
  expect_error({file(), "'model.layers.3.", "unexpected"});
  f_ = *fixture_;
  f_.config["n_routed_experts"] = 7;
  expect_error({"'model.layers.0.ffn.gate.weight'", "expected [7, 64]"});
  f_ = *fixture_;
  f_.config["hidden_size"] = 32;
  expect_error({"expected"});
}

TEST_F(WeightsErrors, DuplicateUnderBothSpellings) {
  f_.tensors["embed.weight"] = f_.tensors["model.embed_tokens.weight"];
  expect_error({file(), "'embed.weight'", "'model.embed_tokens.weight'", "duplicate"});
  f_ = *fixture_;
  f_.tensors["layers.2.attn.kv_norm.weight"] = f_.tensors["model.layers.2.attn.norm.weight"];
  expect_error({"'layers.2.attn.kv_norm.weight'", "'model.layers.2.attn.norm.weight'", "duplicate"});
  f_ = *fixture_;
  f_.tensors["hc_head_fn"] = f_.tensors["model.hc_head.hc_fn"];
  expect_error({"'hc_head_fn'", "'model.hc_head.hc_fn'", "duplicate"});
  f_ = *fixture_;
  f_.tensors["lm_head.weight"] = f_.tensors["head.weight"];
  expect_error({"'lm_head.weight'", "'head.weight'", "duplicate"});
}

TEST_F(WeightsErrors, DuplicateAcrossShards) {
  auto shards = split_round_robin(f_.tensors, 2);
  const int holder = shards[0].count("model.layers.0.attn.wq_a.weight") ? 0 : 1;
  shards[1 - holder]["layers.0.attn.wq_a.weight"] = f_.tensors["model.layers.0.attn.wq_a.weight"];
  write_sharded_model_dir(dir_.path, f_.config, shards);
  Status s = v4_load_status(dir_.path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_HAS(s.message(), "'layers.0.attn.wq_a.weight'");
  EXPECT_HAS(s.message(), "'model.layers.0.attn.wq_a.weight'");
  EXPECT_HAS(s.message(), shard_file_name(0, 2));
  EXPECT_HAS(s.message(), shard_file_name(1, 2));
}

TEST_F(WeightsErrors, IncompleteMtpHead) {
  f_.tensors["mtp.0.e_proj.weight"] = f32_tensor({64, 64}, std::vector<float>(64 * 64, 0.f));
  expect_error({"missing tensor 'mtp.0.", "mtp.0"});
}

TEST_F(WeightsErrors, TiedEmbeddings) {
  f_.config["tie_word_embeddings"] = true;
  f_.tensors.erase("head.weight");
  EXPECT_EQ(load_message(), "");
  f_.config["tie_word_embeddings"] = false;
  expect_error({"missing tensor 'head.weight'"});
}

TEST_F(WeightsErrors, TruncatedCheckpoint) {
  f_.write(dir_.path);
  const std::string bytes = read_file(file());
  write_file(file(), bytes.substr(0, bytes.size() - 100));
  Status s = v4_load_status(dir_.path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_HAS(s.message(), file());
  EXPECT_HAS(s.message(), "truncated");
}

}  // namespace
}  // namespace deepinfer
