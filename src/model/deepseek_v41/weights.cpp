#include "model/deepseek_v41/weights.h"

#include "model/deepseek_v4/tensor_binder.h"

namespace deepinfer::v41 {

namespace {

using v4::Binder;
using v4::TensorTable;

std::string canonical(std::string_view name) {
  std::string s(name);
  if (s.rfind("model.", 0) == 0) s = s.substr(6);
  return s;
}

Result<v4::HcWeights> load_hc(Binder& b, const std::string& p, const V41Config& c) {
  const int64_t n = c.hc_mult, mix = (2 + n) * n;
  v4::HcWeights w;
  DI_ASSIGN_OR_RETURN(w.fn, b.matrix(p + "_fn", mix, n * c.hidden));
  DI_ASSIGN_OR_RETURN(w.base, b.vec(p + "_base", {mix}));
  DI_ASSIGN_OR_RETURN(w.scale, b.vec(p + "_scale", {3}));
  return w;
}

Result<EngramWeights> load_engram(Binder& b, const std::string& p, const V41Config& c, int64_t rows) {
  EngramWeights w;
  const int64_t hd = c.engram_head_dim, cols = (c.engram_max_ngram - 1) * c.engram_n_heads;
  // FP8 tables carry one E8M0 scale per 32 columns of a row: blocks of 1 x 32.
  DI_ASSIGN_OR_RETURN(w.table, b.linear_blocks(p + ".embed", rows, hd, 1, 32));
  DI_ASSIGN_OR_RETURN(w.wkv, b.linear(p + ".wkv", (c.hc_mult + 1) * c.hidden, cols * hd));
  DI_ASSIGN_OR_RETURN(std::vector<float> q, b.vec(p + ".q_weight", {c.hc_mult, c.hidden}));
  DI_ASSIGN_OR_RETURN(std::vector<float> k, b.vec(p + ".k_weight", {c.hc_mult, c.hidden}));
  w.qk_weight.resize(q.size());
  for (size_t i = 0; i < q.size(); ++i) w.qk_weight[i] = q[i] * k[i];
  return w;
}

Result<v4::MoeWeights> load_moe(Binder& b, const std::string& fp, const V41Config& c, int64_t E) {
  v4::MoeWeights f;
  const int64_t d = c.hidden, I = c.moe_inter;
  DI_ASSIGN_OR_RETURN(f.gate, b.linear(fp + ".gate", E, d));
  DI_ASSIGN_OR_RETURN(f.bias, b.vec(fp + ".gate.bias", {E}));
  DI_TRY(v4::load_experts(b, fp, E, I, d, c.n_shared_experts, f));
  return f;
}

// What every block has: norms, the two mHC sites, the window attention, an MoE of E experts.
Result<V41Block> load_core(Binder& b, const std::string& p, const V41Config& c, int64_t E) {
  V41Block w;
  const int64_t d = c.hidden, H = c.num_heads, D = c.head_dim;
  DI_ASSIGN_OR_RETURN(w.attn_norm, b.vec(p + ".attn_norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(w.ffn_norm, b.vec(p + ".ffn_norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(w.hc_attn, load_hc(b, p + ".hc_attn", c));
  DI_ASSIGN_OR_RETURN(w.hc_ffn, load_hc(b, p + ".hc_ffn", c));
  auto& a = w.attn;
  const std::string ap = p + ".attn";
  DI_ASSIGN_OR_RETURN(a.sinks, b.vec(ap + ".attn_sink", {H}));
  DI_ASSIGN_OR_RETURN(a.wq_a, b.linear(ap + ".wq_a", c.q_lora_rank, d));
  DI_ASSIGN_OR_RETURN(a.q_norm, b.vec(ap + ".q_norm.weight", {c.q_lora_rank}));
  DI_ASSIGN_OR_RETURN(a.wq_b, b.linear(ap + ".wq_b", H * D, c.q_lora_rank));
  DI_ASSIGN_OR_RETURN(a.wkv, b.linear(ap + ".wkv", D, d));
  DI_ASSIGN_OR_RETURN(a.kv_norm, b.vec(ap + ".kv_norm.weight", {D}));
  DI_ASSIGN_OR_RETURN(a.wo_a, b.linear(ap + ".wo_a", c.o_groups * c.o_lora_rank, H * D / c.o_groups));
  DI_ASSIGN_OR_RETURN(a.wo_b, b.linear(ap + ".wo_b", d, c.o_groups * c.o_lora_rank));
  DI_ASSIGN_OR_RETURN(w.ffn, load_moe(b, p + ".ffn", c, E));
  return w;
}

Result<V41Block> load_block(Binder& b, const std::string& p, const V41Config& c, int64_t l) {
  DI_ASSIGN_OR_RETURN(V41Block w, load_core(b, p, c, c.n_routed_experts));
  w.ratio = c.ratios[l];
  const int64_t d = c.hidden, D = c.head_dim;
  auto& a = w.attn;
  const std::string ap = p + ".attn";
  const bool kv_src = c.is_kv_source(l), idx_src = c.is_index_source(l);
  if (kv_src) {
    V41Compressor cw;
    DI_ASSIGN_OR_RETURN(cw.wkv, b.linear(ap + ".compressor.wkv", D, d));
    if (w.ratio > 1) {
      DI_ASSIGN_OR_RETURN(Weight g, b.linear(ap + ".compressor.wgate", D, d));
      cw.wgate = std::move(g);
    }
    DI_ASSIGN_OR_RETURN(cw.norm, b.vec(ap + ".compressor.norm.weight", {D}));
    a.compressor = std::move(cw);
  }
  if (idx_src) {
    V41Indexer iw;
    const int64_t nI = c.index_n_heads, dI = c.index_head_dim;
    DI_ASSIGN_OR_RETURN(iw.wq_b, b.linear(ap + ".indexer.wq_b", nI * dI, c.q_lora_rank));
    DI_ASSIGN_OR_RETURN(iw.weights_proj, b.linear(ap + ".indexer.weights_proj", nI, d));
    if (kv_src) {
      DI_ASSIGN_OR_RETURN(Weight wk, b.linear(ap + ".indexer.wk", dI, D));
      iw.wk = std::move(wk);
      DI_ASSIGN_OR_RETURN(iw.k_norm, b.vec(ap + ".indexer.k_norm.weight", {dI}));
    }
    a.indexer = std::move(iw);
  }
  const int64_t ei = c.engram_index(l);
  if (ei >= 0) {
    DI_ASSIGN_OR_RETURN(EngramWeights ew, load_engram(b, p + ".engram", c, c.engram_num_embeddings[ei]));
    w.engram = std::move(ew);
  }
  return w;
}

// Binds `<p>.weight` under the V4.1 name, or under the 0731 V4 name when only that is present.
Result<Weight> linear_either(Binder& b, TensorTable& t, const std::string& p, const std::string& alt, int64_t rows,
                             int64_t cols) {
  if (t.has(p + ".weight") && t.has(alt + ".weight"))
    return Status::invalid_argument("both '" + p + ".weight' and '" + alt + ".weight' are present (one tensor, two spellings)");
  return b.linear(!t.has(p + ".weight") && t.has(alt + ".weight") ? alt : p, rows, cols);
}

Result<DSparkStage> load_dspark_stage(Binder& b, TensorTable& t, const V41Config& c, int64_t s) {
  const std::string p = "mtp." + std::to_string(s);
  const int64_t d = c.hidden, R = c.dspark_markov_rank;
  b.set_context(" (config.json: num_nextn_predict_layers " + std::to_string(c.num_mtp_layers) +
                ", so DSpark stage " + std::to_string(s) + " must be complete; dspark_n_routed_experts " +
                std::to_string(c.dspark_experts()) + ")");
  DSparkStage st;
  DI_ASSIGN_OR_RETURN(st.block, load_core(b, p, c, c.dspark_experts()));
  st.block.ratio = 0;
  if (s == 0) {
    const int64_t n_targets = static_cast<int64_t>(c.dspark_target_layers.size());
    DI_ASSIGN_OR_RETURN(Weight mp, b.linear(p + ".main_proj", d, n_targets * d));
    st.main_proj = std::move(mp);
    DI_ASSIGN_OR_RETURN(st.main_norm, b.vec(p + ".main_norm.weight", {d}));
  }
  if (s == c.num_mtp_layers - 1) {
    DI_ASSIGN_OR_RETURN(st.norm, b.vec(p + ".norm.weight", {d}));
    DI_ASSIGN_OR_RETURN(Weight me, linear_either(b, t, p + ".markov_head.embed", p + ".markov_head.markov_w1",
                                                 c.vocab_size, R));
    DI_ASSIGN_OR_RETURN(Weight mh, linear_either(b, t, p + ".markov_head.head", p + ".markov_head.markov_w2",
                                                 c.vocab_size, R));
    DI_ASSIGN_OR_RETURN(Weight cf, b.linear(p + ".confidence_head.proj", 1, d + R));
    st.markov_embed = std::move(me);
    st.markov_head = std::move(mh);
    st.confidence = std::move(cf);
  }
  return st;
}

}  // namespace

Result<V41Weights> V41Weights::load(const Checkpoint& ck, const V41Config& c) {
  DI_ASSIGN_OR_RETURN(TensorTable table, TensorTable::build(ck, canonical));
  Binder b(table, c.fp8_block_rows, c.fp8_block_cols, ck.dir());
  V41Weights w;
  DI_ASSIGN_OR_RETURN(w.embed, b.linear("embed", c.vocab_size, c.hidden));
  if (c.tie_word_embeddings && !table.has("head.weight")) {
    w.head = w.embed;
  } else {
    DI_ASSIGN_OR_RETURN(w.head, b.linear("head", c.vocab_size, c.hidden));
  }
  DI_ASSIGN_OR_RETURN(w.norm, b.vec("norm.weight", {c.hidden}));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const int64_t src = c.kv_source_of(l);
    b.set_context(" (config.json: layer " + std::to_string(l) + " has compress ratio " + std::to_string(c.ratios[l]) +
                  (c.is_kv_source(l) ? ", is a KV source" : src >= 0 ? ", reads KV source " + std::to_string(src) : "") +
                  (c.is_index_source(l) ? ", is an index source" : "") +
                  (c.engram_index(l) >= 0 ? ", has Engram" : "") + ")");
    DI_ASSIGN_OR_RETURN(V41Block bw, load_block(b, "layers." + std::to_string(l), c, l));
    w.layers.push_back(std::move(bw));
  }
  // DSpark stages (mtp.0 .. mtp.{n-1}): optional, but complete when present; used by a later issue.
  if (table.has_prefix("mtp.")) {
    DI_TRY(c.validate_dspark().with_context(ck.dir() + ": the checkpoint has mtp.* (DSpark) tensors, but config.json"));
    const int64_t before = table.claimed_count();
    for (int64_t s = 0; s < c.num_mtp_layers; ++s) {
      DI_ASSIGN_OR_RETURN(DSparkStage st, load_dspark_stage(b, table, c, s));
      w.dspark.push_back(std::move(st));
    }
    w.dspark_tensors = table.claimed_count() - before;
  }
  DI_TRY(table.check_all_claimed(ck.dir()));
  return w;
}

}  // namespace deepinfer::v41
