#include "model/deepseek_v41/config.h"
#include "loader/json_fields.h"

#include <algorithm>
#include <optional>

namespace deepinfer::v41 {

namespace {

using Reader = JsonFields;

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

Result<V41Config> V41Config::from_json(const nlohmann::json& top, const std::string& where) {
  Reader rt(top, where);
  DI_ASSIGN_OR_RETURN(std::string model_type, rt.string("model_type"));
  if (model_type != "deepseek_v41")
    return rt.error("model_type '" + model_type + "' is not supported here (expected 'deepseek_v41')");
  if (!top.contains("text_config") || !top["text_config"].is_object())
    return rt.error("missing object 'text_config' (the composite deepseek_v41 config)");
  const nlohmann::json& j = top["text_config"];
  Reader r(j, where + ": text_config");
  V41Config c;
  DI_ASSIGN_OR_RETURN(c.vocab_size, r.integer("vocab_size"));
  DI_ASSIGN_OR_RETURN(c.hidden, r.integer("hidden_size"));
  DI_ASSIGN_OR_RETURN(c.num_layers, r.integer("num_hidden_layers"));
  // Checked here, not only in validate(): compress_ratios is cut to this many entries below (a
  // negative count made that resize throw: loader_fuzz).
  if (c.num_layers <= 0 || c.num_layers > 4096)
    return r.error("num_hidden_layers must be in [1, 4096], got " + std::to_string(c.num_layers));
  DI_ASSIGN_OR_RETURN(c.num_heads, r.integer("num_attention_heads"));
  DI_ASSIGN_OR_RETURN(int64_t kv_heads, r.integer("num_key_value_heads", 1));
  if (kv_heads != 1) return r.error("num_key_value_heads must be 1 (one shared K=V head)");
  DI_ASSIGN_OR_RETURN(c.head_dim, r.integer("head_dim"));
  DI_ASSIGN_OR_RETURN(c.rope_dim, r.integer("qk_rope_head_dim"));
  DI_ASSIGN_OR_RETURN(c.q_lora_rank, r.integer("q_lora_rank"));
  DI_ASSIGN_OR_RETURN(c.o_groups, r.integer("o_groups"));
  DI_ASSIGN_OR_RETURN(c.o_lora_rank, r.integer("o_lora_rank"));
  DI_ASSIGN_OR_RETURN(c.window, r.integer("sliding_window"));
  DI_ASSIGN_OR_RETURN(c.ratios, r.ints("compress_ratios", true));
  if (static_cast<int64_t>(c.ratios.size()) < c.num_layers)
    return r.error("compress_ratios has " + std::to_string(c.ratios.size()) + " entries for " +
                   std::to_string(c.num_layers) + " layers");
  // Entries past num_layers belong to the DSpark stages, which are window-only ([O] asserts 0).
  for (size_t i = static_cast<size_t>(c.num_layers); i < c.ratios.size(); ++i)
    if (c.ratios[i] != 0)
      return r.error("compress_ratios[" + std::to_string(i) + "] (DSpark stage " + std::to_string(i - c.num_layers) +
                     ") must be 0: DSpark stages have no compressor");
  c.ratios.resize(c.num_layers);
  DI_ASSIGN_OR_RETURN(c.kv_sources, r.ints("kv_source_layer_ids", true));
  DI_ASSIGN_OR_RETURN(c.index_sources, r.ints("index_source_layer_ids", true));
  DI_ASSIGN_OR_RETURN(c.candidate_source, r.integer("candidate_source_layer_id", -1));
  DI_ASSIGN_OR_RETURN(c.candidate_topk_blocks, r.integer("candidate_topk_blocks", 0));
  DI_ASSIGN_OR_RETURN(c.candidate_block_size, r.integer("candidate_block_size", 1));
  DI_ASSIGN_OR_RETURN(c.index_n_heads, r.integer("index_n_heads"));
  DI_ASSIGN_OR_RETURN(c.index_head_dim, r.integer("index_head_dim"));
  DI_ASSIGN_OR_RETURN(c.index_topk, r.integer("index_topk"));
  DI_ASSIGN_OR_RETURN(c.hc_mult, r.integer("hc_mult", 4));
  DI_ASSIGN_OR_RETURN(c.hc_sinkhorn_iters, r.integer("hc_sinkhorn_iters", 20));
  DI_ASSIGN_OR_RETURN(c.hc_eps, r.number("hc_eps", 1e-6));
  DI_ASSIGN_OR_RETURN(c.rms_eps, r.number("rms_norm_eps", 1e-20));
  DI_ASSIGN_OR_RETURN(c.n_routed_experts, r.integer("n_routed_experts"));
  DI_ASSIGN_OR_RETURN(c.n_shared_experts, r.integer("n_shared_experts", 1));
  DI_ASSIGN_OR_RETURN(c.experts_per_tok, r.integer("num_experts_per_tok"));
  DI_ASSIGN_OR_RETURN(c.moe_inter, r.integer("moe_intermediate_size"));
  DI_ASSIGN_OR_RETURN(c.scoring_func, r.string("scoring_func", std::string("sqrtsoftplus")));
  DI_ASSIGN_OR_RETURN(c.norm_topk_prob, r.boolean("norm_topk_prob", true));
  DI_ASSIGN_OR_RETURN(c.routed_scaling, r.number("routed_scaling_factor", 1.0));
  DI_ASSIGN_OR_RETURN(c.swiglu_limit, r.number("swiglu_limit", 0.0));
  DI_ASSIGN_OR_RETURN(c.gate_temp, r.number("gate_temp", 1.0));
  DI_ASSIGN_OR_RETURN(c.engram_layers, r.ints("engram_layer_ids", false));
  DI_ASSIGN_OR_RETURN(c.engram_num_embeddings, r.ints("engram_num_embeddings", false));
  DI_ASSIGN_OR_RETURN(c.engram_max_ngram, r.integer("engram_max_ngram_size", 1));
  DI_ASSIGN_OR_RETURN(c.engram_vocab_size, r.integer("engram_vocab_size", 0));
  DI_ASSIGN_OR_RETURN(c.engram_n_heads, r.integer("engram_n_heads", 0));
  DI_ASSIGN_OR_RETURN(c.engram_head_dim, r.integer("engram_head_dim", 0));
  // The published config spells it engram_pad_token_id; DeepSeek's code and transformers engram_pad_id.
  DI_ASSIGN_OR_RETURN(int64_t pad_alt, r.integer("engram_pad_id", 2));
  DI_ASSIGN_OR_RETURN(c.engram_pad_id, r.integer("engram_pad_token_id", pad_alt));
  if (r.has("engram_pad_token_id") && r.has("engram_pad_id") && pad_alt != c.engram_pad_id)
    return r.error("engram_pad_token_id contradicts engram_pad_id");
  DI_ASSIGN_OR_RETURN(c.engram_compressed_vocab, r.integer("engram_compressed_vocab_size", 0));
  DI_ASSIGN_OR_RETURN(c.num_mtp_layers, r.integer("num_nextn_predict_layers", 0));
  DI_ASSIGN_OR_RETURN(c.dspark_n_routed_experts, r.integer("dspark_n_routed_experts", 0));
  // The published config spells it dspark_num_experts_per_tok, [O] dspark_n_activated_experts.
  DI_ASSIGN_OR_RETURN(int64_t act_alt, r.integer("dspark_n_activated_experts", 0));
  DI_ASSIGN_OR_RETURN(c.dspark_experts_per_tok, r.integer("dspark_num_experts_per_tok", act_alt));
  if (r.has("dspark_num_experts_per_tok") && r.has("dspark_n_activated_experts") && act_alt != c.dspark_experts_per_tok)
    return r.error("dspark_num_experts_per_tok contradicts dspark_n_activated_experts");
  DI_ASSIGN_OR_RETURN(c.dspark_noise_token_id, r.integer("dspark_noise_token_id", -1));
  DI_ASSIGN_OR_RETURN(c.dspark_markov_rank, r.integer("dspark_markov_rank", 0));
  DI_ASSIGN_OR_RETURN(c.dspark_block_size, r.integer("dspark_block_size", 0));
  DI_ASSIGN_OR_RETURN(c.dspark_target_layers, r.ints("dspark_target_layer_ids", false));
  DI_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.boolean("tie_word_embeddings", false));
  DI_ASSIGN_OR_RETURN(c.bos_token_id, rt.integer("bos_token_id", 0));
  DI_ASSIGN_OR_RETURN(c.eos_token_id, rt.integer("eos_token_id", 1));
  if (r.has("hidden_act")) {
    DI_ASSIGN_OR_RETURN(std::string act, r.string("hidden_act"));
    if (act != "silu") return r.error("hidden_act '" + act + "' is not supported (silu)");
  }
  // RoPE: ratio-0 layers rope_theta without YaRN; compressed layers compress_rope_theta + YaRN.
  DI_ASSIGN_OR_RETURN(c.rope_main.theta, r.number("rope_theta", 10000.0));
  DI_ASSIGN_OR_RETURN(c.rope_compress.theta, r.number("compress_rope_theta", 160000.0));
  if (r.has("rope_scaling")) {
    const auto& rs = j["rope_scaling"];
    if (!rs.is_object()) return r.error("rope_scaling must be an object");
    Reader rr(rs, where + ": text_config.rope_scaling");
    DI_ASSIGN_OR_RETURN(std::string type, rr.string("rope_type", std::string("")));
    if (type.empty()) { DI_ASSIGN_OR_RETURN(type, rr.string("type", std::string("yarn"))); }
    if (type != "yarn") return r.error("rope_scaling type '" + type + "' is not supported (yarn)");
    c.rope_compress.yarn = true;
    DI_ASSIGN_OR_RETURN(c.rope_compress.factor, rr.number("factor"));
    DI_ASSIGN_OR_RETURN(c.rope_compress.original_max_position, rr.number("original_max_position_embeddings"));
    DI_ASSIGN_OR_RETURN(c.rope_compress.beta_fast, rr.number("beta_fast", 32.0));
    DI_ASSIGN_OR_RETURN(c.rope_compress.beta_slow, rr.number("beta_slow", 1.0));
  }
  if (rt.has("quantization_config")) {
    const auto& q = top["quantization_config"];
    if (!q.is_object()) return rt.error("quantization_config must be an object");
    if (q.contains("weight_block_size")) {
      const auto& b = q["weight_block_size"];
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
          b[0].get<int64_t>() <= 0 || b[1].get<int64_t>() <= 0)
        return rt.error("quantization_config.weight_block_size must be two positive integers");
      c.fp8_block_rows = b[0].get<int64_t>();
      c.fp8_block_cols = b[1].get<int64_t>();
    }
    c.expert_fp4 = q.value("expert_dtype", std::string()) == "fp4";
  }
  DI_TRY(c.validate().with_context(where));
  return c;
}

