// A synthetic DeepSeek-V4-Flash checkpoint with the REAL per-layer shapes (hidden 4096, 64 heads
// x 512, rope 64, q-LoRA 1024, o_groups 8 x 1024, experts x 2048, indexer 64 x 128 top-512,
// window 128, ratios 4 / 128) but few layers and experts and a small vocabulary, in the stored
// formats of V4-MODEL.md section 3: FP8 e4m3 dense linears with E8M0 128x128 block scales,
// MXFP4 routed experts (I8 packed e2m1 + E8M0 per 32), bf16 compressor / indexer projections,
// router, embed and head, fp32 mHC, sinks, ape, norms and bias, I64 tid2eid.
// Codes are drawn directly in the stored formats (no float encoding step) with scales picked so
// each linear keeps its input's RMS roughly unchanged: activations stay in range.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "tests/util/checkpoint_writer.h"

namespace deepinfer::testing {

struct V4FlashSpec {
  int64_t layers = 4, experts = 16, top_k = 6, vocab = 2048, hash_layers = 1;
  int64_t index_topk = 512;  // the real V4-Flash's; smaller makes the CSA selection matter at short contexts
  std::vector<int64_t> ratios{0, 4, 128, 4};
  uint64_t seed = 1234;
};

class SyntheticRng {
 public:
  explicit SyntheticRng(uint64_t seed) : s_(seed) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1ull << 24) * 2.f - 1.f; }

 private:
  uint64_t s_;
};

namespace synth {

inline int log2_sqrt(int64_t k) { return static_cast<int>(std::lround(0.5 * std::log2(static_cast<double>(k)))); }

inline RawTensor f32(std::vector<int64_t> shape, SyntheticRng& r, float a, float center = 0.f) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = center + a * r.uniform();
  return f32_tensor(std::move(shape), v);
}

inline RawTensor bf16(int64_t rows, int64_t cols, SyntheticRng& r, float a) {
  std::vector<uint16_t> v(static_cast<size_t>(rows * cols));
  for (uint16_t& x : v) {
    const float f = a * r.uniform();
    uint32_t b;
    std::memcpy(&b, &f, 4);
    x = static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  }
  return raw_tensor("BF16", {rows, cols}, v.data(), v.size() * 2);
}

/// FP8 [rows, cols] + E8M0 [rows/128, cols/128]: codes with exponent field 5..8 (|v| in
/// [0.25, 3.75], RMS ~1.6), block scales 2^-(log2 sqrt(cols) + 1 + {0, 1}).
inline void fp8_linear(TensorMap& t, const std::string& prefix, int64_t rows, int64_t cols, SyntheticRng& r) {
  std::vector<uint8_t> q(static_cast<size_t>(rows * cols));
  for (uint8_t& c : q) {
    const uint64_t x = r.next();
    c = static_cast<uint8_t>(((x & 1) << 7) | ((5 + (x >> 1) % 4) << 3) | ((x >> 8) & 7));
  }
  std::vector<uint8_t> s(static_cast<size_t>((rows / 128) * (cols / 128)));
  for (uint8_t& e : s) e = static_cast<uint8_t>(127 - log2_sqrt(cols) - 1 - static_cast<int>(r.next() % 2));
  t[prefix + ".weight"] = raw_tensor("F8_E4M3", {rows, cols}, q.data(), q.size());
  t[prefix + ".scale"] = raw_tensor("F8_E8M0", {rows / 128, cols / 128}, s.data(), s.size());
}

/// MXFP4 [rows, cols]: random e2m1 nibbles (RMS ~2.9), E8M0 per 32 of 2^-(log2 sqrt(cols) + 2 + {0, 1}).
inline void mxfp4_linear(TensorMap& t, const std::string& prefix, int64_t rows, int64_t cols, SyntheticRng& r) {
  std::vector<uint8_t> q(static_cast<size_t>(rows * cols / 2));
  for (size_t i = 0; i < q.size(); i += 8) {
    uint64_t x = r.next();
    for (size_t j = 0; j < 8 && i + j < q.size(); ++j, x >>= 8) q[i + j] = static_cast<uint8_t>(x);
  }
  std::vector<uint8_t> s(static_cast<size_t>(rows * cols / 32));
  for (uint8_t& e : s) e = static_cast<uint8_t>(127 - log2_sqrt(cols) - 2 - static_cast<int>(r.next() % 2));
  t[prefix + ".weight"] = raw_tensor("I8", {rows, cols / 2}, q.data(), q.size());
  t[prefix + ".scale"] = raw_tensor("F8_E8M0", {rows, cols / 32}, s.data(), s.size());
}

