#include "model/deepseek_v4/flash_config.h"

#include <algorithm>
#include <charconv>
#include <string>

namespace deepinfer::v4 {

namespace {

// compress_ratios of the 43 backbone layers: [0, 0] + [4, 128] * 20 + [4].
int64_t flash_ratio(int64_t layer) {
  if (layer < 2) return 0;
  return (layer - 2) % 2 == 0 ? 4 : 128;
}

Result<int64_t> parse_count(std::string_view s, int64_t lo, int64_t hi, const char* what, std::string_view spec) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
    return Status::invalid_argument("--synthetic '" + std::string(spec) + "': " + what + " must be an integer in " +
                                    std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + std::string(s) + "'");
  return v;
}

}  // namespace

nlohmann::json flash_config_json(int64_t layers, int64_t experts) {
  nlohmann::json ratios = nlohmann::json::array();
  for (int64_t l = 0; l < layers; ++l) ratios.push_back(flash_ratio(l));
  ratios.push_back(0);  // the MTP stage's entry (past num_hidden_layers), as the preview config has it
  return {
      {"architectures", {"DeepseekV4ForCausalLM"}},
      {"model_type", "deepseek_v4"},
      {"vocab_size", 129280},
      {"hidden_size", 4096},
      {"num_hidden_layers", layers},
      {"num_attention_heads", 64},
      {"num_key_value_heads", 1},
      {"head_dim", 512},
      {"qk_rope_head_dim", 64},
      {"q_lora_rank", 1024},
      {"o_groups", 8},
      {"o_lora_rank", 1024},
      {"sliding_window", 128},
      {"compress_ratios", ratios},
      {"compress_rope_theta", 160000.0},
      {"rope_theta", 10000.0},
      {"rope_scaling",
       {{"type", "yarn"}, {"factor", 16.0}, {"original_max_position_embeddings", 65536}, {"beta_fast", 32},
        {"beta_slow", 1}}},
      {"max_position_embeddings", 1048576},
      {"index_n_heads", 64},
      {"index_head_dim", 128},
      {"index_topk", 512},
      {"hc_mult", 4},
      {"hc_sinkhorn_iters", 20},
      {"hc_eps", 1e-6},
      {"n_routed_experts", experts},
      {"n_shared_experts", 1},
      {"num_experts_per_tok", std::min<int64_t>(6, experts)},
      {"moe_intermediate_size", 2048},
      {"scoring_func", "sqrtsoftplus"},
      {"topk_method", "noaux_tc"},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 1.5},
      {"num_hash_layers", std::min<int64_t>(3, layers)},
      {"swiglu_limit", 10.0},
      {"hidden_act", "silu"},
      {"rms_norm_eps", 1e-6},
      {"num_nextn_predict_layers", 1},
      {"expert_dtype", "fp4"},
      {"quantization_config",
       {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
        {"weight_block_size", {128, 128}}, {"scale_fmt", "ue8m0"}}},
      {"torch_dtype", "bfloat16"},
      {"tie_word_embeddings", false},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"initializer_range", 0.02},
      {"use_cache", true},
  };
}

Result<V4Config> flash_config(int64_t layers, int64_t experts) {
  if (layers < 1 || layers > kFlashLayers)
    return Status::invalid_argument("V4-Flash has 43 layers; asked for " + std::to_string(layers));
  if (experts < 1 || experts > kFlashExperts)
    return Status::invalid_argument("V4-Flash has 256 routed experts; asked for " + std::to_string(experts));
  return V4Config::from_json(flash_config_json(layers, experts), "V4-Flash config");
}

Result<FlashSpec> parse_flash_spec(std::string_view spec) {
  if (spec == "v4-flash-ep8") return FlashSpec{kFlashLayers, kFlashExperts / 8};
  constexpr std::string_view kName = "v4-flash";
  if (spec.substr(0, kName.size()) != kName || (spec.size() > kName.size() && spec[kName.size()] != ':'))
    return Status::invalid_argument("--synthetic '" + std::string(spec) +
                                    "': unknown model (v4-flash[:LAYERS[:EXPERTS]] or v4-flash-ep8)");
  FlashSpec f;
  if (spec.size() == kName.size()) return f;
  std::string_view rest = spec.substr(kName.size() + 1);
  const size_t colon = rest.find(':');
  DI_ASSIGN_OR_RETURN(f.layers, parse_count(rest.substr(0, colon), 1, kFlashLayers, "LAYERS", spec));
  if (colon != std::string_view::npos) {
    DI_ASSIGN_OR_RETURN(f.experts, parse_count(rest.substr(colon + 1), 1, kFlashExperts, "EXPERTS", spec));
  }
  return f;
}

}  // namespace deepinfer::v4