Status V41Config::validate() const {
  auto bad = [](const std::string& m) { return Status::invalid_argument(m); };
  if (vocab_size <= 0 || hidden <= 0 || num_layers <= 0 || num_heads <= 0 || head_dim <= 0 || q_lora_rank <= 0 ||
      o_groups <= 0 || o_lora_rank <= 0 || window <= 0 || hc_mult <= 0 || n_routed_experts <= 0 || moe_inter <= 0)
    return bad("sizes must be positive");
  if (rope_dim <= 0 || rope_dim % 2 || rope_dim > head_dim) return bad("qk_rope_head_dim must be even and <= head_dim");
  if (num_heads % o_groups) return bad("num_attention_heads must be divisible by o_groups");
  if (experts_per_tok <= 0 || experts_per_tok > n_routed_experts) return bad("num_experts_per_tok out of range");
  if (scoring_func != "sqrtsoftplus" && scoring_func != "sigmoid" && scoring_func != "softmax")
    return bad("scoring_func '" + scoring_func + "' is not supported");
  if (gate_temp <= 0) return bad("gate_temp must be positive");
  for (int64_t l = 0; l < num_layers; ++l)
    if (ratios[l] != 0 && ratios[l] != 1 && ratios[l] != 2)
      return bad("layer " + std::to_string(l) + ": compress ratio " + std::to_string(ratios[l]) +
                 " (V4.1 has 0, 2 and 1)");
  for (int64_t s : kv_sources)
    if (s < 0 || s >= num_layers || ratios[s] == 0) return bad("kv_source_layer_ids: layer " + std::to_string(s) + " has no compression");
  for (int64_t s : index_sources)
    if (s < 0 || s >= num_layers || ratios[s] == 0) return bad("index_source_layer_ids: layer " + std::to_string(s) + " has no compression");
  for (int64_t s : kv_sources)
    if (!contains(index_sources, s)) return bad("KV source layer " + std::to_string(s) + " is not an index source");
  for (int64_t l = 0; l < num_layers; ++l) {
    if (ratios[l] == 0) continue;
    const int64_t s = kv_source_of(l);
    if (s < 0) return bad("layer " + std::to_string(l) + " is compressed but no KV source precedes it");
    for (int64_t m = s; m <= l; ++m)
      if (ratios[m] != ratios[l]) return bad("layer " + std::to_string(l) + ": ratio differs from its KV source " + std::to_string(s));
  }
  bool any_compressed = false;
  for (int64_t r : ratios) any_compressed |= r > 0;
  if (any_compressed && (index_n_heads <= 0 || index_head_dim < rope_dim || index_topk <= 0))
    return bad("indexer sizes out of range");
  if (candidate_source >= 0) {
    if (!contains(index_sources, candidate_source)) return bad("candidate_source_layer_id is not an index source");
    const int64_t b = candidate_block_size;
    if (b <= 0 || candidate_topk_blocks <= 0 || candidate_topk_blocks * b - (b - 1) < index_topk)
      return bad("candidate pool (candidate_topk_blocks x candidate_block_size) too small for index_topk");
  }
  if (!engram_layers.empty()) {
    if (engram_num_embeddings.size() != engram_layers.size())
      return bad("engram_num_embeddings needs one entry per engram layer");
    if (engram_max_ngram < 2 || engram_n_heads <= 0 || engram_head_dim <= 0 || engram_vocab_size <= 1 ||
        engram_compressed_vocab <= 0)
      return bad("engram sizes out of range");
    for (int64_t l : engram_layers)
      if (l < 0 || l >= num_layers) return bad("engram_layer_ids out of range");
  }
  if (num_mtp_layers < 0 || dspark_n_routed_experts < 0 || dspark_experts_per_tok < 0 || dspark_markov_rank < 0 ||
      dspark_block_size < 0)
    return bad("DSpark sizes must not be negative");
  if (dspark_topk() > dspark_experts()) return bad("dspark_num_experts_per_tok exceeds the DSpark stages' experts");
  for (int64_t l : dspark_target_layers)
    if (l < 0 || l >= num_layers) return bad("dspark_target_layer_ids: layer " + std::to_string(l) + " out of range");
  if (dspark_noise_token_id >= vocab_size) return bad("dspark_noise_token_id is not in the vocabulary");
  return Status::ok();
}

