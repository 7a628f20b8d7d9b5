#include "model/deepseek_v41/inventory.h"

#include <unordered_map>

namespace deepinfer::v41 {

namespace {

// The tensors every block has, backbone layer or DSpark stage: norms, both mHC sites and the
// attention core (q-LoRA, shared K=V, sinks, grouped output).
template <class Add>
void add_block_core(Add& add, const V41Config& c, const std::string& p) {
  const int64_t d = c.hidden, H = c.num_heads, D = c.head_dim, n = c.hc_mult, mix = (2 + n) * n;
  add(p + "attn_norm.weight", Shape{d}, false);
  add(p + "ffn_norm.weight", Shape{d}, false);
  for (const char* site : {"hc_attn", "hc_ffn"}) {
    add(p + site + "_fn", Shape{mix, n * d}, false);
    add(p + site + "_base", Shape{mix}, false);
    add(p + site + "_scale", Shape{3}, false);
  }
  add(p + "attn.attn_sink", Shape{H}, false);
  add(p + "attn.wq_a.weight", Shape{c.q_lora_rank, d}, true);
  add(p + "attn.q_norm.weight", Shape{c.q_lora_rank}, false);
  add(p + "attn.wq_b.weight", Shape{H * D, c.q_lora_rank}, true);
  add(p + "attn.wkv.weight", Shape{D, d}, true);
  add(p + "attn.kv_norm.weight", Shape{D}, false);
  add(p + "attn.wo_a.weight", Shape{c.o_groups * c.o_lora_rank, H * D / c.o_groups}, true);
  add(p + "attn.wo_b.weight", Shape{d, c.o_groups * c.o_lora_rank}, true);
}

template <class Add>
void add_routed_experts(Add& add, const std::string& p, int64_t E, int64_t I, int64_t d) {
  for (int64_t e = 0; e < E; ++e) {
    const std::string ep = p + "ffn.experts." + std::to_string(e) + ".";
    add(ep + "w1.weight", Shape{I, d}, true);
    add(ep + "w2.weight", Shape{d, I}, true);
    add(ep + "w3.weight", Shape{I, d}, true);
  }
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const V41Config& c) {
  const int64_t d = c.hidden, D = c.head_dim, n = c.hc_mult;
  const int64_t nI = c.index_n_heads, dI = c.index_head_dim, E = c.n_routed_experts, I = c.moe_inter;
  std::vector<ExpectedTensor> v;
  auto add = [&](std::string name, Shape s, bool lin, TensorGroup g = TensorGroup::kBackbone) {
    v.push_back({std::move(name), std::move(s), lin, g});
  };
  add("embed.weight", {c.vocab_size, d}, true);
  add("head.weight", {c.vocab_size, d}, true);
  add("norm.weight", {d}, false);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    add_block_core(add, c, p);
    if (c.is_kv_source(l)) {
      add(p + "attn.compressor.wkv.weight", {D, d}, true);
      if (c.ratios[l] > 1) add(p + "attn.compressor.wgate.weight", {D, d}, true);
      add(p + "attn.compressor.norm.weight", {D}, false);
      add(p + "attn.indexer.wk.weight", {dI, D}, true);
      add(p + "attn.indexer.k_norm.weight", {dI}, false);
    }
    if (c.is_index_source(l)) {
      add(p + "attn.indexer.wq_b.weight", {nI * dI, c.q_lora_rank}, true);
      add(p + "attn.indexer.weights_proj.weight", {nI, d}, true);
    }
    add(p + "ffn.gate.weight", {E, d}, true);
    add(p + "ffn.gate.bias", {E}, false);
    add_routed_experts(add, p, E, I, c.hidden);
    const int64_t SI = I * c.n_shared_experts;
    add(p + "ffn.shared_experts.w1.weight", {SI, d}, true);
    add(p + "ffn.shared_experts.w2.weight", {d, SI}, true);
    add(p + "ffn.shared_experts.w3.weight", {SI, d}, true);
    const int64_t ei = c.engram_index(l);
    if (ei >= 0) {
      const int64_t cols = (c.engram_max_ngram - 1) * c.engram_n_heads * c.engram_head_dim;
      add(p + "engram.embed.weight", {c.engram_num_embeddings[ei], c.engram_head_dim}, true, TensorGroup::kEngramTable);
      add(p + "engram.wkv.weight", {(n + 1) * d, cols}, true, TensorGroup::kEngramOther);
      add(p + "engram.q_weight", {n, d}, false, TensorGroup::kEngramOther);
      add(p + "engram.k_weight", {n, d}, false, TensorGroup::kEngramOther);
    }
  }
  return v;
}

std::vector<ExpectedTensor> expected_dspark_tensors(const V41Config& c) {
  std::vector<ExpectedTensor> v;
  if (c.num_mtp_layers <= 0 || !c.validate_dspark().is_ok()) return v;
  const int64_t d = c.hidden;
  const int64_t E = c.dspark_experts(), I = c.moe_inter, SI = I * c.n_shared_experts, R = c.dspark_markov_rank;
  const int64_t k = static_cast<int64_t>(c.dspark_target_layers.size());
  auto add = [&](std::string name, Shape s, bool lin) { v.push_back({std::move(name), std::move(s), lin, TensorGroup::kDSpark}); };
  for (int64_t st = 0; st < c.num_mtp_layers; ++st) {
    const std::string p = "mtp." + std::to_string(st) + ".";
    add_block_core(add, c, p);
    add(p + "ffn.gate.weight", {E, d}, true);
    add(p + "ffn.gate.bias", {E}, false);
    add_routed_experts(add, p, E, I, c.hidden);
    add(p + "ffn.shared_experts.w1.weight", {SI, d}, true);
    add(p + "ffn.shared_experts.w2.weight", {d, SI}, true);
    add(p + "ffn.shared_experts.w3.weight", {SI, d}, true);
    if (st == 0) {
      add(p + "main_proj.weight", {d, k * d}, true);
      add(p + "main_norm.weight", {d}, false);
    }
    if (st == c.num_mtp_layers - 1) {
      add(p + "norm.weight", {d}, false);
      add(p + "markov_head.embed.weight", {c.vocab_size, R}, true);
      add(p + "markov_head.head.weight", {c.vocab_size, R}, true);
      add(p + "confidence_head.proj.weight", {1, d + R}, true);
    }
  }
  return v;
}

IndexCheck check_index_names(const V41Config& c, const std::vector<std::string>& names) {
  IndexCheck r;
  const std::vector<ExpectedTensor> exp = expected_tensors(c);
  std::unordered_map<std::string, const ExpectedTensor*> by_name;
  for (const auto& e : exp) by_name[e.name] = &e;
  std::unordered_map<std::string, bool> seen;
  for (const std::string& raw : names) {
    const std::string nm = raw.rfind("model.", 0) == 0 ? raw.substr(6) : raw;
    if (nm.rfind("mtp.", 0) == 0) { ++r.dspark; continue; }
    if (nm.find("vision") != std::string::npos || nm.find("visual") != std::string::npos ||
        nm.find("aligner") != std::string::npos || nm.find("image") != std::string::npos || nm.find("bias_vl") != std::string::npos) {
      ++r.not_checked;
      continue;
    }
    if (by_name.count(nm)) { ++r.matched; seen[nm] = true; continue; }
    if (nm.size() > 6 && nm.substr(nm.size() - 6) == ".scale") {
      auto it = by_name.find(nm.substr(0, nm.size() - 6) + ".weight");
      if (it != by_name.end() && it->second->linear) { ++r.scales; continue; }
    }
    r.unexpected.push_back(raw);
  }
  for (const auto& e : exp) {
    if (!seen.count(e.name)) r.missing.push_back(e.name);
    const uint64_t p = static_cast<uint64_t>(shape_numel(e.shape));
    (e.group == TensorGroup::kBackbone ? r.backbone_params
     : e.group == TensorGroup::kEngramTable ? r.engram_table_params : r.engram_other_params) += p;
  }
  for (const auto& e : expected_dspark_tensors(c)) r.dspark_params += static_cast<uint64_t>(shape_numel(e.shape));
  return r;
}

namespace {
bool ends_with(const std::string& s, std::string_view suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}
bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }
bool is_routed_expert(const std::string& n) { return contains(n, ".ffn.experts."); }
}  // namespace

