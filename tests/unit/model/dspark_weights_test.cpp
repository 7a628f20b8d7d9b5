// V4.1 DSpark stage weights (mtp.0 .. mtp.{n-1}): a copy of tests/data/tiny-v41-a with random
// DSpark tensors for its config loads, binds every stage with the shapes derived here by hand from
// the config (V4-MODEL.md 2.11 / 3.4, V4.1 names of [O]), leaves the logits bitwise unchanged (the
// forward does not use DSpark), and a missing / mis-shaped / extra DSpark tensor is an error naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "model/deepseek_v41/model.h"
#include "tests/util/checkpoint_writer.h"

namespace deepinfer {
namespace {

using namespace deepinfer::testing;
using json = nlohmann::json;

#define EXPECT_HAS(msg, needle) \
  EXPECT_NE(std::string(msg).find(needle), std::string::npos) << "'" << (needle) << "' not in: " << (msg)

// tiny-v41-a: d 32, 4 heads of 32, q_lora 16, o_groups 2 x o_lora 16, moe_inter 16, hc 4, vocab 1024.
constexpr int64_t kD = 32, kH = 4, kHD = 32, kQ = 16, kOG = 2, kOL = 16, kI = 16, kHc = 4, kV = 1024;
constexpr int64_t kStages = 3, kExperts = 4, kTopK = 2, kRank = 8;
const std::vector<int64_t> kTargets = {7, 8, 9};

std::mt19937& rng() {
  static std::mt19937 g(1234);
  return g;
}

RawTensor rnd_f32(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng());
  return f32_tensor(std::move(shape), v);
}

RawTensor rnd_bf16(std::vector<int64_t> shape) {
  RawTensor f = rnd_f32(shape);
  std::vector<uint16_t> h(f.bytes.size() / 4);
  for (size_t i = 0; i < h.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, f.bytes.data() + 4 * i, 4);
    h[i] = static_cast<uint16_t>(bits >> 16);
  }
  return raw_tensor("BF16", std::move(shape), h.data(), h.size() * 2);
}

// FP8 e4m3 codes (no NaN: exponent field kept below 15) with one E8M0 scale per 128 x 128 block
// (the fixture has no quantization_config, so the default blocks).
void add_fp8(TensorMap& m, const std::string& prefix, int64_t rows, int64_t cols) {
  std::vector<uint8_t> q(static_cast<size_t>(rows * cols));
  std::uniform_int_distribution<int> u(0, 255);
  for (uint8_t& b : q) b = static_cast<uint8_t>(u(rng()) & 0xB7);  // sign, exponent <= 6, mantissa
  m[prefix + ".weight"] = raw_tensor("F8_E4M3", {rows, cols}, q.data(), q.size());
  const int64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
  std::vector<uint8_t> s(static_cast<size_t>(sr * sc), 127);  // 2^0
  m[prefix + ".scale"] = raw_tensor("F8_E8M0", {sr, sc}, s.data(), s.size());
}

