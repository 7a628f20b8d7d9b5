#include "model/deepseek_v4/weights.h"

#include <unordered_map>

#include "loader/weight_format.h"
#include "model/deepseek_v4/tensor_binder.h"

namespace deepinfer::v4 {

namespace {

using binder::ends_with;
using binder::starts_with;

Result<HcWeights> load_hc(Binder& b, const std::string& p, const V4Config& c) {
  const int64_t n = c.hc_mult, mix = (2 + n) * n;
  HcWeights w;
  DI_ASSIGN_OR_RETURN(w.fn, b.matrix(p + "_fn", mix, n * c.hidden));
  DI_ASSIGN_OR_RETURN(w.base, b.vec(p + "_base", {mix}));
  DI_ASSIGN_OR_RETURN(w.scale, b.vec(p + "_scale", {3}));
  return w;
}

Result<HcHeadWeights> load_hc_head(Binder& b, const std::string& p, const V4Config& c) {
  HcHeadWeights w;
  DI_ASSIGN_OR_RETURN(w.fn, b.matrix(p + "_fn", c.hc_mult, c.hc_mult * c.hidden));
  DI_ASSIGN_OR_RETURN(w.base, b.vec(p + "_base", {c.hc_mult}));
  DI_ASSIGN_OR_RETURN(w.scale, b.vec(p + "_scale", {1}));
  return w;
}

Result<CompressorWeights> load_compressor(Binder& b, const std::string& p, const V4Config& c, int64_t width,
                                          int64_t ratio, bool overlap) {
  const int64_t cw = (overlap ? 2 : 1) * width;
  CompressorWeights w;
  DI_ASSIGN_OR_RETURN(w.wkv, b.linear(p + ".wkv", cw, c.hidden));
  DI_ASSIGN_OR_RETURN(w.wgate, b.linear(p + ".wgate", cw, c.hidden));
  DI_ASSIGN_OR_RETURN(w.ape, b.vec(p + ".ape", {ratio, cw}));
  DI_ASSIGN_OR_RETURN(w.norm, b.vec(p + ".norm.weight", {width}));
  return w;
}

Result<BlockWeights> load_block(Binder& b, const std::string& p, const V4Config& c, AttnKind kind, int64_t ratio,
                                bool hash) {
  BlockWeights w;
  w.kind = kind;
  w.ratio = ratio;
  w.hash = hash;
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
  if (kind != AttnKind::kSliding) {
    DI_ASSIGN_OR_RETURN(auto comp, load_compressor(b, ap + ".compressor", c, D, ratio, kind == AttnKind::kCsa));
    a.compressor = std::move(comp);
  }
  if (kind == AttnKind::kCsa) {
    IndexerWeights iw;
    DI_ASSIGN_OR_RETURN(iw.wq_b, b.linear(ap + ".indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank));
    DI_ASSIGN_OR_RETURN(iw.weights_proj, b.linear(ap + ".indexer.weights_proj", c.index_n_heads, d));
    DI_ASSIGN_OR_RETURN(iw.compressor,
                        load_compressor(b, ap + ".indexer.compressor", c, c.index_head_dim, ratio, true));
    a.indexer = std::move(iw);
  }
  auto& f = w.ffn;
  const std::string fp = p + ".ffn";
  const int64_t E = c.n_routed_experts, I = c.moe_inter;
  DI_ASSIGN_OR_RETURN(f.gate, b.linear(fp + ".gate", E, d));
  if (hash) {
    DI_ASSIGN_OR_RETURN(f.tid2eid, b.table(fp + ".gate.tid2eid", c.vocab_size, c.experts_per_tok, E));
  } else {
    DI_ASSIGN_OR_RETURN(f.bias, b.vec(fp + ".gate.bias", {E}));
  }
  DI_TRY(load_experts(b, fp, E, I, d, c.n_shared_experts, f));
  return w;
}

}  // namespace

Status load_experts(Binder& b, const std::string& fp, int64_t E, int64_t I, int64_t d, int64_t n_shared,
                    MoeWeights& f) {
  for (int64_t e = 0; e < E; ++e) {
    const std::string ep = fp + ".experts." + std::to_string(e);
    DI_ASSIGN_OR_RETURN(Weight w1, b.linear(ep + ".w1", I, d));
    DI_ASSIGN_OR_RETURN(Weight w2, b.linear(ep + ".w2", d, I));
    DI_ASSIGN_OR_RETURN(Weight w3, b.linear(ep + ".w3", I, d));
    f.w1.push_back(std::move(w1));
    f.w2.push_back(std::move(w2));
    f.w3.push_back(std::move(w3));
  }
  const int64_t SI = I * n_shared;
  DI_ASSIGN_OR_RETURN(f.shared_w1, b.linear(fp + ".shared_experts.w1", SI, d));
  DI_ASSIGN_OR_RETURN(f.shared_w2, b.linear(fp + ".shared_experts.w2", d, SI));
  DI_ASSIGN_OR_RETURN(f.shared_w3, b.linear(fp + ".shared_experts.w3", SI, d));
  return Status::ok();
}

std::string canonical_tensor_name(std::string_view name) {
  std::string s(name);
  if (starts_with(s, "model.")) s = s.substr(6);
  // transformers' embed_tokens / lm_head, for the weight and its companion scale alike.
  if (starts_with(s, "embed_tokens.")) return "embed." + s.substr(13);
  if (starts_with(s, "lm_head.")) return "head." + s.substr(8);
  // transformers writes hc_head.hc_{fn,base,scale}; upstream writes hc_head_{fn,base,scale}.
  for (const char* part : {"fn", "base", "scale"}) {
    const std::string hf = std::string("hc_head.hc_") + part;
    if (ends_with(s, hf)) return s.substr(0, s.size() - hf.size()) + "hc_head_" + part;
  }
  // transformers' reverse mapping writes the attention's kv_norm as `attn.norm`.
  if (ends_with(s, ".attn.norm.weight")) return s.substr(0, s.size() - 12) + ".kv_norm.weight";
  return s;
}

Result<V4Weights> V4Weights::load(const Checkpoint& ck, const V4Config& c) {
  DI_ASSIGN_OR_RETURN(TensorTable table, TensorTable::build(ck, canonical_tensor_name));
  Binder b(table, c.fp8_block_rows, c.fp8_block_cols, ck.dir());
  V4Weights w;
  DI_ASSIGN_OR_RETURN(w.embed, b.linear("embed", c.vocab_size, c.hidden));
  if (c.tie_word_embeddings && !table.has("head.weight")) {
    w.head = w.embed;
  } else {
    DI_ASSIGN_OR_RETURN(w.head, b.linear("head", c.vocab_size, c.hidden));
  }
  DI_ASSIGN_OR_RETURN(w.norm, b.vec("norm.weight", {c.hidden}));
  DI_ASSIGN_OR_RETURN(w.hc_head, load_hc_head(b, "hc_head", c));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    b.set_context(" (config.json: layer " + std::to_string(l) + " is " +
                  std::string(attn_kind_name(c.attn_kinds[l])) + (c.hash_moe[l] ? ", hash_moe" : ", moe") + ")");
    DI_ASSIGN_OR_RETURN(BlockWeights bw, load_block(b, "layers." + std::to_string(l), c, c.attn_kinds[l],
                                                    c.ratios[l], c.hash_moe[l]));
    w.layers.push_back(std::move(bw));
  }
  // MTP head: optional (transformers drops `mtp.*` on save), but complete when present.
  if (table.has_prefix("mtp.0.")) {
    b.set_context(" (the checkpoint has mtp.0.* tensors, so the whole MTP head must be present)");
    MtpWeights m;
    DI_ASSIGN_OR_RETURN(m.e_proj, b.linear("mtp.0.e_proj", c.hidden, c.hidden));
    DI_ASSIGN_OR_RETURN(m.h_proj, b.linear("mtp.0.h_proj", c.hidden, c.hidden));
    DI_ASSIGN_OR_RETURN(m.enorm, b.vec("mtp.0.enorm.weight", {c.hidden}));
    DI_ASSIGN_OR_RETURN(m.hnorm, b.vec("mtp.0.hnorm.weight", {c.hidden}));
    DI_ASSIGN_OR_RETURN(m.norm, b.vec("mtp.0.norm.weight", {c.hidden}));
    DI_ASSIGN_OR_RETURN(m.hc_head, load_hc_head(b, "mtp.0.hc_head", c));
    DI_ASSIGN_OR_RETURN(m.block, load_block(b, "mtp.0", c, AttnKind::kSliding, 0, false));
    w.mtp = std::move(m);
  }
  DI_TRY(table.check_all_claimed(ck.dir()));
  return w;
}

}  // namespace deepinfer::v4
