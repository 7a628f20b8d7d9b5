// GpuWeights::synthetic / V4GpuModel::synthetic (model/deepseek_v4_gpu/synthetic_weights.cpp):
// random V4-Flash weights generated on the device in the stored formats.
//   SameStructAsUpload: the synthetic weights of 4 layers (the real order: SWA, SWA, CSA, HCA),
//     16 experts, are downloaded into a checkpoint with the upstream names and formats (FP8 +
//     E8M0, MXFP4 I8 + E8M0, bf16, fp32, I64 tid2eid) and loaded back through
//     V4GpuModel::load (GpuWeights::upload): every field and every buffer's bytes must be equal
//     (expert pointers as offsets in their blobs), and the logits of both models bitwise equal.
//   RealShapesRun: 2 layers / 16 experts (and 4 layers) with the real vocabulary: a prefill
//     past the window then decode steps; logits finite, not all equal, deterministic (two fresh
//     states give bitwise equal logits; the same seed gives the same weights, another seed others).
// Skips without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "model/deepseek_v4/flash_config.h"
#include "model/deepseek_v4_gpu/gpu_model.h"
#include "model/deepseek_v4_gpu/gpu_state.h"
#include "tests/util/checkpoint_writer.h"

namespace deepinfer {
namespace {

using testing::RawTensor;
using testing::TempDir;
using testing::TensorMap;
using v4gpu::DeviceBuffer;
using v4gpu::GpuLinear;
using v4gpu::GpuWeights;

std::vector<uint8_t> host(const DeviceBuffer& b) {
  std::vector<uint8_t> h(b.bytes());
  if (!h.empty()) {
    EXPECT_TRUE(cuda::copy_to_host(h.data(), b.get(), h.size())) << cuda::last_error();
  }
  return h;
}
std::vector<uint8_t> host_part(const uint8_t* p, size_t bytes) {
  std::vector<uint8_t> h(bytes);
  EXPECT_TRUE(cuda::copy_to_host(h.data(), p, bytes)) << cuda::last_error();
  return h;
}
// Packed e2m1 read back from the device layout -> the stored (checkpoint) layout.
// Rows [n, row_bytes] back from cuda::mxfp4_tile64's 64-row tiles, where each 64 rows hold, per
// run of `run` bytes of a row (64 weight bytes or 4 scale bytes: one 128-code chunk), the 64 rows'
// runs one after the other.
std::vector<uint8_t> untile64(const std::vector<uint8_t>& t, int64_t n, int64_t row_bytes, int64_t run) {
  std::vector<uint8_t> out(t.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < row_bytes; ++b)
      out[r * row_bytes + b] = t[(r / 64) * 64 * row_bytes + (b / run) * 64 * run + (r % 64) * run + b % run];
  return out;
}

std::vector<uint8_t> stored_e2m1(std::vector<uint8_t> h) {
  for (size_t i = 0; i + 4 <= h.size(); i += 4) {
    uint32_t w;
    std::memcpy(&w, h.data() + i, 4);
    w = cuda::mxfp4_word_from_device(w);
    std::memcpy(h.data() + i, &w, 4);
  }
  return h;
}
RawTensor raw(const char* dtype, std::vector<int64_t> shape, const std::vector<uint8_t>& bytes) {
  return testing::raw_tensor(dtype, std::move(shape), bytes.data(), bytes.size());
}
std::vector<uint8_t> prefix(const DeviceBuffer& b, size_t bytes) {
  std::vector<uint8_t> h = host(b);
  h.resize(bytes);
  return h;
}

// Rows [r0, r0 + n) of a linear (all of it by default) as a checkpoint tensor pair.
void put_linear(TensorMap& t, const std::string& name, const GpuLinear& l, int64_t r0 = 0, int64_t n = -1) {
  if (n < 0) n = l.n;
  auto rows = [](const std::vector<uint8_t>& all, int64_t row_bytes, int64_t first, int64_t count) {
    return std::vector<uint8_t>(all.begin() + first * row_bytes, all.begin() + (first + count) * row_bytes);
  };
  if (l.fp8) {
    t[name + ".weight"] = raw("F8_E4M3", {n, l.k}, rows(host(l.data), l.k, r0, n));
    t[name + ".scale"] = raw("F8_E8M0", {n / 128, l.k / 128}, rows(host(l.scale), l.k / 128, r0 / 128, n / 128));
  } else {
    t[name + ".weight"] = raw("BF16", {n, l.k}, rows(host(l.data), 2 * l.k, r0, n));
  }
}
void put_f32(TensorMap& t, const std::string& name, std::vector<int64_t> shape, const DeviceBuffer& b) {
  t[name] = raw("F32", std::move(shape), host(b));
}
void put_hc(TensorMap& t, const std::string& p, const v4gpu::GpuHc& h, int64_t d) {
  put_f32(t, p + "_fn", {24, 4 * d}, h.fn);
  put_f32(t, p + "_base", {24}, h.base);
  put_f32(t, p + "_scale", {3}, h.scale);
}
void put_compressor(TensorMap& t, const std::string& p, const v4gpu::GpuCompressor& c) {
  put_linear(t, p + ".wkv", c.wkvg, 0, c.cw());  // wkvg: wkv's rows then wgate's
  put_linear(t, p + ".wgate", c.wkvg, c.cw(), c.cw());
  put_f32(t, p + ".ape", {c.ratio, c.cw()}, c.ape);
  put_f32(t, p + ".norm.weight", {c.width}, c.norm);
}

/// The synthetic weights as an upstream checkpoint's tensors.
TensorMap to_tensors(const GpuWeights& w, const v4::V4Config& c) {
  const int64_t d = c.hidden, I = c.moe_inter, V = c.vocab_size, k = c.experts_per_tok;
  TensorMap t;
  t["embed.weight"] = raw("BF16", {V, d}, host(w.embed));
  put_linear(t, "head", w.head);
  put_f32(t, "norm.weight", {d}, w.norm);
  t["hc_head_fn"] = raw("F32", {4, 4 * d}, prefix(w.hc_head.fn, 4 * 4 * d * 4));
  t["hc_head_base"] = raw("F32", {4}, prefix(w.hc_head.base, 16));
  t["hc_head_scale"] = raw("F32", {1}, prefix(w.hc_head.scale, 4));
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const v4gpu::GpuLayer& L = w.layers[l];
    const std::string p = "layers." + std::to_string(l), a = p + ".attn", f = p + ".ffn";
    put_hc(t, p + ".hc_attn", L.hc_attn, d);
    put_hc(t, p + ".hc_ffn", L.hc_ffn, d);
    put_f32(t, p + ".attn_norm.weight", {d}, L.attn_norm);
    put_f32(t, p + ".ffn_norm.weight", {d}, L.ffn_norm);
    put_f32(t, a + ".attn_sink", {c.num_heads}, L.sinks);
    put_f32(t, a + ".q_norm.weight", {c.q_lora_rank}, L.q_norm);
    put_f32(t, a + ".kv_norm.weight", {c.head_dim}, L.kv_norm);
    put_linear(t, a + ".wq_a", L.wq_a);
    put_linear(t, a + ".wq_b", L.wq_b);
    put_linear(t, a + ".wkv", L.wkv);
    put_linear(t, a + ".wo_a", L.wo_a);
    put_linear(t, a + ".wo_b", L.wo_b);
    if (L.has_compressor) put_compressor(t, a + ".compressor", L.cmp);
    if (L.has_indexer) {
      put_compressor(t, a + ".indexer.compressor", L.icmp);
      put_linear(t, a + ".indexer.wq_b", L.idx_wq_b);
      put_linear(t, a + ".indexer.weights_proj", L.weights_proj);
    }
    t[f + ".gate.weight"] = raw("BF16", {c.n_routed_experts, d}, host(L.gate));
    if (L.hash) {
      const std::vector<uint8_t> b = host(L.tid2eid);
      std::vector<int64_t> ids(b.size() / 4);
      for (size_t i = 0; i < ids.size(); ++i) {
        int32_t v;
        std::memcpy(&v, b.data() + 4 * i, 4);
        ids[i] = v;
      }
      t[f + ".gate.tid2eid"] = testing::i64_tensor({V, k}, ids);
    } else {
      put_f32(t, f + ".gate.bias", {c.n_routed_experts}, L.bias);
    }
    const size_t w13 = static_cast<size_t>(I * d / 2), s13 = static_cast<size_t>(I * d / 32);
    const size_t part[6] = {w13, s13, w13, s13, w13, s13};
    const v4gpu::ExpertLayout lay = v4gpu::expert_layout(part);
    for (size_t e = 0; e < L.experts.size(); ++e) {
      const std::string ep = f + ".experts." + std::to_string(e);
      const auto* base = L.experts[e].as<uint8_t>();
      const char* names[3] = {".w1", ".w3", ".w2"};
      for (int i = 0; i < 3; ++i) {
        const int64_t rows = i == 2 ? d : I, cols = i == 2 ? I : d;
        auto wt = host_part(base + lay.off[2 * i], part[2 * i]), sc = host_part(base + lay.off[2 * i + 1], part[2 * i + 1]);
        if (L.experts_tiled) wt = untile64(wt, rows, cols / 2, 64), sc = untile64(sc, rows, cols / 32, 4);
        t[ep + names[i] + ".weight"] = raw("I8", {rows, cols / 2}, stored_e2m1(wt));
        t[ep + names[i] + ".scale"] = raw("F8_E8M0", {rows, cols / 32}, sc);
      }
    }
    put_linear(t, f + ".shared_experts.w1", L.sh_w13, 0, I);  // sh_w13: w1's rows then w3's
    put_linear(t, f + ".shared_experts.w2", L.sh_w2);
    put_linear(t, f + ".shared_experts.w3", L.sh_w13, I, I);
  }
  return t;
}

void expect_same(const DeviceBuffer& a, const DeviceBuffer& b, const std::string& what) {
  ASSERT_EQ(a.bytes(), b.bytes()) << what;
  EXPECT_TRUE(host(a) == host(b)) << what << ": contents differ";
}
void expect_same(const GpuLinear& a, const GpuLinear& b, const std::string& what) {
  EXPECT_EQ(a.fp8, b.fp8) << what;
  EXPECT_EQ(a.scale_f32, b.scale_f32) << what;
  EXPECT_EQ(a.n, b.n) << what;
  EXPECT_EQ(a.k, b.k) << what;
  expect_same(a.data, b.data, what);
  expect_same(a.scale, b.scale, what + " scale");
}
void expect_same(const v4gpu::GpuHc& a, const v4gpu::GpuHc& b, const std::string& what) {
  expect_same(a.fn, b.fn, what + " fn");
  expect_same(a.base, b.base, what + " base");
  expect_same(a.scale, b.scale, what + " scale");
}
void expect_same(const v4gpu::GpuCompressor& a, const v4gpu::GpuCompressor& b, const std::string& what) {
  EXPECT_EQ(a.ratio, b.ratio) << what;
  EXPECT_EQ(a.width, b.width) << what;
  EXPECT_EQ(a.overlap, b.overlap) << what;
  expect_same(a.wkvg, b.wkvg, what + ".wkv + wgate");
  expect_same(a.ape, b.ape, what + ".ape");
  expect_same(a.norm, b.norm, what + ".norm");
}
// Expert pointers as offsets into each expert's blob.
std::vector<int64_t> ptr_offsets(const v4gpu::GpuLayer& L) {
  std::vector<cuda::ExpertPtrs> p(L.experts.size());
  EXPECT_EQ(L.expert_ptrs.bytes(), p.size() * sizeof(cuda::ExpertPtrs));
  EXPECT_TRUE(cuda::copy_to_host(p.data(), L.expert_ptrs.get(), L.expert_ptrs.bytes()));
  std::vector<int64_t> off;
  for (size_t e = 0; e < p.size(); ++e) {
    const auto* base = L.experts[e].as<uint8_t>();
    for (const uint8_t* q : {p[e].w1, p[e].s1, p[e].w3, p[e].s3, p[e].w2, p[e].s2}) off.push_back(q - base);
  }
  return off;
}

void expect_same(const GpuWeights& a, const GpuWeights& b) {
  EXPECT_EQ(a.bytes, b.bytes);
  expect_same(a.embed, b.embed, "embed");
  expect_same(a.head, b.head, "head");
  expect_same(a.norm, b.norm, "norm");
  expect_same(a.hc_head, b.hc_head, "hc_head");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const v4gpu::GpuLayer &x = a.layers[l], &y = b.layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    EXPECT_EQ(x.kind, y.kind) << p;
    EXPECT_EQ(x.ratio, y.ratio) << p;
    EXPECT_EQ(x.hash, y.hash) << p;
    EXPECT_EQ(x.has_compressor, y.has_compressor) << p;
    EXPECT_EQ(x.has_indexer, y.has_indexer) << p;
    expect_same(x.hc_attn, y.hc_attn, p + "hc_attn");
    expect_same(x.hc_ffn, y.hc_ffn, p + "hc_ffn");
    expect_same(x.attn_norm, y.attn_norm, p + "attn_norm");
    expect_same(x.ffn_norm, y.ffn_norm, p + "ffn_norm");
    expect_same(x.q_norm, y.q_norm, p + "q_norm");
    expect_same(x.kv_norm, y.kv_norm, p + "kv_norm");
    expect_same(x.sinks, y.sinks, p + "sinks");
    expect_same(x.inv_freq, y.inv_freq, p + "inv_freq");
    expect_same(x.wq_a, y.wq_a, p + "wq_a");
    expect_same(x.wq_b, y.wq_b, p + "wq_b");
    expect_same(x.wkv, y.wkv, p + "wkv");
    expect_same(x.wo_a, y.wo_a, p + "wo_a");
    expect_same(x.wo_b, y.wo_b, p + "wo_b");
    expect_same(x.cmp, y.cmp, p + "compressor");
    expect_same(x.icmp, y.icmp, p + "indexer.compressor");
    expect_same(x.idx_wq_b, y.idx_wq_b, p + "indexer.wq_b");
    expect_same(x.weights_proj, y.weights_proj, p + "weights_proj");
    expect_same(x.gate, y.gate, p + "gate");
    expect_same(x.bias, y.bias, p + "bias");
    expect_same(x.tid2eid, y.tid2eid, p + "tid2eid");
    ASSERT_EQ(x.experts.size(), y.experts.size()) << p;
    for (size_t e = 0; e < x.experts.size(); ++e) expect_same(x.experts[e], y.experts[e], p + "expert " + std::to_string(e));
    EXPECT_EQ(ptr_offsets(x), ptr_offsets(y)) << p;
    expect_same(x.sh_w13, y.sh_w13, p + "shared w1 + w3");
    expect_same(x.sh_w2, y.sh_w2, p + "shared w2");
  }
}

