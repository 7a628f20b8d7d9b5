// Stored weight formats end to end: the fixtures' weights re-encoded here (BF16; FP8 E4M3 with
// E8M0, F32 or BF16 block scales on a small block grid; MXFP4 routed experts; and the real
// checkpoint's mix of all of them) must load in that format and give logits BITWISE equal to an
// F32 checkpoint holding the exact dequantised values, which this test computes itself from the
// format definitions (tests/util/quant.h), not through the engine's decoders. The distance to
// the original fixture's logits is reported (and loosely bounded) as a sanity check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>

#include "model/deepseek_v4/model.h"
#include "tests/util/checkpoint_writer.h"
#include "tests/util/quant.h"
#include "tests/util/v4_logits.h"

namespace deepinfer {
namespace {

using namespace deepinfer::testing;

// ---- Encoders: each returns the stored tensor(s) and the exact float values they decode to.

struct Encoded {
  RawTensor data;
  std::optional<RawTensor> scale;
  std::vector<float> dequant;  // what an exact decoder must produce, row-major [rows, cols]
};

Encoded encode_bf16(const RawTensor& t) {
  const auto v = as_f32(t);
  std::vector<uint16_t> b(v.size());
  Encoded e;
  e.dequant.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    b[i] = ref_encode_bf16(v[i]);
    e.dequant[i] = ref_bf16(b[i]);
  }
  e.data = raw_tensor("BF16", t.shape, b.data(), b.size() * 2);
  return e;
}

enum class ScaleKind { kE8M0, kF32, kBF16 };

// FP8 E4M3 with one scale per br x bc tile (tiles at the edges may be partial).
Encoded encode_fp8(const RawTensor& t, int64_t br, int64_t bc, ScaleKind kind) {
  const int64_t R = t.shape[0], C = t.shape[1];
  const int64_t SR = (R + br - 1) / br, SC = (C + bc - 1) / bc;
  const auto v = as_f32(t);
  std::vector<uint8_t> q(v.size());
  std::vector<float> scale(SR * SC);
  std::vector<uint8_t> e8(SR * SC);
  std::vector<uint16_t> b16(SR * SC);
  for (int64_t sr = 0; sr < SR; ++sr)
    for (int64_t sc = 0; sc < SC; ++sc) {
      double amax = 0;
      for (int64_t r = sr * br; r < std::min(R, (sr + 1) * br); ++r)
        for (int64_t c = sc * bc; c < std::min(C, (sc + 1) * bc); ++c) amax = std::max(amax, std::fabs(double(v[r * C + c])));
      float s;
      const size_t k = static_cast<size_t>(sr * SC + sc);
      if (kind == ScaleKind::kE8M0) {
        const int exp = amax > 0 ? static_cast<int>(std::ceil(std::log2(amax / 448.0))) : 0;
        e8[k] = static_cast<uint8_t>(std::clamp(exp + 127, 0, 254));
        s = static_cast<float>(ref_e8m0(e8[k]));
      } else if (kind == ScaleKind::kBF16) {
        // A bf16 scale just above amax/448 (rounded up so no value saturates).
        uint16_t bb = ref_encode_bf16(static_cast<float>(amax > 0 ? amax / 448.0 : 1.0));
        if (ref_bf16(bb) * 448.0 < amax) ++bb;
        b16[k] = bb;
        s = ref_bf16(bb);
      } else {
        s = static_cast<float>(amax > 0 ? amax / 448.0 : 1.0);
      }
      scale[k] = s;
      for (int64_t r = sr * br; r < std::min(R, (sr + 1) * br); ++r)
        for (int64_t c = sc * bc; c < std::min(C, (sc + 1) * bc); ++c)
          q[r * C + c] = ref_encode_e4m3(static_cast<double>(v[r * C + c]) / s);
    }
  Encoded e;
  e.data = raw_tensor("F8_E4M3", t.shape, q.data(), q.size());
  if (kind == ScaleKind::kE8M0) e.scale = raw_tensor("F8_E8M0", {SR, SC}, e8.data(), e8.size());
  else if (kind == ScaleKind::kBF16) e.scale = raw_tensor("BF16", {SR, SC}, b16.data(), b16.size() * 2);
  else e.scale = raw_tensor("F32", {SR, SC}, scale.data(), scale.size() * 4);
  e.dequant.resize(v.size());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      e.dequant[r * C + c] = static_cast<float>(ref_e4m3(q[r * C + c])) * scale[(r / br) * SC + c / bc];
  return e;
}

// MXFP4: packed e2m1 [R, C/2] (low nibble = even column) + E8M0 scale [R, C/32].
Encoded encode_mxfp4(const RawTensor& t) {
  const int64_t R = t.shape[0], C = t.shape[1];
  const auto v = as_f32(t);
  std::vector<uint8_t> packed(R * C / 2), scale(R * C / 32), codes(R * C);
  Encoded e;
  e.dequant.resize(v.size());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t g = 0; g < C / 32; ++g) {
      double amax = 0;
      for (int64_t c = g * 32; c < g * 32 + 32; ++c) amax = std::max(amax, std::fabs(double(v[r * C + c])));
      const int exp = amax > 0 ? static_cast<int>(std::ceil(std::log2(amax / 6.0))) : 0;
      const uint8_t se = static_cast<uint8_t>(std::clamp(exp + 127, 0, 254));
      scale[r * (C / 32) + g] = se;
      const double s = ref_e8m0(se);
      for (int64_t c = g * 32; c < g * 32 + 32; ++c) {
        codes[r * C + c] = ref_encode_e2m1(v[r * C + c] / s);
        e.dequant[r * C + c] = static_cast<float>(ref_e2m1(codes[r * C + c])) * static_cast<float>(s);
      }
    }
  for (int64_t i = 0; i < R * C / 2; ++i) packed[i] = static_cast<uint8_t>(codes[2 * i] | (codes[2 * i + 1] << 4));
  e.data = raw_tensor("I8", {R, C / 2}, packed.data(), packed.size());
  e.scale = raw_tensor("F8_E8M0", {R, C / 32}, scale.data(), scale.size());
  return e;
}

