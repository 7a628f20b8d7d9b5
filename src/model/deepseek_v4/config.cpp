#include "model/deepseek_v4/config.h"
#include "loader/json_fields.h"

#include <cmath>
#include <optional>

namespace deepinfer::v4 {

std::string_view attn_kind_name(AttnKind k) {
  switch (k) {
    case AttnKind::kSliding: return "sliding_attention";
    case AttnKind::kCsa: return "compressed_sparse_attention";
    case AttnKind::kHca: return "heavily_compressed_attention";
  }
  return "?";
}

namespace {

using Reader = JsonFields;

Result<RopeConfig> parse_rope_dict(const Reader& r, const nlohmann::json& d, const std::string& name) {
  Reader rr(d, "rope_parameters." + name);
  RopeConfig rc;
  if (!d.is_object()) return r.error("rope_parameters." + name + " must be an object");
  DI_ASSIGN_OR_RETURN(rc.theta, rr.number("rope_theta"));
  DI_ASSIGN_OR_RETURN(std::string type, rr.string("rope_type", std::string("default")));
  if (type == "yarn") {
    rc.yarn = true;
    DI_ASSIGN_OR_RETURN(rc.factor, rr.number("factor"));
    DI_ASSIGN_OR_RETURN(rc.original_max_position, rr.number("original_max_position_embeddings"));
    DI_ASSIGN_OR_RETURN(rc.beta_fast, rr.number("beta_fast", 32.0));
    DI_ASSIGN_OR_RETURN(rc.beta_slow, rr.number("beta_slow", 1.0));
    DI_ASSIGN_OR_RETURN(double af, rr.number("attention_factor", 1.0));
    if (af != 1.0) return r.error("rope_parameters." + name + ".attention_factor must be 1.0 for DeepSeek-V4");
  } else if (type != "default") {
    return r.error("rope_parameters." + name + ".rope_type '" + type + "' is not supported (default or yarn)");
  }
  return rc;
}

}  // namespace

Result<V4Config> V4Config::from_json(const nlohmann::json& j, const std::string& where) {
  Reader r(j, where);
  V4Config c;
  DI_ASSIGN_OR_RETURN(std::string model_type, r.string("model_type"));
  if (model_type != "deepseek_v4")
    return r.error("model_type '" + model_type + "' is not supported (expected 'deepseek_v4')");
  DI_ASSIGN_OR_RETURN(c.vocab_size, r.integer("vocab_size"));
  DI_ASSIGN_OR_RETURN(c.hidden, r.integer("hidden_size"));
  DI_ASSIGN_OR_RETURN(c.num_layers, r.integer("num_hidden_layers"));
  DI_ASSIGN_OR_RETURN(c.num_heads, r.integer("num_attention_heads"));
  DI_ASSIGN_OR_RETURN(int64_t kv_heads, r.integer("num_key_value_heads", 1));
  if (kv_heads != 1) return r.error("num_key_value_heads must be 1 (one shared K=V head), got " + std::to_string(kv_heads));
  DI_ASSIGN_OR_RETURN(c.head_dim, r.integer("head_dim"));
  DI_ASSIGN_OR_RETURN(c.q_lora_rank, r.integer("q_lora_rank"));
  DI_ASSIGN_OR_RETURN(c.o_groups, r.integer("o_groups"));
  DI_ASSIGN_OR_RETURN(c.o_lora_rank, r.integer("o_lora_rank"));
  DI_ASSIGN_OR_RETURN(c.window, r.integer("sliding_window"));
  DI_ASSIGN_OR_RETURN(c.index_n_heads, r.integer("index_n_heads"));
  DI_ASSIGN_OR_RETURN(c.index_head_dim, r.integer("index_head_dim"));
  DI_ASSIGN_OR_RETURN(c.index_topk, r.integer("index_topk"));
  DI_ASSIGN_OR_RETURN(c.hc_mult, r.integer("hc_mult", 4));
  DI_ASSIGN_OR_RETURN(c.hc_sinkhorn_iters, r.integer("hc_sinkhorn_iters", 20));
  DI_ASSIGN_OR_RETURN(c.hc_eps, r.number("hc_eps", 1e-6));
  DI_ASSIGN_OR_RETURN(c.n_routed_experts, r.integer("n_routed_experts"));
  DI_ASSIGN_OR_RETURN(c.n_shared_experts, r.integer("n_shared_experts", 1));
  DI_ASSIGN_OR_RETURN(c.experts_per_tok, r.integer("num_experts_per_tok"));
  DI_ASSIGN_OR_RETURN(c.moe_inter, r.integer("moe_intermediate_size"));
  DI_ASSIGN_OR_RETURN(c.scoring_func, r.string("scoring_func", std::string("sqrtsoftplus")));
  DI_ASSIGN_OR_RETURN(c.norm_topk_prob, r.boolean("norm_topk_prob", true));
  DI_ASSIGN_OR_RETURN(c.routed_scaling, r.number("routed_scaling_factor", 1.0));
  DI_ASSIGN_OR_RETURN(c.swiglu_limit, r.number("swiglu_limit", 0.0));
  DI_ASSIGN_OR_RETURN(c.rms_eps, r.number("rms_norm_eps", 1e-6));
  DI_ASSIGN_OR_RETURN(c.num_mtp_layers, r.integer("num_nextn_predict_layers", 0));
  DI_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.boolean("tie_word_embeddings", false));
  DI_ASSIGN_OR_RETURN(c.bos_token_id, r.integer("bos_token_id", 0));
  DI_ASSIGN_OR_RETURN(c.eos_token_id, r.integer("eos_token_id", 1));
  if (r.has("hidden_act")) {
    DI_ASSIGN_OR_RETURN(std::string act, r.string("hidden_act"));
    if (act != "silu") return r.error("hidden_act '" + act + "' is not supported (silu)");
  }
  if (c.num_layers <= 0 || c.num_layers > 4096) return r.error("num_hidden_layers out of range");