TensorMap dspark_tensors() {
  TensorMap m;
  const int64_t mix = (2 + kHc) * kHc;
  for (int64_t s = 0; s < kStages; ++s) {
    const std::string p = "mtp." + std::to_string(s) + ".";
    m[p + "attn_norm.weight"] = rnd_bf16({kD});
    m[p + "ffn_norm.weight"] = rnd_bf16({kD});
    for (const char* site : {"hc_attn", "hc_ffn"}) {
      m[p + site + "_fn"] = rnd_f32({mix, kHc * kD});
      m[p + site + "_base"] = rnd_f32({mix});
      m[p + site + "_scale"] = rnd_f32({3});
    }
    m[p + "attn.attn_sink"] = rnd_f32({kH});
    m[p + "attn.wq_a.weight"] = rnd_f32({kQ, kD});
    m[p + "attn.q_norm.weight"] = rnd_f32({kQ});
    m[p + "attn.wq_b.weight"] = rnd_f32({kH * kHD, kQ});
    m[p + "attn.wkv.weight"] = rnd_f32({kHD, kD});
    m[p + "attn.kv_norm.weight"] = rnd_f32({kHD});
    m[p + "attn.wo_a.weight"] = rnd_bf16({kOG * kOL, kH * kHD / kOG});
    m[p + "attn.wo_b.weight"] = rnd_f32({kD, kOG * kOL});
    m[p + "ffn.gate.weight"] = rnd_bf16({kExperts, kD});
    m[p + "ffn.gate.bias"] = rnd_f32({kExperts});
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string ep = p + "ffn.experts." + std::to_string(e) + ".";
      m[ep + "w1.weight"] = rnd_f32({kI, kD});
      m[ep + "w2.weight"] = rnd_f32({kD, kI});
      m[ep + "w3.weight"] = rnd_f32({kI, kD});
    }
    m[p + "ffn.shared_experts.w1.weight"] = rnd_f32({kI, kD});
    m[p + "ffn.shared_experts.w2.weight"] = rnd_f32({kD, kI});
    m[p + "ffn.shared_experts.w3.weight"] = rnd_f32({kI, kD});
  }
  add_fp8(m, "mtp.0.main_proj", kD, static_cast<int64_t>(kTargets.size()) * kD);
  m["mtp.0.main_norm.weight"] = rnd_bf16({kD});
  m["mtp.2.norm.weight"] = rnd_bf16({kD});
  m["mtp.2.markov_head.embed.weight"] = rnd_bf16({kV, kRank});
  m["mtp.2.markov_head.head.weight"] = rnd_bf16({kV, kRank});
  m["mtp.2.confidence_head.proj.weight"] = rnd_bf16({1, kD + kRank});
  return m;
}

json with_dspark_config(json c) {
  auto& t = c["text_config"];
  t["num_nextn_predict_layers"] = kStages;
  t["dspark_block_size"] = 3;
  t["dspark_noise_token_id"] = 1000;
  t["dspark_target_layer_ids"] = kTargets;
  t["dspark_markov_rank"] = kRank;
  t["dspark_n_routed_experts"] = kExperts;
  t["dspark_num_experts_per_tok"] = kTopK;
  for (int64_t s = 0; s < kStages; ++s) t["compress_ratios"].push_back(0);
  return c;
}

class DSparkWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = fixture_dir("tiny-v41-a");
    base_ = read_model_dir(fixture_);
    base_.config = with_dspark_config(base_.config);
    extra_ = dspark_tensors();
    for (const auto& [k, v] : extra_) base_.tensors[k] = v;
    auto be = Backend::create({});
    ASSERT_TRUE(be.is_ok());
    backend_ = std::move(be).value();
  }
  // Writes `f` as a full model folder (the fixture's other files: token map, tokenizer).
  std::string write(const ModelFolder& f) {
    dirs_.push_back(std::make_unique<TempDir>("dspark"));
    const std::string dir = dirs_.back()->path;
    for (const auto& e : std::filesystem::directory_iterator(fixture_))
      if (e.path().filename() != "model.safetensors" && e.path().filename() != "config.json")
        std::filesystem::copy_file(e.path(), dir + "/" + e.path().filename().string());
    f.write(dir);
    return dir;
  }
  Result<std::unique_ptr<v41::V41Model>> load(const ModelFolder& f) { return v41::V41Model::load(write(f), *backend_); }
  std::string load_error(const ModelFolder& f) {
    auto m = load(f);
    EXPECT_FALSE(m.is_ok());
    return m.is_ok() ? std::string() : m.status().to_string();
  }
  std::vector<float> logits(v41::V41Model& m) {
    const std::vector<int32_t> tokens = {0, 17, 300, 5, 999, 42, 42, 7, 511, 1000, 3, 64};
    v41::V41SequenceState st = m.new_sequence();
    v41::SeqInput in{&st, std::span<const int32_t>(tokens), true};
    v4::ForwardOutput out;
    Status s = m.forward(std::span<const v41::SeqInput>(&in, 1), out);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return out.logits;
  }

  std::string fixture_;
  ModelFolder base_;
  TensorMap extra_;
  std::unique_ptr<Backend> backend_;
  std::vector<std::unique_ptr<TempDir>> dirs_;
};

