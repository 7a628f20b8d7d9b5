// V41Weights: every tensor of a DeepSeek-V4.1 text checkpoint under DeepSeek's bare names
// (tools/reference/README.md item 10), bound and validated against V41Config. Linear weights stay
// in their stored format (FP8 with weight_block_size blocks, MXFP4 experts, BF16/F32); the Engram
// tables stay memory-mapped (FP8 rows with one E8M0 scale per 32 columns, or plain). The blocks
// that are the same as V4's reuse V4's weight types (mHC sites, MoE).
#pragma once

#include <optional>
#include <vector>

#include "loader/checkpoint.h"
#include "model/deepseek_v4/weights.h"
#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/engram.h"

namespace deepinfer::v41 {

struct V41Compressor {  // KV sources only
  Weight wkv;                     // [D, d]
  std::optional<Weight> wgate;    // [D, d], ratio 2 only
  std::vector<float> norm;        // [D]
};

struct V41Indexer {  // index sources
  Weight wq_b;          // [nI * dI, q_lora]
  Weight weights_proj;  // [nI, d]
  std::optional<Weight> wk;        // [dI, D], KV sources only (keys from the compressor latent)
  std::vector<float> k_norm;       // [dI], KV sources only
};

struct V41Attention {
  Weight wq_a, wq_b, wkv, wo_a, wo_b;
  std::vector<float> q_norm, kv_norm, sinks;
  std::optional<V41Compressor> compressor;
  std::optional<V41Indexer> indexer;
};

struct V41Block {
  int64_t ratio = 0;
  std::vector<float> attn_norm, ffn_norm;
  v4::HcWeights hc_attn, hc_ffn;
  V41Attention attn;
  v4::MoeWeights ffn;
  std::optional<EngramWeights> engram;
};

struct V41Weights {
  Weight embed, head;
  std::vector<float> norm;
  std::vector<V41Block> layers;
  int64_t dspark_tensors = 0;  // mtp.* tensors present (counted; their use is a later issue)

  static Result<V41Weights> load(const Checkpoint& ck, const V41Config& cfg);
};

}  // namespace deepinfer::v41
