// The KV compressor of CSA/HCA layers and of the lightning indexer (V4-MODEL.md 2.5): tokens'
// projected rows accumulate in the open window; when it closes, each channel is softmax-pooled
// over the window's rows (CSA: also the previous window's A halves), RMS-normed and roped at the
// window's first position, and appended as one entry.
#pragma once

#include <span>

#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/state.h"

namespace deepinfer::v4 {

struct CompressorParams {
  const std::vector<float>* norm = nullptr;  // [width]
  float eps = 1e-6f;
  const Rope* rope = nullptr;
  // Reference rounding of the emitted entry (after RoPE): 0 none; 1 FP8 per 64 over the first
  // `width - rope dims` (nope) dims; 2 Hadamard then FP4 per 32 over all dims (indexer keys).
  int round_mode = 0;
  int64_t rope_dim = 0;
};

/// Pushes one token's rows (kv and gate of c*width values, gate already including ape[pos % ratio]).
/// Emits an entry into s.entries when the window closes.
void compressor_push(CompressorState& s, const float* kv, const float* gate, const CompressorParams& p);

}  // namespace deepinfer::v4