// concat_rows (the shared expert's w1 + w3): linears of different widths or formats cannot share
// one GEMM, an error naming them (no device work: the check comes first).
TEST(CudaV4Synthetic, ConcatRowsRefusesMismatchedLinears) {
  GpuLinear a, b;
  a.fp8 = b.fp8 = true, a.n = b.n = 128, a.k = 256, b.k = 128;
  auto r = v4gpu::concat_rows(a, b, "w1 + w3");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("w1 + w3"), std::string::npos) << r.status().message();
  b.k = 256, b.fp8 = false;
  EXPECT_FALSE(v4gpu::concat_rows(a, b, "w1 + w3").is_ok());
}

std::vector<int32_t> tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> t(n);
  uint32_t x = seed;
  for (auto& v : t) x = x * 1664525u + 1013904223u, v = static_cast<int32_t>(2 + (x >> 8) % (vocab - 2));
  return t;
}

/// Prefill `prompt` (all logits) then `steps` one-token decode steps: every logits row, in order.
std::vector<float> run(Model& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& next) {
  std::unique_ptr<ModelState> st = m.new_state();
  EXPECT_TRUE(st);
  if (!st) return {};
  std::vector<float> all;
  v4::ForwardOutput out;
  ModelInput in{st.get(), prompt, true};
  Status s = m.forward(std::span<const ModelInput>(&in, 1), out);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  all.insert(all.end(), out.logits.begin(), out.logits.end());
  for (size_t i = 0; i < next.size() && s.is_ok(); ++i) {
    in = {st.get(), std::span<const int32_t>(&next[i], 1), false};
    s = m.forward(std::span<const ModelInput>(&in, 1), out);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    all.insert(all.end(), out.logits.begin(), out.logits.end());
  }
  return all;
}

