// The preview checkpoint's MTP head (V4-MODEL.md 2.10): a checkpoint with mtp.0.* tensors loads,
// and its next-next-token logits equal an independent computation written out here with plain
// loops (input projections, final collapse, norm, head), reusing only the block the fixtures
// already verify.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/deepseek_v4/model.h"
#include "tests/util/checkpoint_writer.h"

namespace deepinfer {
namespace {

using testing::TensorMap;

std::vector<float> random_vec(std::mt19937& rng, size_t n, float mean, float stddev) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

class MtpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string src = std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b";
    tensors_ = testing::read_safetensors(src + "/model.safetensors");
    config_ = testing::read_json_file(src + "/config.json");
    d_ = config_["hidden_size"].get<int64_t>();
    n_ = config_["hc_mult"].get<int64_t>();
    std::mt19937 rng(7);
    // The MTP block: a sliding-window, learned-routing block (layer 4's shapes, fresh values).
    const std::string from = "model.layers.4.";
    for (const auto& [name, t] : TensorMap(tensors_)) {
      if (name.rfind(from, 0) != 0) continue;
      auto v = testing::as_f32(t);
      for (auto& x : v) x *= 1.0f + 0.1f * std::normal_distribution<float>(0, 1)(rng);
      tensors_["mtp.0." + name.substr(from.size())] = testing::f32_tensor(t.shape, v);
    }
    const float s = 1.0f / std::sqrt(static_cast<float>(d_));
    tensors_["mtp.0.e_proj.weight"] = testing::f32_tensor({d_, d_}, random_vec(rng, d_ * d_, 0, s));
    tensors_["mtp.0.h_proj.weight"] = testing::f32_tensor({d_, d_}, random_vec(rng, d_ * d_, 0, s));
    for (const char* nm : {"enorm", "hnorm", "norm"})
      tensors_[std::string("mtp.0.") + nm + ".weight"] = testing::f32_tensor({d_}, random_vec(rng, d_, 1, 0.1f));
    tensors_["mtp.0.hc_head_fn"] = testing::f32_tensor({n_, n_ * d_}, random_vec(rng, n_ * n_ * d_, 0, 0.02f));
    tensors_["mtp.0.hc_head_base"] = testing::f32_tensor({n_}, random_vec(rng, n_, 0, 0.5f));
    tensors_["mtp.0.hc_head_scale"] = testing::f32_tensor({1}, {1.3f});
    dir_ = testing::temp_dir("mtp");
    testing::write_model_dir(dir_, config_, tensors_);
    auto be = Backend::create({});
    ASSERT_TRUE(be.is_ok());
    backend_ = std::move(be).value();
    auto m = v4::V4Model::load(dir_, *backend_);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<float> f(const std::string& name) { return testing::as_f32(tensors_.at(name)); }

  // y = W x for W [rows, cols] row-major, in double.
  static std::vector<float> matvec(const std::vector<float>& W, const float* x, int64_t rows, int64_t cols) {
    std::vector<float> y(rows);
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (int64_t c = 0; c < cols; ++c) acc += static_cast<double>(W[r * cols + c]) * x[c];
      y[r] = static_cast<float>(acc);
    }
    return y;
  }
  std::vector<float> rms(const float* x, int64_t n, const std::vector<float>* w) {
    double ms = 0;
    for (int64_t i = 0; i < n; ++i) ms += static_cast<double>(x[i]) * x[i];
    const double r = 1.0 / std::sqrt(ms / n + 1e-6);
    std::vector<float> y(n);
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i] * r) * (w ? (*w)[i] : 1.0f);
    return y;
  }

  TensorMap tensors_;
  nlohmann::json config_;
  int64_t d_ = 0, n_ = 0;
  std::string dir_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<v4::V4Model> model_;
};

