// V41Config: DeepSeek-V4.1 (model_type "deepseek_v41"), parsed from the composite config.json
// (top-level model_type / quantization_config, architecture in `text_config`; V4-MODEL.md 1.3
// and section 7). Validated: every layer with ratio > 0 has a KV source at or before it with the
// same ratio, KV sources are index sources, the candidate pool covers index_topk
// (tools/reference/README.md, open points 3-5).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/deepseek_v4/config.h"

namespace deepinfer::v41 {

struct V41Config {
  int64_t vocab_size = 0, hidden = 0, num_layers = 0, num_heads = 0, head_dim = 0, rope_dim = 0;
  int64_t q_lora_rank = 0, o_groups = 0, o_lora_rank = 0, window = 0;
  std::vector<int64_t> ratios;          // per layer: 0 (window only), 2, 1
  std::vector<int64_t> kv_sources;      // layers owning a compressor (and the index keys)
  std::vector<int64_t> index_sources;   // layers scoring the index keys
  int64_t candidate_source = -1, candidate_topk_blocks = 0, candidate_block_size = 1;
  int64_t index_n_heads = 0, index_head_dim = 0, index_topk = 0;
  v4::RopeConfig rope_main, rope_compress;
  int64_t hc_mult = 4, hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6, rms_eps = 1e-20;
  int64_t n_routed_experts = 0, n_shared_experts = 1, experts_per_tok = 0, moe_inter = 0;
  std::string scoring_func = "sqrtsoftplus";
  bool norm_topk_prob = true;
  double routed_scaling = 1.0, swiglu_limit = 0.0, gate_temp = 1.0;
  // Engram
  std::vector<int64_t> engram_layers, engram_num_embeddings;
  int64_t engram_max_ngram = 1, engram_vocab_size = 0, engram_n_heads = 0, engram_head_dim = 0;
  int64_t engram_pad_id = 2, engram_compressed_vocab = 0;
  // DSpark drafter (weights only for now). dspark_n_routed_experts / dspark_num_experts_per_tok 0:
  // the backbone's (as [O]'s get_moe_config).
  int64_t num_mtp_layers = 0, dspark_n_routed_experts = 0, dspark_experts_per_tok = 0, dspark_markov_rank = 0;
  int64_t dspark_block_size = 0, dspark_noise_token_id = -1;
  std::vector<int64_t> dspark_target_layers;
  bool tie_word_embeddings = false;
  int64_t fp8_block_rows = 128, fp8_block_cols = 128;
  bool expert_fp4 = false;  // quantization_config.expert_dtype == "fp4"
  int64_t bos_token_id = 0, eos_token_id = 1;
  Numerics numerics;  // not in config.json: set from LoadOptions
  /// FP8 block along K of the activation rounding before the FP8/FP4 linears ([O]'s act_quant):
  /// 32 under reference_rounding (unless kv_only), else 0 (none).
  int64_t act_block() const { return numerics.reference_rounding && !numerics.kv_only ? 32 : 0; }

  static Result<V41Config> from_json(const nlohmann::json& j, const std::string& where);
  Status validate() const;
  /// What a checkpoint with DSpark (mtp.*) tensors needs from the config: stages, target layers,
  /// a Markov rank.
  Status validate_dspark() const;
  int64_t dspark_experts() const { return dspark_n_routed_experts > 0 ? dspark_n_routed_experts : n_routed_experts; }
  int64_t dspark_topk() const { return dspark_experts_per_tok > 0 ? dspark_experts_per_tok : experts_per_tok; }

  /// Nearest KV source at or before `layer` (-1: none).
  int64_t kv_source_of(int64_t layer) const;
  bool is_kv_source(int64_t l) const;
  bool is_index_source(int64_t l) const;
  /// Position of `l` in engram_layers (-1: not an Engram layer).
  int64_t engram_index(int64_t l) const;
  /// Position of `l` in kv_sources (-1: not a source).
  int64_t kv_source_slot(int64_t l) const;
};

}  // namespace deepinfer::v41
