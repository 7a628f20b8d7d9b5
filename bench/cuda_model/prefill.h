// Prefill of one sequence of T tokens through a prefill model (routed experts as FP8 blocks),
// in chunks of up to 8192 tokens with the state carried (window rows, open compressor windows,
// compressed entries): linears via quantize_act_fp8_t + fp8_linear_lt, bf16 projections via
// bf16_linear_lt, compressor_step with count = chunk, indexer_select with tokens = chunk,
// attention via decode_attention with window_row0 (one entry per query token), MoE via
// moe_sort_tokens + per-expert quantisation + fp8_linear_lt (the host reads the expert offsets
// once per layer: prefill is not a graph). Head on the last token only. Launched eagerly on one
// stream; time = events around the whole prefill (best of the timed runs after a warm-up).
#pragma once

#include "ops.h"

namespace deepinfer::bench {

constexpr int64_t kPrefillChunk = 8192;

/// Device bytes a prefill of T tokens needs beyond the model.
double prefill_config_bytes(const Model& m, int64_t T);
/// Runs one prefill length; fills row. When profile, prints the op-class times of one run.
void run_prefill(Ctx& c, Model& m, int64_t T, bool profile, ResultRow& row);

}  // namespace deepinfer::bench