TEST_F(MtpTest, NextNextTokenLogitsFollowTheMath) {
  ASSERT_TRUE(model_->has_mtp());
  const std::vector<int32_t> tokens{5, 900, 17, 3, 3, 250, 1000, 42, 7, 64, 128, 511, 2, 77, 300, 8, 19, 23, 600, 1};
  const int64_t T = static_cast<int64_t>(tokens.size()), V = model_->config().vocab_size;
  v4::SequenceState st = model_->new_sequence();
  v4::SeqInput in{&st, tokens, true};
  v4::ForwardOutput out;
  ASSERT_TRUE(model_->forward(std::span<const v4::SeqInput>(&in, 1), out, /*keep_final_streams=*/true).is_ok());
  ASSERT_EQ(static_cast<int64_t>(out.final_streams.size()), T * n_ * d_);

  // Engine: all positions in one chunk.
  std::vector<float> mtp;
  const std::vector<int32_t> next(tokens.begin() + 1, tokens.end());
  ASSERT_TRUE(model_->mtp_forward(st, std::span<const float>(out.final_streams.data(), (T - 1) * n_ * d_), next, mtp)
                  .is_ok());

  // Independent: token by token, projections / collapse / head written out with loops.
  const auto embed = f("model.embed_tokens.weight"), head = f("head.weight");
  const auto E = f("mtp.0.e_proj.weight"), Hm = f("mtp.0.h_proj.weight");
  const auto enorm = f("mtp.0.enorm.weight"), hnorm = f("mtp.0.hnorm.weight"), norm = f("mtp.0.norm.weight");
  const auto hfn = f("mtp.0.hc_head_fn"), hbase = f("mtp.0.hc_head_base"), hscale = f("mtp.0.hc_head_scale");
  v4::LayerState ls = v4::make_layer_state(model_->config(), v4::AttnKind::kSliding, 0);
  v4::LayerState* lsp = &ls;
  float worst = 0;
  for (int64_t t = 0; t + 1 < T; ++t) {
    const std::vector<float> e = rms(embed.data() + next[t] * d_, d_, &enorm);
    const std::vector<float> pe = matvec(E, e.data(), d_, d_);
    std::vector<float> X(n_ * d_);
    for (int64_t j = 0; j < n_; ++j) {
      const std::vector<float> h = rms(out.final_streams.data() + (t * n_ + j) * d_, d_, &hnorm);
      const std::vector<float> ph = matvec(Hm, h.data(), d_, d_);
      for (int64_t k = 0; k < d_; ++k) X[j * d_ + k] = pe[k] + ph[k];
    }
    v4::BatchLayout layout;
    layout.seqs.push_back({0, 1, t});
    layout.pos.push_back(t);
    model_->block_forward(model_->weights().mtp->block, layout, std::span<v4::LayerState* const>(&lsp, 1),
                          &next[t], X);
    const std::vector<float> xn = rms(X.data(), n_ * d_, nullptr);
    const std::vector<float> mix = matvec(hfn, xn.data(), n_, n_ * d_);
    std::vector<float> hsum(d_, 0.f);
    for (int64_t j = 0; j < n_; ++j) {
      const float w = 1.f / (1.f + std::exp(-(mix[j] * hscale[0] + hbase[j]))) + 1e-6f;
      for (int64_t k = 0; k < d_; ++k) hsum[k] += w * X[j * d_ + k];
    }
    const std::vector<float> hn = rms(hsum.data(), d_, &norm);
    const std::vector<float> logits = matvec(head, hn.data(), V, d_);
    for (int64_t v = 0; v < V; ++v) worst = std::max(worst, std::fabs(logits[v] - mtp[t * V + v]));
  }
  EXPECT_LE(worst, 1e-4);
}

TEST_F(MtpTest, ChunkedEqualsWholeAndDependsOnTheNextToken) {
  const std::vector<int32_t> tokens{9, 8, 7, 6, 5, 4, 3, 2, 100, 200, 300, 400, 500};
  const int64_t T = static_cast<int64_t>(tokens.size()), V = model_->config().vocab_size;
  v4::SequenceState st = model_->new_sequence();
  v4::SeqInput in{&st, tokens, true};
  v4::ForwardOutput out;
  ASSERT_TRUE(model_->forward(std::span<const v4::SeqInput>(&in, 1), out, true).is_ok());
  const std::vector<int32_t> next(tokens.begin() + 1, tokens.end());
  const std::span<const float> X(out.final_streams.data(), (T - 1) * n_ * d_);
  v4::SequenceState a = model_->new_sequence(), b = model_->new_sequence();
  std::vector<float> whole, p1, p2;
  ASSERT_TRUE(model_->mtp_forward(a, X, next, whole).is_ok());
  const int64_t k = 5;
  ASSERT_TRUE(model_->mtp_forward(b, X.subspan(0, k * n_ * d_), std::span(next).subspan(0, k), p1).is_ok());
  ASSERT_TRUE(model_->mtp_forward(b, X.subspan(k * n_ * d_), std::span(next).subspan(k), p2).is_ok());
  p1.insert(p1.end(), p2.begin(), p2.end());
  EXPECT_EQ(whole, p1);
  // Another next token changes the prediction (the e_proj path is live).
  v4::SequenceState c = model_->new_sequence();
  std::vector<int32_t> other = next;
  other[0] = (other[0] + 1) % static_cast<int32_t>(V);
  std::vector<float> alt;
  ASSERT_TRUE(model_->mtp_forward(c, X.subspan(0, n_ * d_), std::span(other).subspan(0, 1), alt).is_ok());
  EXPECT_FALSE(std::equal(alt.begin(), alt.end(), whole.begin()));
}

TEST_F(MtpTest, IncompleteMtpHeadIsAnError) {
  tensors_.erase("mtp.0.h_proj.weight");
  const std::string dir = testing::temp_dir("mtp-incomplete");
  testing::write_model_dir(dir, config_, tensors_);
  auto m = v4::V4Model::load(dir, *backend_);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("mtp.0.h_proj.weight"), std::string_view::npos) << m.status().to_string();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer
