// The arithmetic of a DeepSeek-V4 prefill, for the bench's compute floor (`deepinfer bench`:
// FLOPs over the FP8 tensor rate measured in the same run). Pure function of the config; the
// shapes are the checkpoint's (V4-MODEL.md sections 2.3-2.8, load_block in weights.cpp).
#pragma once

#include <cstdint>

#include "model/deepseek_v4/config.h"

namespace deepinfer::v4 {

/// FLOPs (a multiply-add counts 2) of one prompt's prefill, by part.
struct PrefillFlops {
  /// The linears every token runs through, per layer: wq_a, wq_b, wkv, wo_a (grouped: o_groups x
  /// o_lora_rank x heads*head_dim/o_groups), wo_b, the shared experts and the top-k routed experts
  /// (w1, w3, w2: 3 x hidden x moe_inter each), the router (hidden x n_routed_experts, hash layers
  /// too: their weights come from its scores); CSA/HCA layers add the compressor's wkv and wgate
  /// (2 x head_dim rows each on CSA's overlapping windows, head_dim on HCA); CSA layers the indexer's
  /// compressor (wkv, wgate: 2 x index_head_dim rows), wq_b (q_lora_rank -> index heads x dim) and
  /// weights_proj (hidden -> index heads). Exactly proportional to the prompt length.
  double linear = 0;
  /// Attention's q.K and P.V (4 x heads x head_dim per attended row) over each query's rows: the
  /// window (min(p + 1, window) rows at position p), plus HCA's every closed entry
  /// ((p + 1) / ratio) or CSA's index_topk best of them.
  double attention = 0;
  /// The CSA indexer's scores: index heads x index_head_dim multiply-adds per visible entry.
  double indexer = 0;
  /// The LM head (hidden x vocab) for the prompt's last token.
  double head = 0;
  double total() const { return linear + attention + indexer + head; }
};

/// FLOPs of a prefill of `prompt_len` tokens starting at context 0 (chunking does not change
/// them), summed over the config's num_layers layers. Omitted (small, or not tensor-core work):
/// the mHC mixers (hc_mult x hidden -> 24 per site, fp32) and their Sinkhorn, norms, RoPE,
/// softmaxes, the compressors' pooling, top-k selections, the embedding lookup, the MTP / DSpark
/// layers (not run by prefill) and the heads of earlier chunks. Zero for prompt_len <= 0.
PrefillFlops prefill_flops(const V4Config& c, int64_t prompt_len);

}  // namespace deepinfer::v4
