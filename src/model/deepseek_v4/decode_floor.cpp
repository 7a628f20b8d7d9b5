#include "model/deepseek_v4/decode_floor.h"

#include <algorithm>
#include <cmath>

#include "model/deepseek_v4/prefill_flops.h"

namespace deepinfer::v4 {

namespace {

double fp8_bytes(double rows, double cols) {  // e4m3 + an fp32 scale per 128 x 128 block
  return rows * cols + std::ceil(rows / 128) * std::ceil(cols / 128) * 4;
}
double bf16_bytes(double rows, double cols) { return 2 * rows * cols; }
double hc_site_bytes(double n, double d) {  // fn [(2 + n) n, n d], base [(2 + n) n], scale [3], fp32
  const double mix = (2 + n) * n;
  return 4 * (mix * n * d + mix + 3);
}
double compressor_bytes(double width, bool overlap, double ratio, double d) {  // wkv, wgate bf16; ape, norm fp32
  const double cw = (overlap ? 2 : 1) * width;
  return 2 * bf16_bytes(cw, d) + 4 * (ratio * cw + width);
}

}  // namespace

double DecodePartFloor::floor_s(double bytes_per_s, double fp8_flops_per_s, double bf16_flops_per_s) const {
  const double mem = bytes_per_s > 0 ? bytes() / bytes_per_s : 0;
  const double math = (fp8_flops_per_s > 0 ? fp8_flops / fp8_flops_per_s : 0) +
                      (bf16_flops_per_s > 0 ? bf16_flops / bf16_flops_per_s : 0);
  return std::max(mem, math);
}

double expected_distinct_experts(const V4Config& c, int64_t batch) {
  const double E = static_cast<double>(c.n_routed_experts), k = static_cast<double>(c.experts_per_tok);
  if (E <= 0 || batch <= 0) return 0;
  return E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(batch)));
}

double decode_state_bytes_per_sequence(const V4Config& c, int64_t context) {
  const double T = static_cast<double>(context), D = static_cast<double>(c.head_dim);
  const double Di = static_cast<double>(c.index_head_dim);
  double bytes = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const auto li = static_cast<size_t>(l);
    bytes += std::min(T + 1, static_cast<double>(c.window)) * D * 2;
    const double n = std::floor((T + 1) / static_cast<double>(std::max<int64_t>(c.ratios[li], 1)));
    if (c.attn_kinds[li] == AttnKind::kHca) bytes += n * D * 2;
    if (c.attn_kinds[li] == AttnKind::kCsa) bytes += std::min(n, static_cast<double>(c.index_topk)) * D * 2 + n * Di * 2;
  }
  return bytes;
}