  // ---- rope dims: transformers' partial_rotary_factor or upstream qk_rope_head_dim.
  std::optional<int64_t> rope_dim;
  if (r.has("qk_rope_head_dim")) {
    DI_ASSIGN_OR_RETURN(int64_t v, r.integer("qk_rope_head_dim"));
    rope_dim = v;
  }
  if (r.has("partial_rotary_factor")) {
    DI_ASSIGN_OR_RETURN(double f, r.number("partial_rotary_factor"));
    const auto v = static_cast<int64_t>(std::llround(f * static_cast<double>(c.head_dim)));
    if (rope_dim && *rope_dim != v)
      return r.error("qk_rope_head_dim " + std::to_string(*rope_dim) + " contradicts partial_rotary_factor (" +
                     std::to_string(v) + " dims)");
    rope_dim = v;
  }
  if (!rope_dim) return r.error("missing 'qk_rope_head_dim' or 'partial_rotary_factor'");
  c.rope_dim = *rope_dim;

  // ---- layer schedule.
  int64_t csa_ratio = 4, hca_ratio = 128;
  if (r.has("compress_rates")) {
    const auto& cr = j["compress_rates"];
    if (!cr.is_object()) return r.error("compress_rates must be an object");
    Reader crr(cr, where + ": compress_rates");
    DI_ASSIGN_OR_RETURN(csa_ratio, crr.integer("compressed_sparse_attention", 4));
    DI_ASSIGN_OR_RETURN(hca_ratio, crr.integer("heavily_compressed_attention", 128));
  }
  std::vector<AttnKind> kinds;
  std::vector<int64_t> ratios;
  if (r.has("layer_types")) {
    const auto& lt = j["layer_types"];
    if (!lt.is_array()) return r.error("layer_types must be an array");
    for (const auto& v : lt) {
      if (!v.is_string()) return r.error("layer_types entries must be strings");
      const std::string s = v.get<std::string>();
      if (s == "sliding_attention") kinds.push_back(AttnKind::kSliding), ratios.push_back(0);
      else if (s == "compressed_sparse_attention") kinds.push_back(AttnKind::kCsa), ratios.push_back(csa_ratio);
      else if (s == "heavily_compressed_attention") kinds.push_back(AttnKind::kHca), ratios.push_back(hca_ratio);
      else return r.error("unknown layer type '" + s + "'");
    }
    if (static_cast<int64_t>(kinds.size()) != c.num_layers)
      return r.error("layer_types has " + std::to_string(kinds.size()) + " entries for " +
                     std::to_string(c.num_layers) + " layers");
  }
  if (r.has("compress_ratios")) {
    const auto& cr = j["compress_ratios"];
    if (!cr.is_array()) return r.error("compress_ratios must be an array");
    if (static_cast<int64_t>(cr.size()) < c.num_layers)
      return r.error("compress_ratios has " + std::to_string(cr.size()) + " entries for " +
                     std::to_string(c.num_layers) + " layers");
    std::vector<AttnKind> k2;
    std::vector<int64_t> r2;
    for (int64_t i = 0; i < c.num_layers; ++i) {  // entries past num_layers belong to MTP stages
      if (!cr[i].is_number_integer() || cr[i].get<int64_t>() < 0)
        return r.error("compress_ratios entries must be non-negative integers");
      const int64_t v = cr[i].get<int64_t>();
      // Upstream model.py: ratio 4 overlaps and carries the indexer (CSA); other ratios are HCA.
      k2.push_back(v == 0 ? AttnKind::kSliding : v == 4 ? AttnKind::kCsa : AttnKind::kHca);
      r2.push_back(v);
    }
    if (!kinds.empty() && (kinds != k2 || ratios != r2))
      return r.error("compress_ratios contradicts layer_types/compress_rates");
    kinds = std::move(k2);
    ratios = std::move(r2);
  }
  if (kinds.empty()) return r.error("missing 'layer_types' or 'compress_ratios' (the layer schedule)");
  c.attn_kinds = std::move(kinds);
  c.ratios = std::move(ratios);

