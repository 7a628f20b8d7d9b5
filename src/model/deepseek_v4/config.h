// V4Config: the DeepSeek-V4 (model_type "deepseek_v4") architecture, parsed from config.json in
// either spelling that exists: transformers' (layer_types, compress_rates, mlp_layer_types,
// rope_parameters) and DeepSeek's upstream one (compress_ratios, num_hash_layers,
// qk_rope_head_dim, rope_scaling, quantization_config). Where both are present they must agree.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/numerics.h"

namespace deepinfer::v4 {

enum class AttnKind : uint8_t { kSliding, kCsa, kHca };  // window only / ratio 4 + indexer / ratio m'
std::string_view attn_kind_name(AttnKind k);

struct RopeConfig {
  double theta = 10000.0;
  bool yarn = false;
  double factor = 1.0;
  double original_max_position = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

struct V4Config {
  int64_t vocab_size = 0;
  int64_t hidden = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // trailing dims of each head that get RoPE
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t window = 0;
  std::vector<AttnKind> attn_kinds;  // per layer
  std::vector<int64_t> ratios;       // per layer: 0, CSA ratio or HCA ratio
  std::vector<bool> hash_moe;        // per layer: tid2eid routing
  RopeConfig rope_main;              // sliding-window layers, MTP
  RopeConfig rope_compress;          // CSA/HCA layers (YaRN)
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  int64_t hc_mult = 4;
  int64_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 1;
  int64_t experts_per_tok = 0;
  int64_t moe_inter = 0;
  std::string scoring_func = "sqrtsoftplus";
  bool norm_topk_prob = true;
  double routed_scaling = 1.0;
  double swiglu_limit = 0.0;  // 0: no clamp
  double rms_eps = 1e-6;
  int64_t num_mtp_layers = 0;  // as the config says; tensors decide whether an MTP head exists
  bool tie_word_embeddings = false;
  int64_t fp8_block_rows = 128;
  int64_t fp8_block_cols = 128;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  Numerics numerics;  // not in config.json: set from LoadOptions

  /// Parses and validates; `where` names the file in errors.
  static Result<V4Config> from_json(const nlohmann::json& j, const std::string& where);
  Status validate() const;
};

}  // namespace deepinfer::v4