void expect_sane_logits(const std::vector<float>& logits, int64_t vocab, int64_t rows) {
  ASSERT_EQ(static_cast<int64_t>(logits.size()), rows * vocab);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0, sq = 0, lo = 1e30, hi = -1e30;
    int64_t bad = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const float x = logits[r * vocab + v];
      if (!std::isfinite(x)) ++bad;
      sum += x, sq += double(x) * x, lo = std::min<double>(lo, x), hi = std::max<double>(hi, x);
    }
    ASSERT_EQ(bad, 0) << "row " << r << ": " << bad << " non-finite logits";
    const double mean = sum / vocab, sd = std::sqrt(std::max(0.0, sq / vocab - mean * mean));
    EXPECT_GT(hi - lo, 0.0) << "row " << r << ": all logits equal";
    EXPECT_GT(sd, 1e-3) << "row " << r << ": logits (nearly) constant, sd " << sd;
    EXPECT_LT(sd, 1e4) << "row " << r << ": logits blew up, sd " << sd;
  }
  // Rows differ from each other (the model reads its input).
  EXPECT_FALSE(std::equal(logits.begin(), logits.begin() + vocab, logits.end() - vocab)) << "first and last rows equal";
}

class V4Synthetic : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(V4Synthetic, SameStructAsUpload) {
  auto cfg = v4::flash_config(4, 16);
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  cfg->vocab_size = 4096;  // a small embed / head for the checkpoint on disk
  auto syn = GpuWeights::synthetic(*cfg, 77);
  ASSERT_TRUE(syn.is_ok()) << syn.status().to_string();
  ASSERT_EQ(syn->layers.size(), 4u);
  EXPECT_EQ(syn->layers[2].kind, v4::AttnKind::kCsa);
  EXPECT_EQ(syn->layers[3].kind, v4::AttnKind::kHca);
  TempDir dir("v4-synthetic");
  nlohmann::json j = v4::flash_config_json(4, 16);
  j["vocab_size"] = 4096;
  testing::write_model_dir(dir.path, j, to_tensors(*syn, *cfg));
  auto loaded = v4gpu::V4GpuModel::load(dir.path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  expect_same(*syn, (*loaded)->weights());

  auto model = v4gpu::V4GpuModel::synthetic(*cfg, 77);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  expect_same(*syn, (*model)->weights());  // deterministic in the seed
  const std::vector<int32_t> prompt = tokens(200, 4096, 5), next = tokens(4, 4096, 6);
  const std::vector<float> a = run(**model, prompt, next), b = run(**loaded, prompt, next);
  expect_sane_logits(a, 4096, 204);
  EXPECT_TRUE(a == b) << "synthetic and uploaded models give different logits";
}

TEST_F(V4Synthetic, RealShapesRun) {
  for (int64_t layers : {2, 4}) {
    SCOPED_TRACE("layers " + std::to_string(layers));
    auto cfg = v4::flash_config(layers, 16);
    ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
    auto model = v4gpu::V4GpuModel::synthetic(*cfg, 1);
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    const int64_t V = cfg->vocab_size;
    ASSERT_EQ(V, 129280);
    const std::vector<int32_t> prompt = tokens(300, V, 11), next = tokens(6, V, 12);
    const std::vector<float> a = run(**model, prompt, next);
    expect_sane_logits(a, V, 306);
    EXPECT_TRUE(a == run(**model, prompt, next)) << "two fresh states give different logits";
    if (layers == 2) {
      auto other = v4gpu::V4GpuModel::synthetic(*cfg, 2);
      ASSERT_TRUE(other.is_ok()) << other.status().to_string();
      const std::vector<float> c = run(**other, prompt, next);
      ASSERT_EQ(c.size(), a.size());
      EXPECT_FALSE(c == a) << "another seed gives the same logits";
    }
  }
}

/// A synthetic V4-Flash of `layers` layers and `experts` experts with a 4096-token vocabulary.
std::unique_ptr<v4gpu::V4GpuModel> small_model(int64_t layers, int64_t experts, uint64_t seed) {
  auto cfg = v4::flash_config(layers, experts);
  EXPECT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  if (!cfg.is_ok()) return nullptr;
  cfg->vocab_size = 4096;
  auto model = v4gpu::V4GpuModel::synthetic(*cfg, seed);
  EXPECT_TRUE(model.is_ok()) << model.status().to_string();
  if (!model.is_ok()) return nullptr;
  return std::move(model).value();
}

// Lent logits (ForwardOutput::allow_lent_logits: the pinned host buffer, no copy into `logits`)
// are bitwise the rows a caller that does not allow them gets, in a batch whose processing order
// differs from its own (a prefill chunk before two decoding sequences) and in a decode-only one.
TEST_F(V4Synthetic, LentLogitsAreTheSameRows) {
  auto model = small_model(2, 16, 9);
  ASSERT_TRUE(model);
  auto steps = [&](bool lent) {
    std::vector<std::unique_ptr<ModelState>> st;
    for (int s = 0; s < 3; ++s) st.push_back(model->new_state());
    const std::vector<int32_t> p0 = tokens(40, 4096, 1), p1 = tokens(50, 4096, 2), p2 = tokens(60, 4096, 3);
    std::vector<std::vector<float>> rows;
    v4::ForwardOutput out;
    out.allow_lent_logits = lent;
    auto fwd = [&](std::vector<ModelInput> b) {
      Status f = model->forward(b, out);
      EXPECT_TRUE(f.is_ok()) << f.to_string();
      EXPECT_EQ(out.lent_logits.empty(), !lent);
      EXPECT_EQ(out.logits.empty(), lent);
      rows.emplace_back(out.rows().begin(), out.rows().end());
      rows.emplace_back(out.row_offsets.begin(), out.row_offsets.end());
    };
    fwd({{st[0].get(), p0, false}, {st[1].get(), p1, true}});
    const int32_t t0 = 7, t1 = 8, t2 = 9;
    fwd({{st[2].get(), p2, false}, {st[0].get(), std::span<const int32_t>(&t0, 1), false},
         {st[1].get(), std::span<const int32_t>(&t1, 1), false}});
    fwd({{st[0].get(), std::span<const int32_t>(&t1, 1), false}, {st[1].get(), std::span<const int32_t>(&t2, 1), false},
         {st[2].get(), std::span<const int32_t>(&t0, 1), false}});
    return rows;
  };
  const auto copied = steps(false), lent = steps(true);
  ASSERT_EQ(copied.size(), 6u);
  EXPECT_EQ(copied[0].size(), size_t{1 + 50} * 4096);
  for (size_t i = 0; i < copied.size(); ++i) EXPECT_TRUE(copied[i] == lent[i]) << "forward " << i / 2;
}

// A decode shape runs eagerly once (sizing the workspaces it needs) and is captured the second
// time, even though that first eager step grew workspaces (which drops the graphs captured so
// far); every later step replays. So 4 steps of one shape launch 3 times from a graph. A tuning
// change drops the graphs (they hold the kernels the old knobs chose): the shape, seen before, is
// captured again at its next step; setting the same tuning again keeps them.
TEST_F(V4Synthetic, DecodeShapeIsCapturedTheSecondTime) {
  auto model = small_model(2, 16, 5);
  ASSERT_TRUE(model);
  std::vector<std::unique_ptr<ModelState>> st;
  v4::ForwardOutput out;
  std::vector<std::vector<int32_t>> prompts;
  for (int s = 0; s < 3; ++s) {
    st.push_back(model->new_state());
    prompts.push_back(tokens(30 + 10 * s, 4096, 20 + s));
    ModelInput in{st.back().get(), prompts.back(), false};
    ASSERT_TRUE(model->forward(std::span<const ModelInput>(&in, 1), out).is_ok());
  }
  const int64_t r0 = model->decode_graph_replays(), c0 = model->decode_graphs_captured();
  model->reset_step_times();
  const int32_t t[3] = {3, 4, 5};
  auto steps = [&](int n) {
    for (int step = 0; step < n; ++step) {
      std::vector<ModelInput> batch;
      for (int s = 0; s < 3; ++s) batch.push_back({st[s].get(), std::span<const int32_t>(&t[s], 1), false});
      ASSERT_TRUE(model->forward(batch, out).is_ok());
    }
  };
  steps(4);
  EXPECT_EQ(model->decode_graph_replays() - r0, 3);
  EXPECT_EQ(model->decode_graphs_captured() - c0, 1);
  EXPECT_EQ(model->step_times().captures, 1);
  CudaTuning other;
  other.attn_split = 512;
  ASSERT_TRUE(model->set_tuning(other).is_ok());
  steps(2);
  EXPECT_EQ(model->decode_graph_replays() - r0, 5);
  EXPECT_EQ(model->decode_graphs_captured() - c0, 2) << "a tuning change kept the graphs of the old knobs";
  ASSERT_TRUE(model->set_tuning(other).is_ok());
  steps(1);
  EXPECT_EQ(model->decode_graphs_captured() - c0, 2) << "the same tuning dropped the graphs";
}

// CudaTuning changes speed, not bits: with the narrow expert kernel (moe_wide_rows -1), groups of
// 16 (the default), 32 or 64 rows give bitwise the same logits; the default picks the wide kernels
// here (>= 32 routed rows), and its profiled (eager, synchronised) step is bitwise the same as
// its graph steps. Wide against narrow: another fp32 sum order, 1e-6 apart per op (the layer
// ops test), which FP8 re-quantisation of the next linears' inputs and top-k routing flips grow
// by the head, as for chunked against one-shot prefill (cuda_v4_model_test): the same bounds,
// rel RMS <= 0.04 and argmax agreement >= 90% (measured on the H200: 1.4% rel RMS).
// 8 experts and 64 decoding sequences put ~48 rows on each expert (what an expert-parallel slice
// sees at large batch), the 96-token prefills ~72; the last layer routes by score, the first
// three by hash.
TEST_F(V4Synthetic, TuningChangesNoBits) {
  auto model = small_model(4, 8, 3);
  ASSERT_TRUE(model);
  constexpr int kSeqs = 64, kSteps = 3;
  auto run_batch = [&](const CudaTuning& t) {
    Status ts = model->set_tuning(t);
    EXPECT_TRUE(ts.is_ok()) << ts.to_string();
    model->reset_step_times();
    std::vector<std::unique_ptr<ModelState>> st;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<float> all;
    v4::ForwardOutput out;
    for (int s = 0; s < kSeqs; ++s) {
      st.push_back(model->new_state());
      prompts.push_back(tokens(96, 4096, 100 + s));
      ModelInput in{st.back().get(), prompts.back(), false};
      Status f = model->forward(std::span<const ModelInput>(&in, 1), out);
      EXPECT_TRUE(f.is_ok()) << f.to_string();
      all.insert(all.end(), out.logits.begin(), out.logits.end());
    }
    std::vector<int32_t> next(kSeqs);
    for (int step = 0; step < kSteps; ++step) {  // the second step is captured, the third replayed
      std::vector<ModelInput> batch;
      for (int s = 0; s < kSeqs; ++s) {
        next[s] = 2 + (s * 31 + step * 7) % 4000;
        batch.push_back({st[s].get(), std::span<const int32_t>(&next[s], 1), false});
      }
      Status f = model->forward(batch, out);
      EXPECT_TRUE(f.is_ok()) << f.to_string();
      all.insert(all.end(), out.logits.begin(), out.logits.end());
    }
    return all;
  };
  CudaTuning narrow;
  narrow.moe_wide_rows = -1;
  const std::vector<float> ref = run_batch(narrow);
  ASSERT_EQ(ref.size(), size_t{kSeqs} * (1 + kSteps) * 4096);
  for (int rows : {32, 64}) {
    CudaTuning t = narrow;
    t.moe_group_rows = rows;
    EXPECT_TRUE(run_batch(t) == ref) << "groups of " << rows << " rows change the logits";
  }
  const std::vector<float> wide = run_batch({});
  ASSERT_EQ(wide.size(), ref.size());
  double num = 0, den = 0;
  size_t agree = 0;
  const size_t rows = ref.size() / 4096;
  for (size_t r = 0; r < rows; ++r) {
    const auto a = wide.begin() + r * 4096, b = ref.begin() + r * 4096;
    for (size_t i = 0; i < 4096; ++i) {
      ASSERT_TRUE(std::isfinite(a[i])) << r << "," << i;
      num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      den += double(b[i]) * b[i];
    }
    agree += std::max_element(a, a + 4096) - a == std::max_element(b, b + 4096) - b;
  }
  const double rel = std::sqrt(num / den);
  std::printf("wide vs narrow expert kernels: logits rel RMS %.3g, argmax agrees on %zu of %zu rows\n", rel, agree, rows);
  EXPECT_LE(rel, 0.04);
  EXPECT_GE(agree, rows * 9 / 10);
  CudaTuning unpacked;
  unpacked.act_pack = false;  // every linear quantises / casts its own input: the same bits
  EXPECT_TRUE(run_batch(unpacked) == wide) << "the norms' packed FP8 / bf16 forms change the logits";
  // A 300-token prefill (past the grouped wgmma's 256 rows: wo_a per group on cuBLASLt): with
  // act_pack the groups' input is quantised once, group-major, and wo_b's straight from the
  // groups' outputs (no transposed copies); without, each from its transposed copy. Same bits.
  auto prefill = [&](const CudaTuning& t) {
    Status ts = model->set_tuning(t);
    EXPECT_TRUE(ts.is_ok()) << ts.to_string();
    auto st = model->new_state();
    const std::vector<int32_t> prompt = tokens(300, 4096, 77);
    ModelInput in{st.get(), prompt, true};
    v4::ForwardOutput out;
    Status f = model->forward(std::span<const ModelInput>(&in, 1), out);
    EXPECT_TRUE(f.is_ok()) << f.to_string();
    return out.logits;
  };
  const std::vector<float> long_packed = prefill({});
  ASSERT_EQ(long_packed.size(), size_t{300} * 4096);
  EXPECT_TRUE(long_packed == prefill(unpacked)) << "the grouped wo_a's group-major FP8 input changes the logits";
  CudaTuning p;
  p.profile = true;
  EXPECT_TRUE(run_batch(p) == wide) << "the profiled step changes the logits";
  const StepTimes st = model->step_times();
  const StepTimes* times = &st;
  EXPECT_EQ(times->graph_steps, 0) << "profiled steps run eagerly";
  ASSERT_FALSE(times->parts_s.empty());
  double sum = 0;
  for (const auto& [name, s] : times->parts_s) {
    EXPECT_GE(s, 0.0) << name;
    sum += s;
  }
  EXPECT_GT(sum, 0.0);
  CudaTuning bad;
  bad.moe_group_rows = 48;
  EXPECT_FALSE(model->set_tuning(bad).is_ok());
  bad = {};
  bad.moe_wide_rows = -2;
  EXPECT_FALSE(model->set_tuning(bad).is_ok());
  bad = {};
  bad.fp8_wgmma_rows = -2;
  EXPECT_FALSE(model->set_tuning(bad).is_ok());
  bad = {};
  bad.fp8_wgmma_max_rows = 257;
  EXPECT_FALSE(model->set_tuning(bad).is_ok());
  bad = {};
  bad.route_gemm_rows = -2;
  EXPECT_FALSE(model->set_tuning(bad).is_ok());
  bad = {};
  bad.moe_fp8_max_rows = 96;
  EXPECT_FALSE(model->set_tuning(bad).is_ok());
  bad = {};
  bad.bf16_gemv_max_n = -2;
  EXPECT_FALSE(model->set_tuning(bad).is_ok());
}

// The mHC post making the next sub-layer's hc_pre partials in its own launch (up to 16 tokens:
// CudaTuning::hc_post_partial) changes no bits: a 12-token prefill (every post fused) and a
// 40-token one (none), then decode steps of 5 and 16 sequences (the second step captured, the
// third replayed), with the knob on and off.
TEST_F(V4Synthetic, HcPostPartialsChangeNoBits) {
  auto model = small_model(4, 8, 13);
  ASSERT_TRUE(model);
  auto run = [&](bool fused, int seqs) {
    CudaTuning t;
    t.hc_post_partial = fused;
    Status ts = model->set_tuning(t);
    EXPECT_TRUE(ts.is_ok()) << ts.to_string();
    std::vector<std::unique_ptr<ModelState>> st;
    std::vector<float> all;
    v4::ForwardOutput out;
    std::vector<std::vector<int32_t>> prompts;
    for (int s = 0; s < seqs; ++s) {
      st.push_back(model->new_state());
      prompts.push_back(tokens(s % 2 ? 12 : 40, 4096, 300 + s));
      ModelInput in{st.back().get(), prompts.back(), false};
      Status f = model->forward(std::span<const ModelInput>(&in, 1), out);
      EXPECT_TRUE(f.is_ok()) << f.to_string();
      all.insert(all.end(), out.logits.begin(), out.logits.end());
    }
    std::vector<int32_t> next(seqs);
    for (int step = 0; step < 3; ++step) {
      std::vector<ModelInput> batch;
      for (int s = 0; s < seqs; ++s) {
        next[s] = 2 + (s * 17 + step * 5) % 4000;
        batch.push_back({st[s].get(), std::span<const int32_t>(&next[s], 1), false});
      }
      Status f = model->forward(batch, out);
      EXPECT_TRUE(f.is_ok()) << f.to_string();
      all.insert(all.end(), out.logits.begin(), out.logits.end());
    }
    return all;
  };
  for (int seqs : {5, 16}) {
    const std::vector<float> plain = run(false, seqs), fused = run(true, seqs);
    ASSERT_EQ(plain.size(), size_t(seqs) * 4 * 4096);
    for (float v : plain) ASSERT_TRUE(std::isfinite(v));
    EXPECT_TRUE(fused == plain) << seqs << " sequences: the fused posts change the logits";
  }
}

// Model::fill_synthetic_state (the bench's --fill-state): a fresh state filled as if 3,000 tokens
// had been consumed decodes like any other, alone and batched with a prefilled sequence: finite
// logits, lengths advanced by one; a used state or a negative length is refused.
TEST_F(V4Synthetic, FilledStateDecodes) {
  auto model = small_model(4, 8, 11);
  ASSERT_TRUE(model);
  auto filled = model->new_state(), real = model->new_state();
  ASSERT_TRUE(filled && real);
  Status f = model->fill_synthetic_state(*filled, 3000, 5);
  ASSERT_TRUE(f.is_ok()) << f.to_string();
  EXPECT_EQ(filled->length(), 3000);
  EXPECT_FALSE(model->fill_synthetic_state(*filled, 10, 5).is_ok()) << "a used state";
  EXPECT_FALSE(model->fill_synthetic_state(*real, -1, 5).is_ok()) << "a negative length";
  const std::vector<int32_t> prompt = tokens(70, 4096, 4);
  v4::ForwardOutput out;
  ModelInput pre{real.get(), prompt, false};
  ASSERT_TRUE(model->forward(std::span<const ModelInput>(&pre, 1), out).is_ok());
  const int32_t t0 = 11, t1 = 12;
  for (int step = 0; step < 3; ++step) {
    std::vector<ModelInput> batch{{filled.get(), std::span<const int32_t>(&t0, 1), false}};
    if (step > 0) batch.push_back({real.get(), std::span<const int32_t>(&t1, 1), false});
    Status d = model->forward(batch, out);
    ASSERT_TRUE(d.is_ok()) << d.to_string();
    int bad = 0;
    for (float x : out.rows()) bad += !std::isfinite(x);
    EXPECT_EQ(bad, 0) << "step " << step;
  }
  EXPECT_EQ(filled->length(), 3003);
  EXPECT_EQ(real->length(), 72);
}

// A sequence's state lives in stream-ordered device memory (DeviceBuffer::ordered_zeros): making,
// growing, cloning and freeing it never waits for the device, so the engine can admit and retire
// sequences while a step runs. A host callback holds a blocking stream (as the model's are) for up
// to 5 s; every state call must return while it holds, the stream still busy after them (a call
// that waited for the device, as cudaFree or a pageable upload does, would have waited the hold
// out). Then the states made behind the hold decode like any other.
TEST_F(V4Synthetic, StateMemoryNeverWaitsForTheDevice) {
  auto model = small_model(4, 8, 11);
  ASSERT_TRUE(model);
  void* stream = cuda::stream_create();
  ASSERT_NE(stream, nullptr);
  std::atomic<int> release{0};
  auto hold = [](void* p) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!static_cast<std::atomic<int>*>(p)->load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  };
  ASSERT_EQ(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), hold, &release), cudaSuccess);
  std::unique_ptr<ModelState> kept;
  {
    auto a = model->new_state();
    ASSERT_TRUE(a);
    auto* gs = dynamic_cast<v4gpu::GpuSequenceState*>(a.get());
    ASSERT_NE(gs, nullptr);
    int grown = 0;
    for (size_t l = 0; l < gs->num_layers(); ++l) {
      v4gpu::GpuLayerState& ls = gs->layer(l);
      if (!ls.has_kv) continue;
      ASSERT_TRUE(ls.kv.reserve(1000).is_ok());
      ASSERT_TRUE(ls.kv.reserve(3000).is_ok());
      ++grown;
    }
    EXPECT_GT(grown, 0);
    auto b = a->clone();
    ASSERT_TRUE(b);
    kept = model->new_state();
    ASSERT_TRUE(kept);
  }  // a and b freed
  const cudaError_t busy = cudaStreamQuery(static_cast<cudaStream_t>(stream));
  cudaGetLastError();
  EXPECT_EQ(busy, cudaErrorNotReady) << "a state call waited for the device";
  release = 1;
  ASSERT_TRUE(cuda::stream_synchronize(stream));
  cuda::stream_destroy(stream);
  // The state made behind the hold: zeroed in order, it prefills and decodes to finite logits.
  const std::vector<int32_t> prompt = tokens(33, 4096, 3);
  v4::ForwardOutput out;
  ModelInput pre{kept.get(), prompt, false};
  ASSERT_TRUE(model->forward(std::span<const ModelInput>(&pre, 1), out).is_ok());
  const int32_t t = 7;
  ModelInput dec{kept.get(), std::span<const int32_t>(&t, 1), false};
  ASSERT_TRUE(model->forward(std::span<const ModelInput>(&dec, 1), out).is_ok());
  int bad = 0;
  for (float x : out.rows()) bad += !std::isfinite(x);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(kept->length(), 34);
}