inline float bf16_gain(int64_t cols) { return 0.8f * std::sqrt(3.f / static_cast<float>(cols)); }

}  // namespace synth

inline nlohmann::json v4_flash_config(const V4FlashSpec& s) {
  nlohmann::json layer_types = nlohmann::json::array(), mlp = nlohmann::json::array();
  for (int64_t l = 0; l < s.layers; ++l) {
    const int64_t r = s.ratios[l];
    layer_types.push_back(r == 0 ? "sliding_attention" : r == 4 ? "compressed_sparse_attention"
                                                                : "heavily_compressed_attention");
    mlp.push_back(l < s.hash_layers ? "hash_moe" : "moe");
  }
  const double prf = 64.0 / 512.0;
  return {
      {"architectures", {"DeepseekV4ForCausalLM"}}, {"model_type", "deepseek_v4"},
      {"bos_token_id", 0}, {"eos_token_id", 1},
      {"compress_rates", {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 128}}},
      {"compress_rope_theta", 160000.0}, {"hc_eps", 1e-6}, {"hc_mult", 4}, {"hc_sinkhorn_iters", 20},
      {"head_dim", 512}, {"hidden_size", 4096}, {"index_head_dim", 128}, {"index_n_heads", 64},
      {"index_topk", s.index_topk}, {"layer_types", layer_types}, {"mlp_layer_types", mlp},
      {"max_position_embeddings", 1048576}, {"moe_intermediate_size", 2048}, {"n_routed_experts", s.experts},
      {"n_shared_experts", 1}, {"norm_topk_prob", true}, {"num_attention_heads", 64},
      {"num_experts_per_tok", s.top_k}, {"num_hidden_layers", s.layers}, {"num_key_value_heads", 1},
      {"num_nextn_predict_layers", 0}, {"o_groups", 8}, {"o_lora_rank", 1024}, {"partial_rotary_factor", prf},
      {"q_lora_rank", 1024}, {"qk_rope_head_dim", 64}, {"rms_norm_eps", 1e-6},
      {"rope_parameters",
       {{"compress", {{"attention_factor", 1.0}, {"beta_fast", 32}, {"beta_slow", 1}, {"factor", 16.0},
                      {"original_max_position_embeddings", 65536}, {"partial_rotary_factor", prf},
                      {"rope_theta", 160000.0}, {"rope_type", "yarn"}}},
        {"main", {{"partial_rotary_factor", prf}, {"rope_theta", 10000.0}, {"rope_type", "default"}}}}},
      {"rope_theta", 10000.0}, {"routed_scaling_factor", 1.5}, {"scoring_func", "sqrtsoftplus"},
      {"sliding_window", 128}, {"swiglu_limit", 10.0}, {"tie_word_embeddings", false}, {"vocab_size", s.vocab},
      {"quantization_config",
       {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
        {"weight_block_size", {128, 128}}, {"scale_fmt", "ue8m0"}}}};
}

