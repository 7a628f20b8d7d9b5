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

/// Lightning-indexer selection for one query: the top `k` of scores[0, n) (ties: lower index
/// first), returned in ascending index order.
std::vector<int64_t> select_top_k(const float* scores, int64_t n, int64_t k);

}  // namespace deepinfer::v4
