// The decode step of the whole model for B sequences at context C, captured as ONE CUDA graph
// (embedding, every layer, final mHC collapse + norm + head) and replayed; step time = graph
// time (median of replays). State (window rings, compressed entries, indexer keys, open
// compressor windows) is pre-filled with random values for context C.
// Position of the new token: p = C + 3 for every sequence, so the step CLOSES a CSA window
// (p % 4 == 3: the compressor pools, normalises, ropes and writes an entry, the costly case,
// 1 step in 4) and does not close an HCA one (p % 128 == 3, as in 127 of 128 steps). CSA
// queries see (p + 1) / 4 = C / 4 + 1 entries (indexer top-512 of them), HCA queries C / 128.
#pragma once

#include "ops.h"

namespace deepinfer::bench {

/// Device bytes the configuration needs beyond the model (state + activations), for skipping.
double decode_config_bytes(const Model& m, int B, int64_t C);
/// Runs one configuration; fills row (tokens_per_s, step_ms, floor_ms, extra). When profile,
/// also times op classes in a serial (unforked) capture and prints them.
void run_decode(Ctx& c, Model& m, int B, int64_t C, bool profile, ResultRow& row);

}  // namespace deepinfer::bench
