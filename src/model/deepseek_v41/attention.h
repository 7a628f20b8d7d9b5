// One V4.1 attention sublayer over a packed batch (V4-MODEL.md section 7; tools/reference/README.md
// items 4-7): q-LoRA without a per-head q norm, one shared K=V head, the layer's own window, and
// (ratio > 0) the entries of its KV source's shared compressed cache chosen by the indexer: KV
// sources compress and make the index keys, index sources score them (two-level top-k from the
// candidate source on), the other compressed layers reuse the latest index source's choice.
#pragma once

#include <span>

#include "backend/backend.h"
#include "model/deepseek_v4/batch.h"
#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v41/state.h"
#include "model/deepseek_v41/weights.h"

namespace deepinfer::v41 {

/// Selections carried from layer to layer within one forward, per packed token.
struct SelectionCarry {
  std::vector<std::vector<int64_t>> selected;  // compressed entries to attend (ascending)
  std::vector<std::vector<uint8_t>> candidates;  // candidate-source mask over visible entries
};

struct RopePair {
  const v4::Rope* main;      // ratio-0 layers
  const v4::Rope* compress;  // compressed layers, compressed entries, index q/k (YaRN)
};

/// h is [N, d] (the normed sublayer input); out is [N, d]. states[i] belongs to layout.seqs[i].
void attention_forward(CpuOps& ops, const V41Config& c, const V41Block& w, int64_t layer, const RopePair& rope,
                       const v4::BatchLayout& layout, std::span<V41SequenceState* const> states, const float* h,
                       SelectionCarry& carry, float* out);

/// Level one of the two-level top-k for one query: block scores = max over `block` consecutive
/// entries of scores[0, n); the block of entry n-1 is always kept; the best `keep` blocks (ties:
/// lower block) are returned as a mask over [0, n).
std::vector<uint8_t> candidate_mask(const float* scores, int64_t n, int64_t block, int64_t keep);

}  // namespace deepinfer::v41
