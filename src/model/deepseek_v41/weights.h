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

// One DSpark drafter stage `mtp.S` (S < num_nextn_predict_layers): a ratio-0 block (window
// attention, no compressor / indexer / Engram) with its own MoE of dspark_n_routed_experts experts,
// plus the stage-0 input side and the last stage's output side. The embedding and the LM head are
// the backbone's. V4.1 has no hc_head here either (deferred mHC: the last FFN's `pre` collapses).
struct DSparkStage {
  V41Block block;                      // block.ratio 0, no compressor/indexer/engram
  // stage 0: main_x = main_norm(main_proj @ concat(mean-of-streams inputs of the target layers))
  std::optional<Weight> main_proj;     // [d, len(dspark_target_layer_ids) * d]
  std::vector<float> main_norm;        // [d]
  // last stage: norm, Markov head, confidence head
  std::vector<float> norm;             // [d]
  std::optional<Weight> markov_embed;  // markov_head.embed [vocab, rank] (0731 V4: markov_w1)
  std::optional<Weight> markov_head;   // markov_head.head  [vocab, rank] (0731 V4: markov_w2)
  std::optional<Weight> confidence;    // confidence_head.proj [1, d + rank]
};

struct V41Weights {
  Weight embed, head;
  std::vector<float> norm;
  std::vector<V41Block> layers;
  std::vector<DSparkStage> dspark;  // empty unless the checkpoint has mtp.* tensors (unused by the forward)
  int64_t dspark_tensors = 0;       // mtp.* tensors bound

  static Result<V41Weights> load(const Checkpoint& ck, const V41Config& cfg);
};

}  // namespace deepinfer::v41