  // ---- MoE routing per layer: mlp_layer_types or num_hash_layers.
  std::vector<bool> hash;
  if (r.has("mlp_layer_types")) {
    const auto& mt = j["mlp_layer_types"];
    if (!mt.is_array() || static_cast<int64_t>(mt.size()) != c.num_layers)
      return r.error("mlp_layer_types must be an array with one entry per layer");
    for (const auto& v : mt) {
      const std::string s = v.is_string() ? v.get<std::string>() : "";
      if (s == "hash_moe") hash.push_back(true);
      else if (s == "moe") hash.push_back(false);
      else return r.error("unknown mlp layer type '" + s + "' (hash_moe or moe)");
    }
  }
  if (r.has("num_hash_layers")) {
    DI_ASSIGN_OR_RETURN(int64_t nh, r.integer("num_hash_layers"));
    if (nh < 0 || nh > c.num_layers) return r.error("num_hash_layers out of range");
    std::vector<bool> h2(c.num_layers, false);
    for (int64_t i = 0; i < nh; ++i) h2[i] = true;
    if (!hash.empty() && hash != h2) return r.error("num_hash_layers contradicts mlp_layer_types");
    hash = std::move(h2);
  }
  if (hash.empty()) hash.assign(c.num_layers, false);
  c.hash_moe = std::move(hash);