// ---- Which tensors get which format.

bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}
bool is_linear(const std::string& name, const RawTensor& t) { return ends_with(name, ".weight") && t.shape.size() == 2; }
bool is_routed_expert(const std::string& name) { return name.find(".ffn.experts.") != std::string::npos; }
bool is_norm(const std::string& name, const RawTensor& t) { return ends_with(name, ".weight") && t.shape.size() == 1; }

enum class Fmt { kKeep, kBF16, kFp8E8M0, kFp8F32, kFp8BF16, kMxfp4 };
using Policy = std::function<Fmt(const std::string&, const RawTensor&)>;

struct Variant {
  const char* name;
  Policy policy;
  int64_t block = 16;  // quantization_config.weight_block_size = [block, block]
  double min_correlation;  // loose bound: logits vs the original fixture's
};

struct Built {
  ModelFolder quantised, dequantised;
  std::map<std::string, Fmt> formats;  // per linear tensor, as encoded
};

Built build(const ModelFolder& src, const Variant& v) {
  Built b;
  b.quantised.config = b.dequantised.config = src.config;
  b.quantised.config["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"},
                                               {"weight_block_size", {v.block, v.block}}};
  b.dequantised.config["quantization_config"] = b.quantised.config["quantization_config"];
  for (const auto& [name, t] : src.tensors) {
    Fmt f = v.policy(name, t);
    if (f == Fmt::kMxfp4 && t.shape[1] % 32 != 0) f = Fmt::kKeep;  // MXFP4 needs in % 32 == 0
    std::optional<Encoded> e;
    switch (f) {
      case Fmt::kKeep: break;
      case Fmt::kBF16: e = encode_bf16(t); break;
      case Fmt::kFp8E8M0: e = encode_fp8(t, v.block, v.block, ScaleKind::kE8M0); break;
      case Fmt::kFp8F32: e = encode_fp8(t, v.block, v.block, ScaleKind::kF32); break;
      case Fmt::kFp8BF16: e = encode_fp8(t, v.block, v.block, ScaleKind::kBF16); break;
      case Fmt::kMxfp4: e = encode_mxfp4(t); break;
    }
    if (!e) {
      b.quantised.tensors[name] = b.dequantised.tensors[name] = t;
      continue;
    }
    b.formats[name] = f;
    b.quantised.tensors[name] = e->data;
    if (e->scale) b.quantised.tensors[name.substr(0, name.size() - 7) + ".scale"] = *e->scale;
    b.dequantised.tensors[name] = f32_tensor(t.shape, e->dequant);
  }
  return b;
}

WeightFormat expected_format(Fmt f) {
  switch (f) {
    case Fmt::kBF16: return WeightFormat::kBF16;
    case Fmt::kFp8E8M0: case Fmt::kFp8F32: case Fmt::kFp8BF16: return WeightFormat::kFp8Block;
    case Fmt::kMxfp4: return WeightFormat::kMxfp4;
    default: return WeightFormat::kF32;
  }
}

