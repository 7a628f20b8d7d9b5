#include "model/deepseek_v4_gpu/decode_inputs.h"

#include <algorithm>

namespace deepinfer::v4gpu {

int64_t DecodeInputs::context_bucket(int64_t max_pos) {
  int64_t b = 512;
  while (b < max_pos + 1) b *= 2;
  return b;
}

Status DecodeInputs::plan(std::span<const SeqRun> runs, const v4::V4Config& c, HostPack& pack) {
  n_ = static_cast<int64_t>(runs.size());
  int64_t max_pos = 0;
  for (const SeqRun& r : runs) max_pos = std::max(max_pos, r.state->length());
  ctx_ = context_bucket(max_pos);
  hca_stride_ = ctx_ / 128;
  const int64_t W = c.window;
  auto pos = [&](int64_t b) { return runs[b].state->length(); };
  const size_t n = static_cast<size_t>(n_);
  nwin_ = pack.fill<int32_t>(n, [&](int64_t b) { return static_cast<int32_t>(std::min<int64_t>(pos(b) + 1, W)); });
  nvis_ = pack.fill<int32_t>(n, [&](int64_t b) { return static_cast<int32_t>((pos(b) + 1) / 4); });
  hca_n_ = pack.fill<int32_t>(n, [&](int64_t b) { return static_cast<int32_t>((pos(b) + 1) / 128); });
  swa_idx_ = pack.fill<int32_t>(n, [](int64_t) { return -1; });
  zeros_ = pack.fill<int32_t>(n, [](int64_t) { return 0; });
  ones_ = pack.fill<int32_t>(n, [](int64_t) { return 1; });
  iota_ = pack.fill<int32_t>(n, [](int64_t b) { return static_cast<int32_t>(b); });
  zero64_ = pack.fill<int64_t>(n, [](int64_t) { return int64_t{0}; });
  // The per-layer pointer tables: every offset first (layer by layer, the layout a decode graph
  // captured), then one pass per sequence over its own layers, whose states lie together: walking
  // layer by layer touched Nd scattered states per layer (43 x 256 at EP batch 256, where the
  // step's host preparation took about 1.5 ms on the H100's host).
  layers_.assign(static_cast<size_t>(c.num_layers), {});
  for (size_t l = 0; l < layers_.size(); ++l) {
    LayerOff& o = layers_[l];
    const GpuLayerState& S0 = runs[0].state->layer(l);
    o.has_kv = S0.has_kv, o.has_index = S0.has_index;
    o.rings = pack.add<uint16_t*>(n);
    if (o.has_kv) {
      o.kv_entries = pack.add<const uint16_t*>(n);
      o.kv = pack.add<cuda::CompressorSeqPtrs>(n);
    }
    if (o.has_index) {
      o.index_keys = pack.add<const uint16_t*>(n);
      o.index = pack.add<cuda::CompressorSeqPtrs>(n);
    }
  }
  auto cmp = [](GpuCompressorState& s) {
    cuda::CompressorSeqPtrs p;
    p.buf_kv = s.buf_kv.as<float>(), p.buf_gate = s.buf_gate.as<float>();
    p.prev_kv = s.prev_kv.as<float>(), p.prev_gate = s.prev_gate.as<float>();
    p.entries = s.entries.as<uint16_t>();
    return p;
  };
  for (size_t b = 0; b < n; ++b) {
    GpuSequenceState& seq = *runs[b].state;
    const int64_t len = seq.length();
    for (size_t l = 0; l < layers_.size(); ++l) {
      const LayerOff& o = layers_[l];
      GpuLayerState& S = seq.layer(l);
      // Room for the entry this step may close, before its pointers are taken.
      if (S.has_kv) DI_TRY(S.kv.reserve((len + 1) / S.kv.ratio + 1));
      if (S.has_index) DI_TRY(S.index.reserve((len + 1) / S.index.ratio + 1));
      pack.at<uint16_t*>(o.rings)[b] = S.ring.as<uint16_t>();
      if (o.has_kv) {
        pack.at<const uint16_t*>(o.kv_entries)[b] = S.kv.entries.as<uint16_t>();
        pack.at<cuda::CompressorSeqPtrs>(o.kv)[b] = cmp(S.kv);
      }
      if (o.has_index) {
        pack.at<const uint16_t*>(o.index_keys)[b] = S.index.entries.as<uint16_t>();
        pack.at<cuda::CompressorSeqPtrs>(o.index)[b] = cmp(S.index);
      }
    }
  }
  return Status::ok();
}

DecodeBatch DecodeInputs::resolve(uint8_t* base) const {
  DecodeBatch d;
  d.n = n_, d.ctx = ctx_, d.hca_stride = hca_stride_;
  auto i32 = [&](size_t off) { return reinterpret_cast<int32_t*>(base + off); };
  d.nwin = i32(nwin_), d.nvis = i32(nvis_), d.hca_n = i32(hca_n_);
  d.swa_idx = i32(swa_idx_), d.zeros = i32(zeros_), d.ones = i32(ones_), d.iota = i32(iota_);
  d.zero64 = reinterpret_cast<int64_t*>(base + zero64_);
  for (const LayerOff& o : layers_) {
    DecodeLayerPtrs p;
    p.rings = reinterpret_cast<uint16_t* const*>(base + o.rings);
    if (o.has_kv) {
      p.kv_entries = reinterpret_cast<const uint16_t* const*>(base + o.kv_entries);
      p.kv = reinterpret_cast<const cuda::CompressorSeqPtrs*>(base + o.kv);
    }
    if (o.has_index) {
      p.index_keys = reinterpret_cast<const uint16_t* const*>(base + o.index_keys);
      p.index = reinterpret_cast<const cuda::CompressorSeqPtrs*>(base + o.index);
    }
    d.layers.push_back(p);
  }
  return d;
}

}  // namespace deepinfer::v4gpu