StoredFormat stored_format(const ExpectedTensor& e) {
  const std::string& n = e.name;
  if (e.group == TensorGroup::kEngramTable) return StoredFormat::kFp8Rows32;
  if (is_routed_expert(n)) return StoredFormat::kMxfp4;
  if (contains(n, ".hc_") || ends_with(n, "attn_sink") || ends_with(n, "gate.bias")) return StoredFormat::kF32;
  for (const char* f8 : {"attn.wq_a.weight", "attn.wq_b.weight", "attn.wkv.weight", "attn.wo_a.weight",
                         "attn.wo_b.weight", "shared_experts.w1.weight", "shared_experts.w2.weight",
                         "shared_experts.w3.weight", "indexer.wq_b.weight", "engram.wkv.weight", "main_proj.weight"})
    if (ends_with(n, f8)) return StoredFormat::kFp8Block32;
  return StoredFormat::kBf16;
}

uint64_t stored_bytes(const ExpectedTensor& e) {
  const uint64_t numel = static_cast<uint64_t>(shape_numel(e.shape));
  const uint64_t rows = e.shape.size() == 2 ? static_cast<uint64_t>(e.shape[0]) : 1;
  const uint64_t cols = e.shape.empty() ? 1 : static_cast<uint64_t>(e.shape.back());
  switch (stored_format(e)) {
    case StoredFormat::kFp8Block32: return numel + ((rows + 31) / 32) * ((cols + 31) / 32);
    case StoredFormat::kMxfp4: return numel / 2 + rows * ((cols + 31) / 32);
    case StoredFormat::kFp8Rows32: return numel + rows * ((cols + 31) / 32);
    case StoredFormat::kBf16: return 2 * numel;
    case StoredFormat::kF32: return 4 * numel;
  }
  return 0;
}

