// The floor of one DeepSeek-V4 decode step, part by part: what each part of the forward must
// read (weights in the formats the CUDA backend keeps, the state rows it attends) and the
// multiply-adds it must do, so a profile by part (`deepinfer bench --profile`) reads as "this part
// takes N x its floor". Pure functions of the config; the part names are the ones the CUDA
// forward's profile marks use (kParts below), so the two cannot drift apart.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/deepseek_v4/config.h"

namespace deepinfer::v4 {

/// The parts of a forward, in the order the CUDA forward runs (and marks) them.
namespace part {
inline constexpr std::string_view kEmbedding = "embedding";
inline constexpr std::string_view kAttnPre = "attn: mHC pre, norm, wq_a, q norm";
inline constexpr std::string_view kAttnKv = "attn: wkv, kv norm, rope, window rings";
inline constexpr std::string_view kAttnCompressor = "attn: compressor step (decode)";
inline constexpr std::string_view kAttnIndexer = "attn: indexer (q, compressor step, weights)";
inline constexpr std::string_view kAttnQ = "attn: wq_b, q norm, rope";
inline constexpr std::string_view kAttnCore = "attn: attention (top-k select + sparse attention)";
inline constexpr std::string_view kAttnWoA = "attn: grouped wo_a";
inline constexpr std::string_view kAttnPost = "attn: wo_b, mHC post";
inline constexpr std::string_view kMoePre = "moe: mHC pre, norm";
inline constexpr std::string_view kMoeShared = "moe: shared expert";
inline constexpr std::string_view kMoeRouting = "moe: routing, groups, permute";
inline constexpr std::string_view kMoeExperts = "moe: routed experts (MXFP4 grouped w1/w3, SwiGLU, w2)";
inline constexpr std::string_view kMoeCombine = "moe: combine, mHC post";
inline constexpr std::string_view kHead = "head (mHC collapse, norm, logits)";
}  // namespace part

/// One part's floor over a whole decode step (every layer).
struct DecodePartFloor {
  std::string_view part;
  double weight_bytes = 0;  // weights read once: FP8 linears 1 byte + an fp32 scale per 128 x 128,
                            // bf16 2, fp32 4, routed experts MXFP4 (half a byte + a scale byte per
                            // 32) for the expected distinct experts of the batch
  double state_bytes = 0;   // the cache rows the step reads (bf16): window rings, the compressed
                            // entries attention keeps, the CSA indexer's keys
  double fp8_flops = 0;     // on FP8 tensor cores: the FP8 linears and the routed experts
  double bf16_flops = 0;    // on bf16 tensor cores: attention, the indexer's scores, the bf16
                            // projections (compressors, indexer weights, router, head)
  double bytes() const { return weight_bytes + state_bytes; }
  /// Seconds at least: the larger of bytes over `bytes_per_s` and the FLOPs over their rates.
  double floor_s(double bytes_per_s, double fp8_flops_per_s, double bf16_flops_per_s) const;
};

/// Expected distinct routed experts one MoE layer reads for `batch` tokens of top-k routing over E
/// experts: E (1 - (1 - k/E)^batch).
double expected_distinct_experts(const V4Config& c, int64_t batch);

/// State bytes one sequence at `context` tokens reads per decode step over all layers (the window
/// ring rows, HCA's every closed entry or CSA's index_topk kept, CSA's indexer keys; bf16).
double decode_state_bytes_per_sequence(const V4Config& c, int64_t context);

/// The floor of each part (the order of `part`, every part once) of a decode step of `batch`
/// sequences at `context` tokens. Not counted: activations (the mHC residual streams, 64 KB a
/// token, fit the L2 at decode batches), the cache rows written (one per sequence and layer), the
/// embedding rows and tid2eid entries read (a few KB), and work that is neither a read nor a
/// tensor-core FLOP (softmax, top-k, RoPE, the mHC mixes and Sinkhorn).
std::vector<DecodePartFloor> decode_part_floors(const V4Config& c, int64_t batch, int64_t context);

/// The floor of each part of the prefills of `batch` prompts of `prompt_len` tokens from context 0
/// (chunking aside: every weight read once, the experts the rows are expected to reach). The
/// compressors' and the indexer's projections (wkv, wgate, weights_proj) count in the attention
/// part, where the prefill path runs them; no state is read. The parts' FLOPs add up to
/// batch x prefill_flops(prompt_len).
std::vector<DecodePartFloor> prefill_part_floors(const V4Config& c, int64_t batch, int64_t prompt_len);

}  // namespace deepinfer::v4
