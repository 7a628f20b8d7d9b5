#include "model/deepseek_v4_gpu/gpu_state.h"

#include <algorithm>

#include "backend/cuda/layer_ops.h"

namespace deepinfer::v4gpu {

namespace {

Result<GpuCompressorState> make_compressor(int64_t ratio, int64_t width, bool overlap) {
  GpuCompressorState s;
  s.ratio = ratio, s.width = width, s.overlap = overlap;
  const size_t open = static_cast<size_t>(ratio * (overlap ? 2 : 1) * width) * sizeof(float);
  DI_ASSIGN_OR_RETURN(s.buf_kv, DeviceBuffer::ordered_zeros(open, "compressor window"));
  DI_ASSIGN_OR_RETURN(s.buf_gate, DeviceBuffer::ordered_zeros(open, "compressor window"));
  if (overlap) {
    const size_t half = static_cast<size_t>(ratio * width) * sizeof(float);
    DI_ASSIGN_OR_RETURN(s.prev_kv, DeviceBuffer::ordered_zeros(half, "compressor overlap half"));
    DI_ASSIGN_OR_RETURN(s.prev_gate, DeviceBuffer::ordered_zeros(half, "compressor overlap half"));
  }
  DI_TRY(s.reserve(16));
  return s;
}

}  // namespace

int64_t GpuCompressorState::grown_capacity(int64_t capacity, int64_t rows) {
  if (rows <= capacity) return capacity;
  const int64_t cap = std::max({rows, capacity + capacity / 2, int64_t{16}});
  return (cap + 63) / 64 * 64;
}

Status GpuCompressorState::reserve(int64_t rows) {
  if (rows <= capacity) return Status::ok();
  const int64_t cap = grown_capacity(capacity, rows);
  // In stream order (DeviceBuffer::ordered): the copy runs after the steps queued so far (the last
  // may still be writing an entry) and the old buffer's free after the copy; the host never waits.
  const size_t kept = entries.bytes(), bytes = static_cast<size_t>(cap * width) * 2;
  DI_ASSIGN_OR_RETURN(DeviceBuffer grown, DeviceBuffer::ordered(bytes, "compressed entries"));
  if (kept && !cuda::copy_ordered(grown.get(), entries.get(), kept)) return device_error("copy of compressed entries");
  if (!cuda::memset_ordered(static_cast<uint8_t*>(grown.get()) + kept, 0, bytes - kept))
    return device_error("zeroing of compressed entries");
  entries = std::move(grown);
  capacity = cap;
  return Status::ok();
}

Result<GpuCompressorState> GpuCompressorState::clone() const {
  GpuCompressorState s;
  s.ratio = ratio, s.width = width, s.overlap = overlap, s.capacity = capacity;
  DI_ASSIGN_OR_RETURN(s.buf_kv, buf_kv.clone("compressor window"));
  DI_ASSIGN_OR_RETURN(s.buf_gate, buf_gate.clone("compressor window"));
  DI_ASSIGN_OR_RETURN(s.prev_kv, prev_kv.clone("compressor overlap half"));
  DI_ASSIGN_OR_RETURN(s.prev_gate, prev_gate.clone("compressor overlap half"));
  DI_ASSIGN_OR_RETURN(s.entries, entries.clone("compressed entries"));
  return s;
}

size_t GpuCompressorState::bytes() const {
  return buf_kv.bytes() + buf_gate.bytes() + prev_kv.bytes() + prev_gate.bytes() + entries.bytes();
}

Result<GpuLayerState> GpuLayerState::clone() const {
  GpuLayerState s;
  s.has_kv = has_kv, s.has_index = has_index;
  DI_ASSIGN_OR_RETURN(s.ring, ring.clone("window ring"));
  if (has_kv) {
    DI_ASSIGN_OR_RETURN(s.kv, kv.clone());
  }
  if (has_index) {
    DI_ASSIGN_OR_RETURN(s.index, index.clone());
  }
  return s;
}

size_t GpuLayerState::bytes() const { return ring.bytes() + kv.bytes() + index.bytes(); }

Result<std::unique_ptr<GpuSequenceState>> GpuSequenceState::create(const v4::V4Config& c) {
  auto s = std::make_unique<GpuSequenceState>();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    GpuLayerState ls;
    DI_ASSIGN_OR_RETURN(ls.ring, DeviceBuffer::ordered_zeros(static_cast<size_t>(c.window * c.head_dim) * 2, "window ring"));
    const v4::AttnKind k = c.attn_kinds[l];
    if (k != v4::AttnKind::kSliding) {
      ls.has_kv = true;
      DI_ASSIGN_OR_RETURN(ls.kv, make_compressor(c.ratios[l], c.head_dim, k == v4::AttnKind::kCsa));
    }
    if (k == v4::AttnKind::kCsa) {
      ls.has_index = true;
      DI_ASSIGN_OR_RETURN(ls.index, make_compressor(c.ratios[l], c.index_head_dim, true));
    }
    s->layers_.push_back(std::move(ls));
  }
  return s;
}

size_t GpuSequenceState::bytes() const {
  size_t b = 0;
  for (const GpuLayerState& l : layers_) b += l.bytes();
  return b;
}

Status GpuSequenceState::fill_synthetic(int64_t length, uint64_t seed) {
  if (length_ != 0) return Status::invalid_argument("fill_synthetic: the state has consumed tokens already");
  if (length < 0) return Status::invalid_argument("fill_synthetic: length < 0");
  auto fill = [&](const DeviceBuffer& b, cuda::RandomKind kind, size_t elem) -> Status {
    if (b.bytes() && !cuda::fill_random(b.get(), static_cast<int64_t>(b.bytes() / elem), kind, 1.f, 0.f, seed++))
      return device_error("fill_synthetic: fill_random");
    return Status::ok();
  };
  for (GpuLayerState& l : layers_) {
    DI_TRY(fill(l.ring, cuda::RandomKind::kBf16, 2));
    for (GpuCompressorState* c : {l.has_kv ? &l.kv : nullptr, l.has_index ? &l.index : nullptr}) {
      if (!c) continue;
      DI_TRY(c->reserve(length / c->ratio + 1));
      for (const DeviceBuffer* b : {&c->buf_kv, &c->buf_gate, &c->prev_kv, &c->prev_gate})
        DI_TRY(fill(*b, cuda::RandomKind::kF32, 4));
      DI_TRY(fill(c->entries, cuda::RandomKind::kBf16, 2));
    }
  }
  if (!cuda::synchronize()) return device_error("fill_synthetic: synchronize");
  length_ = length;
  return Status::ok();
}

std::unique_ptr<ModelState> GpuSequenceState::clone() const {
  auto s = std::make_unique<GpuSequenceState>();
  s->length_ = length_;
  for (const GpuLayerState& l : layers_) {
    auto c = l.clone();
    if (!c.is_ok()) return nullptr;
    s->layers_.push_back(std::move(c).value());
  }
  return s;
}

}  // namespace deepinfer::v4gpu