std::vector<MemoryPlan> memory_plans(const V41Config& c, const std::vector<int64_t>& gpu_counts) {
  uint64_t routed = 0, replicated = 0, tables = 0;
  for (const ExpectedTensor& e : expected_tensors(c)) {
    const uint64_t b = stored_bytes(e);
    if (e.group == TensorGroup::kEngramTable) tables += b;
    else if (is_routed_expert(e.name)) routed += b;
    else replicated += b;
  }
  uint64_t ds_routed = 0, ds_replicated = 0;
  for (const ExpectedTensor& e : expected_dspark_tensors(c)) (is_routed_expert(e.name) ? ds_routed : ds_replicated) += stored_bytes(e);
  const v4::StateSizes ss = state_sizes(c);
  const uint64_t E = static_cast<uint64_t>(c.n_routed_experts), Ed = static_cast<uint64_t>(c.dspark_experts());
  std::vector<MemoryPlan> out;
  for (int64_t g : gpu_counts) {
    MemoryPlan p;
    p.gpus = g;
    p.experts_per_gpu = static_cast<int64_t>((E + g - 1) / g);
    p.routed_expert_bytes = E ? routed / E * static_cast<uint64_t>(p.experts_per_gpu) : 0;
    p.replicated_bytes = replicated;
    p.dspark_experts_per_gpu = ds_routed ? static_cast<int64_t>((Ed + g - 1) / g) : 0;
    p.dspark_routed_bytes = ds_routed ? ds_routed / Ed * static_cast<uint64_t>(p.dspark_experts_per_gpu) : 0;
    p.dspark_replicated_bytes = ds_replicated;
    p.weight_bytes_per_gpu = p.routed_expert_bytes + replicated + p.dspark_routed_bytes + p.dspark_replicated_bytes;
    p.engram_table_host_bytes = tables;
    p.state_bytes_per_token = ss.bytes_per_token;
    p.state_bytes_per_sequence = ss.bytes_per_sequence;
    out.push_back(p);
  }
  return out;
}

}  // namespace deepinfer::v41