// Loads `dir`, returns its logits, and (when `formats` is given) checks that a sample of the
// encoded weights is held in the encoded format, not converted at load time.
Result<std::vector<float>> load_and_run(const std::string& dir, const std::vector<int32_t>& tokens,
                                        const std::map<std::string, Fmt>* formats) {
  DI_ASSIGN_OR_RETURN(auto backend, Backend::create({}));
  DI_ASSIGN_OR_RETURN(auto model, v4::V4Model::load(dir, *backend));
  if (formats) {
    const auto& w = model->weights();
    auto check = [&](const char* name, const Weight& wt) {
      auto it = formats->find(name);
      const WeightFormat want = it == formats->end() ? WeightFormat::kF32 : expected_format(it->second);
      EXPECT_EQ(wt.format, want) << name << ": held as " << weight_format_name(wt.format);
    };
    check("model.embed_tokens.weight", w.embed);
    check("head.weight", w.head);
    check("model.layers.0.attn.wq_a.weight", w.layers[0].attn.wq_a);
    check("model.layers.1.attn.wo_b.weight", w.layers[1].attn.wo_b);
    check("model.layers.1.attn.indexer.wq_b.weight", w.layers[1].attn.indexer->wq_b);
    check("model.layers.0.ffn.experts.3.w1.weight", w.layers[0].ffn.w1[3]);
    check("model.layers.2.ffn.experts.0.w2.weight", w.layers[2].ffn.w2[0]);
    check("model.layers.0.ffn.shared_experts.w3.weight", w.layers[0].ffn.shared_w3);
  }
  return prefill_logits(*model, tokens);
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
      {"bf16", [](const std::string& n, const RawTensor& t) { return is_linear(n, t) || is_norm(n, t) ? Fmt::kBF16 : Fmt::kKeep; }, 16, 0.97},
      {"fp8_e8m0_scales", [](const std::string& n, const RawTensor& t) { return is_linear(n, t) ? Fmt::kFp8E8M0 : Fmt::kKeep; }, 16, 0.85},
      {"fp8_f32_scales", [](const std::string& n, const RawTensor& t) { return is_linear(n, t) ? Fmt::kFp8F32 : Fmt::kKeep; }, 16, 0.85},
      {"fp8_bf16_scales", [](const std::string& n, const RawTensor& t) { return is_linear(n, t) ? Fmt::kFp8BF16 : Fmt::kKeep; }, 16, 0.85},
      {"fp8_e8m0_blocks_8x8", [](const std::string& n, const RawTensor& t) { return is_linear(n, t) ? Fmt::kFp8E8M0 : Fmt::kKeep; }, 8, 0.85},
      {"fp8_e8m0_blocks_128", [](const std::string& n, const RawTensor& t) { return is_linear(n, t) ? Fmt::kFp8E8M0 : Fmt::kKeep; }, 128, 0.85},
      {"mxfp4_experts", [](const std::string& n, const RawTensor& t) { return is_linear(n, t) && is_routed_expert(n) ? Fmt::kMxfp4 : Fmt::kKeep; }, 16, 0.8},
      // The real checkpoint's mix: FP8 attention/shared experts, MXFP4 routed experts, BF16
      // embed/head/router/compressor/indexer projections and norms, F32 mHC and the rest.
      {"checkpoint_mix",
       [](const std::string& n, const RawTensor& t) {
         if (is_norm(n, t)) return Fmt::kBF16;
         if (!is_linear(n, t)) return Fmt::kKeep;
         if (is_routed_expert(n)) return Fmt::kMxfp4;
         if (n.find("shared_experts") != std::string::npos || n.find("indexer.wq_b") != std::string::npos) return Fmt::kFp8E8M0;
         for (const char* p : {".attn.wq_a.", ".attn.wq_b.", ".attn.wkv.", ".attn.wo_a.", ".attn.wo_b."})
           if (n.find(p) != std::string::npos) return Fmt::kFp8E8M0;
         return Fmt::kBF16;
       },
       16, 0.8},
  };
  return v;
}

const Variant& variant(const std::string& name) {
  for (const auto& v : variants())
    if (name == v.name) return v;
  std::abort();
}

class FormatsTest : public ::testing::TestWithParam<std::tuple<const char*, int>> {
 protected:
  static std::map<std::string, ModelFolder>& fixtures() {
    static std::map<std::string, ModelFolder> m;
    return m;
  }
};