  // ---- RoPE: rope_parameters {main, compress} or flat rope_theta / compress_rope_theta / rope_scaling.
  // The flat spelling is parsed whenever present; next to rope_parameters it must agree.
  RopeConfig flat_main, flat_compress;
  DI_ASSIGN_OR_RETURN(flat_main.theta, r.number("rope_theta", 10000.0));
  DI_ASSIGN_OR_RETURN(flat_compress.theta, r.number("compress_rope_theta", 160000.0));
  if (r.has("rope_scaling")) {
    const auto& rs = j["rope_scaling"];
    if (!rs.is_object()) return r.error("rope_scaling must be an object");
    Reader rr(rs, where + ": rope_scaling");
    DI_ASSIGN_OR_RETURN(std::string type, rr.string("type", std::string("")));
    if (type.empty()) { DI_ASSIGN_OR_RETURN(type, rr.string("rope_type", std::string("yarn"))); }
    if (type != "yarn") return r.error("rope_scaling type '" + type + "' is not supported (yarn)");
    flat_compress.yarn = true;
    DI_ASSIGN_OR_RETURN(flat_compress.factor, rr.number("factor"));
    DI_ASSIGN_OR_RETURN(flat_compress.original_max_position, rr.number("original_max_position_embeddings"));
    DI_ASSIGN_OR_RETURN(flat_compress.beta_fast, rr.number("beta_fast", 32.0));
    DI_ASSIGN_OR_RETURN(flat_compress.beta_slow, rr.number("beta_slow", 1.0));
  }
  if (r.has("rope_parameters") && j["rope_parameters"].is_object() && j["rope_parameters"].contains("main")) {
    DI_ASSIGN_OR_RETURN(c.rope_main, parse_rope_dict(r, j["rope_parameters"]["main"], "main"));
    if (!j["rope_parameters"].contains("compress")) return r.error("rope_parameters has 'main' but no 'compress'");
    DI_ASSIGN_OR_RETURN(c.rope_compress, parse_rope_dict(r, j["rope_parameters"]["compress"], "compress"));
    if (r.has("rope_theta") && flat_main.theta != c.rope_main.theta)
      return r.error("rope_theta contradicts rope_parameters.main.rope_theta");
    if (r.has("compress_rope_theta") && flat_compress.theta != c.rope_compress.theta)
      return r.error("compress_rope_theta contradicts rope_parameters.compress.rope_theta");
    const RopeConfig& a = flat_compress;
    const RopeConfig& b = c.rope_compress;
    if (r.has("rope_scaling") && (a.yarn != b.yarn || a.factor != b.factor ||
                                  a.original_max_position != b.original_max_position ||
                                  a.beta_fast != b.beta_fast || a.beta_slow != b.beta_slow))
      return r.error("rope_scaling contradicts rope_parameters.compress");
  } else {
    c.rope_main = flat_main;
    c.rope_compress = flat_compress;
  }

  // ---- quantisation (weights' block size; the dtype itself comes from the tensors).
  if (r.has("quantization_config")) {
    const auto& q = j["quantization_config"];
    if (!q.is_object()) return r.error("quantization_config must be an object");
    if (q.contains("weight_block_size")) {
      const auto& b = q["weight_block_size"];
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
          b[0].get<int64_t>() <= 0 || b[1].get<int64_t>() <= 0)
        return r.error("quantization_config.weight_block_size must be two positive integers");
      c.fp8_block_rows = b[0].get<int64_t>();
      c.fp8_block_cols = b[1].get<int64_t>();
    }
  }
  DI_TRY(c.validate().with_context(where));
  return c;
}

Status V4Config::validate() const {
  auto bad = [](const std::string& m) { return Status::invalid_argument(m); };
  if (vocab_size <= 0 || hidden <= 0 || num_heads <= 0 || head_dim <= 0 || q_lora_rank <= 0 || o_groups <= 0 ||
      o_lora_rank <= 0 || window <= 0 || hc_mult <= 0 || n_routed_experts <= 0 || moe_inter <= 0)
    return bad("sizes must be positive");
  if (rope_dim <= 0 || rope_dim % 2 != 0 || rope_dim > head_dim) return bad("rope dims must be even and <= head_dim");
  if (num_heads % o_groups != 0) return bad("num_attention_heads must be divisible by o_groups");
  if (experts_per_tok <= 0 || experts_per_tok > n_routed_experts) return bad("num_experts_per_tok out of range");
  if (scoring_func != "sqrtsoftplus" && scoring_func != "sigmoid" && scoring_func != "softmax")
    return bad("scoring_func '" + scoring_func + "' is not supported (sqrtsoftplus, sigmoid, softmax)");
  if (hc_sinkhorn_iters < 1) return bad("hc_sinkhorn_iters must be >= 1");
  for (size_t i = 0; i < attn_kinds.size(); ++i) {
    if (attn_kinds[i] == AttnKind::kSliding) continue;
    if (ratios[i] <= 0) return bad("layer " + std::to_string(i) + ": compression ratio must be positive");
  }
  bool any_csa = false;
  for (auto k : attn_kinds) any_csa |= k == AttnKind::kCsa;
  if (any_csa && (index_n_heads <= 0 || index_head_dim < rope_dim || index_topk <= 0))
    return bad("indexer sizes out of range (index_head_dim must be >= rope dims)");
  return Status::ok();
}

}  // namespace deepinfer::v4