// The compressed entries' growth (no device needed): at least 1.5x a time, never more than the
// rows asked for rounded up to 64, so a context of 4 x 2^k tokens (2^k + 1 rows) no longer holds
// 2^(k+1) rows.
TEST(GpuCompressorState, GrownCapacity) {
  using v4gpu::GpuCompressorState;
  EXPECT_EQ(GpuCompressorState::grown_capacity(16, 16), 16) << "room already";
  EXPECT_EQ(GpuCompressorState::grown_capacity(0, 1), 64);
  EXPECT_EQ(GpuCompressorState::grown_capacity(16, 8193), 8256) << "a 32k context filled at once";
  EXPECT_EQ(GpuCompressorState::grown_capacity(8256, 8257), 12416) << "1.5x past the last";
  EXPECT_EQ(GpuCompressorState::grown_capacity(64, 65), 128);
  // Decode's one row at a time from 16: logarithmically many growths, each within 1.5x of the need.
  int64_t cap = 16, growths = 0;
  for (int64_t rows = 1; rows <= 8193; ++rows) {
    const int64_t next = GpuCompressorState::grown_capacity(cap, rows);
    if (next != cap) ++growths;
    cap = next;
    ASSERT_GE(cap, rows);
    ASSERT_LE(cap, std::max<int64_t>(64, rows * 3 / 2 + 64)) << rows;
  }
  EXPECT_LE(growths, 18);
}

}  // namespace
}  // namespace deepinfer