TEST_F(DSparkWeights, ConfigFieldsParsed) {
  auto c = v41::V41Config::from_json(base_.config, "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->num_mtp_layers, kStages);
  EXPECT_EQ(c->dspark_block_size, 3);
  EXPECT_EQ(c->dspark_noise_token_id, 1000);
  EXPECT_EQ(c->dspark_target_layers, kTargets);
  EXPECT_EQ(c->dspark_markov_rank, kRank);
  EXPECT_EQ(c->dspark_experts(), kExperts);
  EXPECT_EQ(c->dspark_topk(), kTopK);
  EXPECT_EQ(static_cast<int64_t>(c->ratios.size()), c->num_layers);
  // [O]'s spelling of the top-k; both spellings must agree.
  json alt = base_.config;
  alt["text_config"].erase("dspark_num_experts_per_tok");
  alt["text_config"]["dspark_n_activated_experts"] = 3;
  auto ca = v41::V41Config::from_json(alt, "config.json");
  ASSERT_TRUE(ca.is_ok()) << ca.status().to_string();
  EXPECT_EQ(ca->dspark_topk(), 3);
  alt["text_config"]["dspark_num_experts_per_tok"] = 2;
  auto cb = v41::V41Config::from_json(alt, "config.json");
  ASSERT_FALSE(cb.is_ok());
  EXPECT_HAS(cb.status().to_string(), "dspark_n_activated_experts");
  // Defaults: the backbone's experts.
  json none = read_model_dir(fixture_).config;
  auto cn = v41::V41Config::from_json(none, "config.json");
  ASSERT_TRUE(cn.is_ok());
  EXPECT_EQ(cn->dspark_experts(), cn->n_routed_experts);
  EXPECT_EQ(cn->dspark_topk(), cn->experts_per_tok);
  // Bad values.
  json bad = base_.config;
  bad["text_config"]["compress_ratios"].back() = 2;
  auto c1 = v41::V41Config::from_json(bad, "config.json");
  ASSERT_FALSE(c1.is_ok());
  EXPECT_HAS(c1.status().to_string(), "DSpark stage 2");
  bad = base_.config;
  bad["text_config"]["dspark_target_layer_ids"] = {7, 10};
  auto c2 = v41::V41Config::from_json(bad, "config.json");
  ASSERT_FALSE(c2.is_ok());
  EXPECT_HAS(c2.status().to_string(), "dspark_target_layer_ids");
  bad = base_.config;
  bad["text_config"]["dspark_num_experts_per_tok"] = 5;
  auto c3 = v41::V41Config::from_json(bad, "config.json");
  ASSERT_FALSE(c3.is_ok());
  EXPECT_HAS(c3.status().to_string(), "dspark_num_experts_per_tok");
  // A layer count out of range is an error naming it, before it sizes anything (loader_fuzz found a
  // negative one throwing from the ratios' resize).
  for (const int64_t layers : {int64_t{-10}, int64_t{0}, int64_t{1} << 40}) {
    bad = base_.config;
    bad["text_config"]["num_hidden_layers"] = layers;
    auto c4 = v41::V41Config::from_json(bad, "config.json");
    ASSERT_FALSE(c4.is_ok()) << layers;
    EXPECT_HAS(c4.status().to_string(), "num_hidden_layers");
  }
}

TEST_F(DSparkWeights, StagesBoundWithConfigShapes) {
  auto m = load(base_);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const v41::V41Weights& w = (*m)->weights();
  ASSERT_EQ(static_cast<int64_t>(w.dspark.size()), kStages);
  EXPECT_EQ(w.dspark_tensors, static_cast<int64_t>(extra_.size()));
  for (int64_t s = 0; s < kStages; ++s) {
    const v41::DSparkStage& st = w.dspark[s];
    SCOPED_TRACE("stage " + std::to_string(s));
    EXPECT_EQ(st.block.ratio, 0);
    EXPECT_FALSE(st.block.attn.compressor.has_value());
    EXPECT_FALSE(st.block.attn.indexer.has_value());
    EXPECT_FALSE(st.block.engram.has_value());
    EXPECT_EQ(st.block.attn_norm.size(), static_cast<size_t>(kD));
    EXPECT_EQ(st.block.hc_attn.fn.rows, (2 + kHc) * kHc);
    EXPECT_EQ(st.block.hc_attn.fn.cols, kHc * kD);
    EXPECT_EQ(st.block.attn.wq_b.rows, kH * kHD);
    EXPECT_EQ(st.block.attn.wo_a.rows, kOG * kOL);
    EXPECT_EQ(st.block.attn.wo_a.format, WeightFormat::kBF16);
    EXPECT_EQ(st.block.attn.sinks.size(), static_cast<size_t>(kH));
    EXPECT_EQ(st.block.ffn.gate.rows, kExperts);
    EXPECT_EQ(st.block.ffn.bias.size(), static_cast<size_t>(kExperts));
    ASSERT_EQ(st.block.ffn.w1.size(), static_cast<size_t>(kExperts));
    EXPECT_EQ(st.block.ffn.w2[kExperts - 1].rows, kD);
    EXPECT_EQ(st.block.ffn.w2[kExperts - 1].cols, kI);
    EXPECT_EQ(st.block.ffn.shared_w1.rows, kI);
    EXPECT_EQ(st.main_proj.has_value(), s == 0);
    EXPECT_EQ(st.main_norm.size(), s == 0 ? static_cast<size_t>(kD) : 0u);
    const bool last = s == kStages - 1;
    EXPECT_EQ(st.norm.size(), last ? static_cast<size_t>(kD) : 0u);
    EXPECT_EQ(st.markov_embed.has_value(), last);
    EXPECT_EQ(st.markov_head.has_value(), last);
    EXPECT_EQ(st.confidence.has_value(), last);
  }
  const v41::DSparkStage& first = w.dspark.front();
  EXPECT_EQ(first.main_proj->rows, kD);
  EXPECT_EQ(first.main_proj->cols, 3 * kD);
  EXPECT_EQ(first.main_proj->format, WeightFormat::kFp8Block);  // kept as stored
  const v41::DSparkStage& last = w.dspark.back();
  EXPECT_EQ(last.markov_embed->rows, kV);
  EXPECT_EQ(last.markov_embed->cols, kRank);
  EXPECT_EQ(last.markov_embed->format, WeightFormat::kBF16);
  EXPECT_EQ(last.markov_head->rows, kV);
  EXPECT_EQ(last.markov_head->cols, kRank);
  EXPECT_EQ(last.confidence->rows, 1);
  EXPECT_EQ(last.confidence->cols, kD + kRank);
}

TEST_F(DSparkWeights, LogitsUnchangedFromTheFixture) {
  auto with = load(base_);
  ASSERT_TRUE(with.is_ok()) << with.status().to_string();
  auto plain = v41::V41Model::load(fixture_, *backend_);
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  EXPECT_TRUE((*plain)->weights().dspark.empty());
  EXPECT_EQ((*plain)->weights().dspark_tensors, 0);
  const std::vector<float> a = logits(**with), b = logits(**plain);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST_F(DSparkWeights, MissingTensorIsAnErrorNamingIt) {
  for (const char* name : {"mtp.1.ffn.experts.3.w2.weight", "mtp.0.main_proj.weight", "mtp.2.confidence_head.proj.weight", "mtp.2.markov_head.head.weight",
                           "mtp.0.hc_ffn_scale", "mtp.1.ffn.gate.bias"}) {
    SCOPED_TRACE(name);
    ModelFolder f = base_;
    ASSERT_EQ(f.tensors.erase(name), 1u);
    EXPECT_HAS(load_error(f), name);
  }
  ModelFolder f = base_;  // an FP8 weight without its scale
  f.tensors.erase("mtp.0.main_proj.scale");
  const std::string e = load_error(f);
  EXPECT_HAS(e, "mtp.0.main_proj.weight");
  EXPECT_HAS(e, ".scale");
}

TEST_F(DSparkWeights, MisShapedTensorIsAnErrorNamingIt) {
  struct Case { const char* name; RawTensor t; };
  std::vector<Case> cases = {
      {"mtp.0.main_proj.weight", rnd_f32({kD, 2 * kD})},          // two targets' worth, config has three
      {"mtp.2.markov_head.embed.weight", rnd_bf16({kV, kRank / 2})},
      {"mtp.2.confidence_head.proj.weight", rnd_bf16({1, kD})},
      {"mtp.1.ffn.gate.weight", rnd_bf16({8, kD})},               // the backbone's 8 experts, not 4
      {"mtp.2.attn.attn_sink", rnd_f32({kH + 1})},
      {"mtp.0.ffn.gate.bias", i64_tensor({kExperts}, {0, 1, 2, 3})},  // wrong dtype
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    ModelFolder f = base_;
    ASSERT_EQ(f.tensors.count(c.name), 1u);
    f.tensors[c.name] = c.t;
    if (std::string(c.name) == "mtp.0.main_proj.weight") f.tensors.erase("mtp.0.main_proj.scale");
    EXPECT_HAS(load_error(f), c.name);
  }
}

TEST_F(DSparkWeights, ExtraTensorIsAnErrorNamingIt) {
  for (const char* name : {"mtp.1.main_proj.weight", "mtp.3.attn_norm.weight", "mtp.2.hc_head_fn",
                           "mtp.1.norm.weight", "mtp.0.ffn.experts.4.w1.weight", "mtp.0.attn.compressor.wkv.weight",
                           "mtp.2.embed.weight"}) {
    SCOPED_TRACE(name);
    ModelFolder f = base_;
    f.tensors[name] = rnd_f32({kD});
    const std::string e = load_error(f);
    EXPECT_HAS(e, name);
    EXPECT_HAS(e, "unexpected tensor");
  }
}

TEST_F(DSparkWeights, MtpTensorsNeedTheDSparkConfig) {
  ModelFolder f = base_;
  f.config = read_model_dir(fixture_).config;  // num_nextn_predict_layers 0, no dspark_* fields
  EXPECT_HAS(load_error(f), "num_nextn_predict_layers");
  f.config = base_.config;
  f.config["text_config"].erase("dspark_target_layer_ids");
  EXPECT_HAS(load_error(f), "dspark_target_layer_ids");
  // Fewer stages in the config than in the checkpoint: the surplus stage is left over.
  f.config = base_.config;
  f.config["text_config"]["num_nextn_predict_layers"] = 2;
  f.config["text_config"]["compress_ratios"].erase(f.config["text_config"]["compress_ratios"].size() - 1);
  const std::string e = load_error(f);
  EXPECT_TRUE(e.find("mtp.2.") != std::string::npos || e.find("mtp.1.") != std::string::npos) << e;
}

TEST_F(DSparkWeights, MarkovHeadAlsoUnderThe0731Names) {
  ModelFolder f = base_;
  f.tensors["mtp.2.markov_head.markov_w1.weight"] = f.tensors["mtp.2.markov_head.embed.weight"];
  f.tensors["mtp.2.markov_head.markov_w2.weight"] = f.tensors["mtp.2.markov_head.head.weight"];
  EXPECT_HAS(load_error(f), "two spellings");  // both spellings of one tensor
  f.tensors.erase("mtp.2.markov_head.embed.weight");
  f.tensors.erase("mtp.2.markov_head.head.weight");
  auto m = load(f);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ((*m)->weights().dspark.back().markov_embed->rows, kV);
  EXPECT_EQ((*m)->weights().dspark.back().markov_head->cols, kRank);
}

}  // namespace
}  // namespace deepinfer