Status V41Config::validate_dspark() const {
  auto bad = [](const std::string& m) { return Status::invalid_argument(m); };
  if (num_mtp_layers <= 0) return bad("has num_nextn_predict_layers " + std::to_string(num_mtp_layers) + " (need >= 1)");
  if (dspark_target_layers.empty()) return bad("has no dspark_target_layer_ids (stage 0's main_proj input)");
  if (dspark_markov_rank <= 0) return bad("has no positive dspark_markov_rank (the last stage's Markov head)");
  return Status::ok();
}

int64_t V41Config::kv_source_of(int64_t layer) const {
  int64_t best = -1;
  for (int64_t s : kv_sources)
    if (s <= layer) best = std::max(best, s);
  return best;
}
bool V41Config::is_kv_source(int64_t l) const { return contains(kv_sources, l); }
bool V41Config::is_index_source(int64_t l) const { return contains(index_sources, l); }
int64_t V41Config::engram_index(int64_t l) const {
  auto it = std::find(engram_layers.begin(), engram_layers.end(), l);
  return it == engram_layers.end() ? -1 : it - engram_layers.begin();
}
int64_t V41Config::kv_source_slot(int64_t l) const {
  auto it = std::find(kv_sources.begin(), kv_sources.end(), l);
  return it == kv_sources.end() ? -1 : it - kv_sources.begin();
}

}  // namespace deepinfer::v41
