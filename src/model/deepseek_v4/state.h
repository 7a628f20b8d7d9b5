// Per-sequence state of a V4 forward, one type per layer kind (ARCHITECTURE.md "Model state is
// not a plain KV cache"):
//   every layer        WindowRing: the last `window` raw K=V rows (slot = position % window)
//   CSA / HCA layers   CompressorState: the open window's projected rows, the previous window's
//                      overlap half (CSA), and the compressed entries (one per `ratio` tokens)
//   CSA layers         a second CompressorState for the lightning indexer's keys
// The fixed parts (ring, open window) have a per-sequence size; the growing parts (entries) are
// RowBlocks: rows in fixed-size blocks, the unit the cache manager (issue C) pages.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "model/deepseek_v4/config.h"

namespace deepinfer::v4 {

/// Rows of `dim` floats appended one at a time, stored in blocks of `rows_per_block`. Copies share
/// blocks (a prefix-cache snapshot costs pointers, not rows); appending into a shared, partly
/// filled block clones it first, so a copy never sees rows appended after it was taken.
class RowBlocks {
 public:
  RowBlocks(int64_t dim, int64_t rows_per_block) : dim_(dim), rows_per_block_(rows_per_block) {}
  void append(const float* row);
  const float* row(int64_t i) const { return blocks_[i / rows_per_block_].get() + (i % rows_per_block_) * dim_; }
  int64_t size() const { return size_; }
  int64_t dim() const { return dim_; }
  int64_t rows_per_block() const { return rows_per_block_; }
  size_t bytes() const { return blocks_.size() * rows_per_block_ * dim_ * sizeof(float); }
  /// Bytes in blocks not shared with any other copy.
  size_t unique_bytes() const;

 private:
  int64_t dim_, rows_per_block_;
  int64_t size_ = 0;
  std::vector<std::shared_ptr<float[]>> blocks_;
};

struct WindowRing {
  int64_t window = 0, dim = 0;
  std::vector<float> rows;  // [window, dim]
  float* row(int64_t pos) { return rows.data() + (pos % window) * dim; }
  const float* row(int64_t pos) const { return rows.data() + (pos % window) * dim; }
  size_t bytes() const { return rows.size() * sizeof(float); }
};

struct CompressorState {
  int64_t ratio = 0, width = 0;
  bool overlap = false;                 // CSA: entry w pools window w-1's A halves + window w's B halves
  std::vector<float> buf_kv, buf_gate;  // [ratio, c*width] open window (gate includes ape)
  int64_t buffered = 0;
  std::vector<float> prev_kv, prev_gate;  // [ratio, width] previous window's A halves
  bool has_prev = false;
  RowBlocks entries;  // [n, width], normed and roped

  CompressorState(int64_t ratio, int64_t width, bool overlap, int64_t rows_per_block);
  size_t fixed_bytes() const;
};

struct LayerState {
  WindowRing window;
  std::optional<CompressorState> kv;     // CSA, HCA
  std::optional<CompressorState> index;  // CSA
  size_t bytes() const;
};

struct SequenceState {
  int64_t length = 0;  // tokens consumed
  std::vector<LayerState> layers;
  std::optional<LayerState> mtp;
  int64_t mtp_length = 0;
  size_t bytes() const;
};

/// Byte sizes of the state of one sequence, for `inspect` and admission.
struct StateSizes {
  double bytes_per_token = 0;   // growing parts, amortised over their ratios
  size_t bytes_per_sequence = 0;  // fixed parts: rings and open windows
};

LayerState make_layer_state(const V4Config& c, AttnKind kind, int64_t ratio);
SequenceState make_sequence_state(const V4Config& c, bool with_mtp);
StateSizes state_sizes(const V4Config& c, bool with_mtp);

}  // namespace deepinfer::v4
