#include "model/deepseek_v41/state.h"

namespace deepinfer::v41 {

namespace {
constexpr int64_t kEntriesPerBlock = 64;
}

KvSourceState::KvSourceState(int64_t layer_, int64_t ratio_, int64_t dim, int64_t index_dim, int64_t rows_per_block)
    : layer(layer_), ratio(ratio_), entries(dim, rows_per_block), index_keys(index_dim, rows_per_block) {
  if (ratio > 1) {
    part_kv.assign(ratio * dim, 0.f);
    part_gate.assign(ratio * dim, 0.f);
  }
}

size_t V41SequenceState::bytes() const {
  size_t n = history.capacity() * sizeof(int32_t);
  for (const auto& w : windows) n += w.bytes();
  for (const auto& s : sources)
    n += (s.part_kv.size() + s.part_gate.size()) * sizeof(float) + s.entries.bytes() + s.index_keys.bytes();
  return n;
}

V41SequenceState make_sequence_state(const V41Config& c) {
  V41SequenceState s;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    v4::WindowRing w;
    w.window = c.window;
    w.dim = c.head_dim;
    w.rows.assign(c.window * c.head_dim, 0.f);
    s.windows.push_back(std::move(w));
  }
  for (int64_t l : c.kv_sources)
    s.sources.emplace_back(l, c.ratios[l], c.head_dim, c.index_head_dim, kEntriesPerBlock);
  s.history.reserve(std::max<int64_t>(0, c.engram_max_ngram - 1));
  return s;
}

v4::StateSizes state_sizes(const V41Config& c) {
  v4::StateSizes z;
  for (int64_t l : c.kv_sources)
    z.bytes_per_token += static_cast<double>((c.head_dim + c.index_head_dim) * sizeof(float)) / c.ratios[l];
  V41SequenceState s = make_sequence_state(c);
  z.bytes_per_sequence = s.bytes();  // empty entries: rings, open groups, history
  return z;
}

}  // namespace deepinfer::v41