/// Every tensor of the synthetic checkpoint (bare upstream names).
inline TensorMap v4_flash_tensors(const V4FlashSpec& s) {
  using namespace synth;
  constexpr int64_t d = 4096, H = 64, D = 512, QL = 1024, G = 8, OR = 1024, I = 2048, Hi = 64, Di = 128;
  SyntheticRng r(s.seed);
  TensorMap t;
  t["embed.weight"] = bf16(s.vocab, d, r, 1.f);
  t["head.weight"] = bf16(s.vocab, d, r, bf16_gain(d) * 2.f);
  t["norm.weight"] = f32({d}, r, 0.1f, 1.f);
  t["hc_head_fn"] = f32({4, 4 * d}, r, 0.01f);
  t["hc_head_base"] = f32({4}, r, 0.5f);
  t["hc_head_scale"] = f32({1}, r, 0.5f, 1.f);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "layers." + std::to_string(l), a = p + ".attn", f = p + ".ffn";
    const int64_t ratio = s.ratios[l];
    for (const char* site : {"hc_attn", "hc_ffn"}) {
      t[p + "." + site + "_fn"] = f32({24, 4 * d}, r, 0.01f);
      t[p + "." + site + "_base"] = f32({24}, r, 0.5f);
      t[p + "." + site + "_scale"] = f32({3}, r, 0.5f, 1.f);
    }
    t[p + ".attn_norm.weight"] = f32({d}, r, 0.1f, 1.f);
    t[p + ".ffn_norm.weight"] = f32({d}, r, 0.1f, 1.f);
    t[a + ".attn_sink"] = f32({H}, r, 1.f);
    t[a + ".q_norm.weight"] = f32({QL}, r, 0.1f, 1.f);
    t[a + ".kv_norm.weight"] = f32({D}, r, 0.1f, 1.f);
    fp8_linear(t, a + ".wq_a", QL, d, r);
    fp8_linear(t, a + ".wq_b", H * D, QL, r);
    fp8_linear(t, a + ".wkv", D, d, r);
    fp8_linear(t, a + ".wo_a", G * OR, H * D / G, r);
    fp8_linear(t, a + ".wo_b", d, G * OR, r);
    if (ratio > 0) {
      const int64_t cw = (ratio == 4 ? 2 : 1) * D;
      t[a + ".compressor.wkv.weight"] = bf16(cw, d, r, bf16_gain(d));
      t[a + ".compressor.wgate.weight"] = bf16(cw, d, r, bf16_gain(d));
      t[a + ".compressor.ape"] = f32({ratio, cw}, r, 0.5f);
      t[a + ".compressor.norm.weight"] = f32({D}, r, 0.1f, 1.f);
    }
    if (ratio == 4) {
      const std::string ix = a + ".indexer";
      fp8_linear(t, ix + ".wq_b", Hi * Di, QL, r);
      t[ix + ".weights_proj.weight"] = bf16(Hi, d, r, bf16_gain(d));
      t[ix + ".compressor.wkv.weight"] = bf16(2 * Di, d, r, bf16_gain(d));
      t[ix + ".compressor.wgate.weight"] = bf16(2 * Di, d, r, bf16_gain(d));
      t[ix + ".compressor.ape"] = f32({4, 2 * Di}, r, 0.5f);
      t[ix + ".compressor.norm.weight"] = f32({Di}, r, 0.1f, 1.f);
    }
    t[f + ".gate.weight"] = bf16(s.experts, d, r, bf16_gain(d) * 2.f);
    if (l < s.hash_layers) {
      std::vector<int64_t> ids(static_cast<size_t>(s.vocab * s.top_k));
      std::vector<int64_t> perm(s.experts);
      for (int64_t v = 0; v < s.vocab; ++v) {
        std::iota(perm.begin(), perm.end(), 0);
        for (int64_t i = 0; i < s.top_k; ++i) {
          std::swap(perm[i], perm[i + static_cast<int64_t>(r.next() % (s.experts - i))]);
          ids[v * s.top_k + i] = perm[i];
        }
      }
      t[f + ".gate.tid2eid"] = i64_tensor({s.vocab, s.top_k}, ids);
    } else {
      t[f + ".gate.bias"] = f32({s.experts}, r, 0.1f);
    }
    for (int64_t e = 0; e < s.experts; ++e) {
      const std::string ep = f + ".experts." + std::to_string(e);
      mxfp4_linear(t, ep + ".w1", I, d, r);
      mxfp4_linear(t, ep + ".w2", d, I, r);
      mxfp4_linear(t, ep + ".w3", I, d, r);
    }
    fp8_linear(t, f + ".shared_experts.w1", I, d, r);
    fp8_linear(t, f + ".shared_experts.w2", d, I, r);
    fp8_linear(t, f + ".shared_experts.w3", I, d, r);
  }
  return t;
}

inline void write_v4_flash_checkpoint(const std::string& dir, const V4FlashSpec& s) {
  write_model_dir(dir, v4_flash_config(s), v4_flash_tensors(s));
}

}  // namespace deepinfer::testing
