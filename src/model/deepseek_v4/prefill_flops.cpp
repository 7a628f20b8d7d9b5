#include "model/deepseek_v4/prefill_flops.h"

#include <algorithm>

namespace deepinfer::v4 {

namespace {

// Closed forms over the query positions p = 0 .. T-1 (n = p + 1 = tokens seen, this one included).

/// sum_n min(n, W): window rows attended.
double sum_window_rows(int64_t T, int64_t W) {
  if (T <= W) return 0.5 * static_cast<double>(T) * static_cast<double>(T + 1);
  return 0.5 * static_cast<double>(W) * static_cast<double>(W + 1) +
         static_cast<double>(T - W) * static_cast<double>(W);
}

/// sum_n floor(n / r): closed compressed entries visible (entry w is visible once w < n / r).
double sum_entries(int64_t T, int64_t r) {
  if (T <= 0) return 0;
  const int64_t q = T / r, rem = T - q * r;
  return static_cast<double>(r) * 0.5 * static_cast<double>(q) * static_cast<double>(q - 1) +
         static_cast<double>(q) * static_cast<double>(rem + 1);
}

/// sum_n min(floor(n / r), K): the entries a CSA query keeps.
double sum_entries_capped(int64_t T, int64_t r, int64_t K) {
  if (T < K * r) return sum_entries(T, r);
  return sum_entries(K * r - 1, r) + static_cast<double>(T - K * r + 1) * static_cast<double>(K);
}

}  // namespace

PrefillFlops prefill_flops(const V4Config& c, int64_t prompt_len) {
  PrefillFlops f;
  if (prompt_len <= 0) return f;
  const double T = static_cast<double>(prompt_len);
  const double d = static_cast<double>(c.hidden), HD = static_cast<double>(c.num_heads * c.head_dim);
  const double D = static_cast<double>(c.head_dim), qr = static_cast<double>(c.q_lora_rank);
  const double orank = static_cast<double>(c.o_groups * c.o_lora_rank);
  const double Hi = static_cast<double>(c.index_n_heads), Di = static_cast<double>(c.index_head_dim);
  const double experts = static_cast<double>(c.n_shared_experts + c.experts_per_tok);
  // Multiply-adds per token of the linears every layer has.
  double common = d * qr + qr * HD + d * D;       // wq_a, wq_b, wkv
  common += orank * (HD / static_cast<double>(c.o_groups));  // wo_a: o_groups blocks of o_lora_rank x HD/o_groups
  common += orank * d;                            // wo_b
  common += experts * 3.0 * d * static_cast<double>(c.moe_inter);  // shared + routed: w1, w3, w2
  common += d * static_cast<double>(c.n_routed_experts);          // router
  double macs_per_token = 0, attn_rows = 0, idx_entries = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    macs_per_token += common;
    attn_rows += sum_window_rows(prompt_len, c.window);
    const AttnKind kind = c.attn_kinds[static_cast<size_t>(l)];
    const int64_t ratio = std::max<int64_t>(c.ratios[static_cast<size_t>(l)], 1);
    if (kind == AttnKind::kHca) {
      macs_per_token += 2.0 * D * d;  // compressor wkv + wgate, no overlap
      attn_rows += sum_entries(prompt_len, ratio);
    } else if (kind == AttnKind::kCsa) {
      macs_per_token += 2.0 * (2.0 * D) * d;   // compressor wkv + wgate, overlapping windows
      macs_per_token += 2.0 * (2.0 * Di) * d;  // indexer compressor (always overlapping)
      macs_per_token += qr * Hi * Di + d * Hi;  // indexer wq_b, weights_proj
      attn_rows += sum_entries_capped(prompt_len, ratio, c.index_topk);
      idx_entries += sum_entries(prompt_len, ratio);
    }
  }
  f.linear = 2.0 * macs_per_token * T;
  f.attention = 4.0 * HD * attn_rows;
  f.indexer = 2.0 * Hi * Di * idx_entries;
  f.head = 2.0 * d * static_cast<double>(c.vocab_size);
  return f;
}

}  // namespace deepinfer::v4
