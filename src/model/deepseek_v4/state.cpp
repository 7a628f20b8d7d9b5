#include "model/deepseek_v4/state.h"

#include <cstring>

namespace deepinfer::v4 {

namespace {
constexpr int64_t kEntriesPerBlock = 64;
}

void RowBlocks::append(const float* row) {
  if (size_ % rows_per_block_ == 0) {
    blocks_.push_back(std::shared_ptr<float[]>(new float[rows_per_block_ * dim_]()));
  } else if (blocks_.back().use_count() > 1) {
    std::shared_ptr<float[]> copy(new float[rows_per_block_ * dim_]);
    std::memcpy(copy.get(), blocks_.back().get(), rows_per_block_ * dim_ * sizeof(float));
    blocks_.back() = std::move(copy);
  }
  std::memcpy(blocks_.back().get() + (size_ % rows_per_block_) * dim_, row, dim_ * sizeof(float));
  ++size_;
}

size_t RowBlocks::unique_bytes() const {
  size_t n = 0;
  for (const auto& b : blocks_)
    if (b.use_count() == 1) n += rows_per_block_ * dim_ * sizeof(float);
  return n;
}

CompressorState::CompressorState(int64_t ratio_, int64_t width_, bool overlap_, int64_t rows_per_block)
    : ratio(ratio_), width(width_), overlap(overlap_), entries(width_, rows_per_block) {
  const int64_t cw = (overlap ? 2 : 1) * width;
  buf_kv.assign(ratio * cw, 0.f);
  buf_gate.assign(ratio * cw, 0.f);
  if (overlap) {
    prev_kv.assign(ratio * width, 0.f);
    prev_gate.assign(ratio * width, 0.f);
  }
}

size_t CompressorState::fixed_bytes() const {
  return (buf_kv.size() + buf_gate.size() + prev_kv.size() + prev_gate.size()) * sizeof(float);
}

size_t LayerState::bytes() const {
  size_t n = window.bytes();
  if (kv) n += kv->fixed_bytes() + kv->entries.bytes();
  if (index) n += index->fixed_bytes() + index->entries.bytes();
  return n;
}

size_t SequenceState::bytes() const {
  size_t n = 0;
  for (const auto& l : layers) n += l.bytes();
  if (mtp) n += mtp->bytes();
  return n;
}

LayerState make_layer_state(const V4Config& c, AttnKind kind, int64_t ratio) {
  LayerState s;
  s.window.window = c.window;
  s.window.dim = c.head_dim;
  s.window.rows.assign(c.window * c.head_dim, 0.f);
  if (kind != AttnKind::kSliding) s.kv.emplace(ratio, c.head_dim, kind == AttnKind::kCsa, kEntriesPerBlock);
  if (kind == AttnKind::kCsa) s.index.emplace(ratio, c.index_head_dim, true, kEntriesPerBlock);
  return s;
}

SequenceState make_sequence_state(const V4Config& c, bool with_mtp) {
  SequenceState s;
  for (int64_t l = 0; l < c.num_layers; ++l) s.layers.push_back(make_layer_state(c, c.attn_kinds[l], c.ratios[l]));
  if (with_mtp) s.mtp = make_layer_state(c, AttnKind::kSliding, 0);
  return s;
}

StateSizes state_sizes(const V4Config& c, bool with_mtp) {
  StateSizes z;
  const int64_t n_layers = c.num_layers + (with_mtp ? 1 : 0);
  for (int64_t l = 0; l < n_layers; ++l) {
    const bool is_mtp = l == c.num_layers;
    const AttnKind kind = is_mtp ? AttnKind::kSliding : c.attn_kinds[l];
    const int64_t ratio = is_mtp ? 0 : c.ratios[l];
    LayerState s = make_layer_state(c, kind, ratio);
    z.bytes_per_sequence += s.bytes();  // empty entries: rings and open windows only
    if (s.kv) z.bytes_per_token += static_cast<double>(s.kv->width * sizeof(float)) / ratio;
    if (s.index) z.bytes_per_token += static_cast<double>(s.index->width * sizeof(float)) / ratio;
  }
  return z;
}

}  // namespace deepinfer::v4