namespace {

DecodePartFloor& find_part(std::vector<DecodePartFloor>& p, std::string_view name) {
  return *std::find_if(p.begin(), p.end(), [&](const DecodePartFloor& f) { return f.part == name; });
}

// The parts' weights and FLOPs of a forward over `tokens` new tokens (rows) in all; `distinct`
// routed experts read per layer; `prefill`: the compressors' and the indexer's projections run
// inside the attention part (attention_seq), at decode in their own parts. Attention's FLOPs and
// the state are the callers'.
std::vector<DecodePartFloor> linear_part_floors(const V4Config& c, double tokens, double distinct, bool prefill) {
  const double B = tokens;
  const double d = static_cast<double>(c.hidden), H = static_cast<double>(c.num_heads);
  const double D = static_cast<double>(c.head_dim), qr = static_cast<double>(c.q_lora_rank);
  const double G = static_cast<double>(c.o_groups), OR = static_cast<double>(c.o_lora_rank);
  const double Hi = static_cast<double>(c.index_n_heads), Di = static_cast<double>(c.index_head_dim);
  const double E = static_cast<double>(c.n_routed_experts), k = static_cast<double>(c.experts_per_tok);
  const double I = static_cast<double>(c.moe_inter), n = static_cast<double>(c.hc_mult);
  const double V = static_cast<double>(c.vocab_size), sharedI = I * static_cast<double>(c.n_shared_experts);
  const double one_expert = 3 * (I * d / 2 + I * d / 32);  // w1, w3, w2: e2m1 codes + an E8M0 byte per 32
  std::vector<DecodePartFloor> p;
  for (std::string_view name : {part::kEmbedding, part::kAttnPre, part::kAttnKv, part::kAttnCompressor, part::kAttnIndexer,
                                part::kAttnQ, part::kAttnCore, part::kAttnWoA, part::kAttnPost, part::kMoePre,
                                part::kMoeShared, part::kMoeRouting, part::kMoeExperts, part::kMoeCombine, part::kHead})
    p.push_back({name});
  auto add = [&](std::string_view name) -> DecodePartFloor& { return find_part(p, name); };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const auto li = static_cast<size_t>(l);
    const AttnKind kind = c.attn_kinds[li];
    const double ratio = static_cast<double>(c.ratios[li]);
    DecodePartFloor& pre = add(part::kAttnPre);
    pre.weight_bytes += hc_site_bytes(n, d) + 4 * d + fp8_bytes(qr, d) + 4 * qr;
    pre.fp8_flops += 2 * B * qr * d;
    DecodePartFloor& kv = add(part::kAttnKv);
    kv.weight_bytes += fp8_bytes(D, d) + 4 * D;
    kv.fp8_flops += 2 * B * D * d;
    DecodePartFloor& cmp = add(prefill ? part::kAttnCore : part::kAttnCompressor);
    if (kind != AttnKind::kSliding) {
      const bool overlap = kind == AttnKind::kCsa;
      cmp.weight_bytes += compressor_bytes(D, overlap, ratio, d);
      cmp.bf16_flops += 2 * B * 2 * (overlap ? 2 : 1) * D * d;
    }
    DecodePartFloor& idx = add(part::kAttnIndexer);
    DecodePartFloor& idx_cmp = add(prefill ? part::kAttnCore : part::kAttnIndexer);
    if (kind == AttnKind::kCsa) {
      idx.weight_bytes += fp8_bytes(Hi * Di, qr);
      idx.fp8_flops += 2 * B * Hi * Di * qr;
      idx_cmp.weight_bytes += compressor_bytes(Di, true, ratio, d) + bf16_bytes(Hi, d);
      idx_cmp.bf16_flops += 2 * B * (2 * 2 * Di * d + Hi * d);
    }
    DecodePartFloor& q = add(part::kAttnQ);
    q.weight_bytes += fp8_bytes(H * D, qr);
    q.fp8_flops += 2 * B * H * D * qr;
    add(part::kAttnCore).weight_bytes += 4 * H;  // sinks
    DecodePartFloor& woa = add(part::kAttnWoA);
    woa.weight_bytes += fp8_bytes(G * OR, H * D / std::max(G, 1.0));
    woa.fp8_flops += 2 * B * OR * H * D;
    DecodePartFloor& post = add(part::kAttnPost);
    post.weight_bytes += fp8_bytes(d, G * OR);
    post.fp8_flops += 2 * B * d * G * OR;
    add(part::kMoePre).weight_bytes += hc_site_bytes(n, d) + 4 * d;
    DecodePartFloor& sh = add(part::kMoeShared);
    sh.weight_bytes += 2 * fp8_bytes(sharedI, d) + fp8_bytes(d, sharedI);
    sh.fp8_flops += 2 * B * 3 * sharedI * d;
    DecodePartFloor& route = add(part::kMoeRouting);
    route.weight_bytes += bf16_bytes(E, d) + 4 * E;
    route.bf16_flops += 2 * B * E * d;
    DecodePartFloor& ex = add(part::kMoeExperts);
    ex.weight_bytes += distinct * one_expert;
    ex.fp8_flops += 2 * B * k * 3 * I * d;
  }
  add(part::kHead).weight_bytes += 4 * (n * n * d + n + 1) + 4 * d + bf16_bytes(V, d);
  return p;
}

}  // namespace

std::vector<DecodePartFloor> decode_part_floors(const V4Config& c, int64_t batch, int64_t context) {
  const double B = static_cast<double>(std::max<int64_t>(batch, 0));
  std::vector<DecodePartFloor> p = linear_part_floors(c, B, expected_distinct_experts(c, batch), false);
  // Attention: the query at position `context` over its rows, the indexer's scores: as a prefill's
  // at that position (prefill_flops' closed forms, the difference of two prompt lengths).
  const PrefillFlops next = prefill_flops(c, context + 1), before = prefill_flops(c, context);
  DecodePartFloor& core = find_part(p, part::kAttnCore);
  core.bf16_flops += B * ((next.attention + next.indexer) - (before.attention + before.indexer));
  core.state_bytes = B * decode_state_bytes_per_sequence(c, context);
  find_part(p, part::kHead).bf16_flops += B * next.head;
  return p;
}

std::vector<DecodePartFloor> prefill_part_floors(const V4Config& c, int64_t batch, int64_t prompt_len) {
  const double B = static_cast<double>(std::max<int64_t>(batch, 0)), P = static_cast<double>(std::max<int64_t>(prompt_len, 0));
  const int64_t rows = std::max<int64_t>(batch, 0) * std::max<int64_t>(prompt_len, 0);
  std::vector<DecodePartFloor> p = linear_part_floors(c, B * P, expected_distinct_experts(c, rows), true);
  const PrefillFlops f = prefill_flops(c, prompt_len);
  find_part(p, part::kAttnCore).bf16_flops += B * (f.attention + f.indexer);
  find_part(p, part::kHead).bf16_flops += B * f.head;
  return p;
}

}  // namespace deepinfer::v4
