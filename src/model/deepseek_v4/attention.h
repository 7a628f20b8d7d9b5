// One V4 attention sublayer over a packed batch (V4-MODEL.md 2.3-2.6): q-LoRA with per-head
// RMS norm, one shared K=V head, partial interleaved RoPE, per-head sinks, sliding window plus
// compressed entries (CSA: top-k by the lightning indexer; HCA: all visible), inverse rotation
// of the output and the grouped low-rank output projection. Reads and appends each sequence's
// LayerState.
#pragma once

#include <span>

#include "backend/backend.h"
#include "model/deepseek_v4/batch.h"
#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/state.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::v4 {

/// h is [N, d] (the normed sublayer input); out is [N, d]. states[i] belongs to layout.seqs[i].
void attention_forward(CpuOps& ops, const V4Config& c, const BlockWeights& w, const Rope& rope,
                       const BatchLayout& layout, std::span<LayerState* const> states, const float* h, float* out);

/// One query's heads against shared K=V rows with a per-head sink logit (zero value), one softmax:
/// o[h] = sum_r softmax(q_h . row_r * scale, sink_h)_r row_r, then the inverse RoPE at `pos`.
/// q and o are [H, D]; `logits` is scratch of rows.size() values.
void sink_attention(const float* q, int64_t H, int64_t D, const std::vector<const float*>& rows,
                    const float* sinks, float scale, const Rope& rope, int64_t pos, std::vector<float>& logits,
                    float* o);

/// Grouped low-rank output projection: group g's H*D/G inputs -> wo_a rows [g*R, (g+1)*R), then wo_b.
/// o is [N, H*D], out [N, wo_b.rows]. act_block > 0: wo_b's input is rounded through FP8 per
/// act_block along K first (reference rounding; wo_a's input is not: the reference runs it in bf16).
void grouped_output(CpuOps& ops, const float* o, int64_t N, int64_t HD, int64_t G, int64_t R, const Weight& wo_a,
                    const Weight& wo_b, float* out, int64_t act_block = 0);

/// Lightning-indexer selection for one query: the top `k` of scores[0, n) (ties: lower index
/// first), returned in ascending index order.
std::vector<int64_t> select_top_k(const float* scores, int64_t n, int64_t k);

}  // namespace deepinfer::v4