TEST_P(FormatsTest, BitwiseEqualToDequantisedF32AndCloseToFixture) {
  const std::string fixture = std::get<0>(GetParam());
  const Variant& v = variants()[std::get<1>(GetParam())];
  auto& fx = fixtures();
  if (!fx.count(fixture)) fx[fixture] = read_model_dir(fixture_dir(fixture));
  const ModelFolder& src = fx[fixture];
  const auto tokens = test_tokens(src.config["vocab_size"].get<int64_t>());
  Built b = build(src, v);
  ASSERT_FALSE(b.formats.empty());
  TempDir qdir("formats-q"), ddir("formats-d");
  b.quantised.write(qdir.path);
  b.dequantised.write(ddir.path);

  auto q = load_and_run(qdir.path, tokens, &b.formats);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  auto d = load_and_run(ddir.path, tokens, nullptr);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  auto orig = v4_logits(fixture_dir(fixture), tokens);
  ASSERT_TRUE(orig.is_ok()) << orig.status().to_string();
  EXPECT_TRUE(bitwise_equal(*q, *d)) << "stored-format logits differ from the dequantised F32 checkpoint's, max "
                                     << max_abs_diff(*q, *d);
  // Tiny random models are discontinuous in their weights: a rounding that flips one routing
  // or indexer top-k choice moves that position's logits (and, through the cache, later ones) by
  // O(1). So the max difference is reported, and the bound is on the correlation between the
  // re-encoded model's logits and the fixture's (1 = identical up to scale).
  const float max_diff = max_abs_diff(*d, *orig);
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0, sad = 0;
  const double n = static_cast<double>(orig->size());
  for (size_t i = 0; i < orig->size(); ++i) {
    const double x = (*orig)[i], y = (*d)[i];
    sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y, sad += std::fabs(x - y);
  }
  const double corr = (sxy - sx * sy / n) / std::sqrt((sxx - sx * sx / n) * (syy - sy * sy / n));
  std::printf("[ formats  ] %s %-20s %3zu tensors re-encoded; vs fixture logits: max |diff| %.3g, mean |diff| %.3g, "
              "correlation %.5f\n",
              fixture.c_str(), v.name, b.formats.size(), max_diff, sad / n, corr);
  RecordProperty("max_abs_diff_vs_fixture", std::to_string(max_diff));
  RecordProperty("correlation_vs_fixture", std::to_string(corr));
  EXPECT_GT(max_diff, 0.f) << "quantisation changed nothing: the test would not see a wrong decoder";
  EXPECT_GT(corr, v.min_correlation);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, FormatsTest,
                         ::testing::Combine(::testing::Values("tiny-v4-a", "tiny-v4-b"), ::testing::Range(0, static_cast<int>(variants().size()))),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)).substr(8) + "_" +
                                  variants()[std::get<1>(info.param)].name;
                         });

// A wrong decoder must be visible: swapping the nibbles of every packed byte (high = even column)
// changes the logits.
TEST(FormatsSensitivity, Mxfp4NibbleOrderMatters) {
  const ModelFolder src = read_model_dir(fixture_dir("tiny-v4-a"));
  const auto tokens = test_tokens(1024);
  Built b = build(src, variant("mxfp4_experts"));
  TempDir good("formats-good"), swapped("formats-swapped");
  b.quantised.write(good.path);
  for (auto& [name, t] : b.quantised.tensors)
    if (t.dtype == "I8")
      for (auto& byte : t.bytes) byte = static_cast<uint8_t>((byte >> 4) | (byte << 4));
  b.quantised.write(swapped.path);
  auto a = v4_logits(good.path, tokens), s = v4_logits(swapped.path, tokens);
  ASSERT_TRUE(a.is_ok() && s.is_ok());
  EXPECT_GT(max_abs_diff(*a, *s), 1e-3f);
}

// Quantised checkpoints that are malformed name the tensor.
TEST(FormatsErrors, ScaleShapeFollowsTheConfiguredBlockSize) {
  const ModelFolder src = read_model_dir(fixture_dir("tiny-v4-a"));
  Built b = build(src, variant("fp8_e8m0_scales"));  // FP8 with [16, 16] blocks
  b.quantised.config["quantization_config"]["weight_block_size"] = {32, 32};
  TempDir dir("formats-blocks");
  b.quantised.write(dir.path);
  Status s = v4_load_status(dir.path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(std::string(s.message()).find(".scale'"), std::string::npos) << s.message();
  EXPECT_NE(std::string(s.message()).find("expected"), std::string::npos) << s.message();

  b = build(src, variant("fp8_e8m0_scales"));
  b.quantised.tensors.erase("model.layers.1.attn.wkv.scale");
  b.quantised.write(dir.path);
  s = v4_load_status(dir.path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(std::string(s.message()).find("'model.layers.1.attn.wkv.weight'"), std::string::npos) << s.message();
  EXPECT_NE(std::string(s.message()).find("scale"), std::string::npos) << s.message();

  b = build(src, variant("mxfp4_experts"));  // MXFP4 scale as F32
  auto& sc = b.quantised.tensors["model.layers.0.ffn.experts.1.w2.scale"];
  std::vector<float> f(sc.bytes.size(), 1.f);
  sc = f32_tensor(sc.shape, f);
  b.quantised.write(dir.path);
  s = v4_load_status(dir.path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(std::string(s.message()).find("'model.layers.0.ffn.experts.1.w2.scale'"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace deepinfer
