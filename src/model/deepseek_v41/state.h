// Per-sequence state of a V4.1 forward:
//   every layer      WindowRing: its own last `window` K=V rows (slot = position % window)
//   every KV source  KvSourceState: the open group of a ratio-2 compressor, the compressed
//                    entries (post-RoPE; read by the source and the layers up to the next source)
//                    and the index keys (post-RoPE; scored by every index source of the group)
//   the sequence     the compressed ids of its last max_ngram - 1 tokens (Engram look-back)
// Index selections and candidate masks are per query and recomputed every step; nothing else is
// carried. Growing parts are v4::RowBlocks (copy-on-write blocks, cheap snapshots).
#pragma once

#include <vector>

#include "model/deepseek_v4/state.h"
#include "model/deepseek_v41/config.h"

namespace deepinfer::v41 {

struct KvSourceState {
  int64_t layer = 0, ratio = 0;
  std::vector<float> part_kv, part_gate;  // [ratio, D] the open group (ratio 2)
  int64_t buffered = 0;
  v4::RowBlocks entries;     // [groups, head_dim]
  v4::RowBlocks index_keys;  // [groups, index_head_dim]
  KvSourceState(int64_t layer, int64_t ratio, int64_t dim, int64_t index_dim, int64_t rows_per_block);
};

struct V41SequenceState {
  int64_t length = 0;
  std::vector<v4::WindowRing> windows;  // per layer
  std::vector<KvSourceState> sources;   // in kv_source_layer_ids order
  std::vector<int32_t> history;         // compressed ids of the last max_ngram - 1 tokens, oldest first
  size_t bytes() const;
};

V41SequenceState make_sequence_state(const V41Config& c);

/// Sizes of one sequence's state in the engine's f32 layout (growing part per token, amortised
/// over the ratios; fixed part per sequence).
v4::StateSizes state_sizes(const V41Config& c);

}  // namespace deepinfer::v41
