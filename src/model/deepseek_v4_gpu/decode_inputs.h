// The host side of one GPU forward's inputs: HostPack lays every per-step array (token ids,
// positions, per-sequence index arrays, per-layer pointer tables) out in one byte block that is
// uploaded with one copy; DecodeInputs plans the part for the decoding sequences of the step
// (rows 0..Nd-1) and resolves it into DecodeBatch, the device pointers the batched decode ops
// take. A step of Nd sequences at context bucket `ctx` always has the same layout, so a decode
// graph captured for (Nd, ctx) reads the next step's arrays from the same addresses.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "backend/cuda/compress_ops.h"
#include "core/status.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4_gpu/gpu_state.h"

namespace deepinfer::v4gpu {

struct SeqRun {
  GpuSequenceState* state = nullptr;
  std::span<const int32_t> tokens;
  bool all_logits = false;
};

/// Arrays appended to one byte block, each 16-byte aligned, addressed by offset.
class HostPack {
 public:
  template <class T>
  size_t add(size_t count) {
    const size_t off = (bytes_.size() + 15) / 16 * 16;
    bytes_.resize(off + count * sizeof(T));
    return off;
  }
  /// Valid until the next add().
  template <class T>
  T* at(size_t off) { return reinterpret_cast<T*>(bytes_.data() + off); }
  template <class T, class F>
  size_t fill(size_t count, F value) {
    const size_t off = add<T>(count);
    T* p = at<T>(off);
    for (size_t i = 0; i < count; ++i) p[i] = value(static_cast<int64_t>(i));
    return off;
  }
  size_t size() const { return bytes_.size(); }
  const uint8_t* data() const { return bytes_.data(); }

 private:
  std::vector<uint8_t> bytes_;
};

/// Sequence b's state for layer l, as the batched decode ops reach it (device pointer tables [Nd]).
struct DecodeLayerPtrs {
  uint16_t* const* rings = nullptr;
  const uint16_t* const* kv_entries = nullptr;    // CSA / HCA
  const uint16_t* const* index_keys = nullptr;    // CSA
  const cuda::CompressorSeqPtrs* kv = nullptr;    // CSA / HCA
  const cuda::CompressorSeqPtrs* index = nullptr; // CSA
};

/// Device arrays of the step's Nd decoding sequences (row b = sequence b, one token each).
struct DecodeBatch {
  int64_t n = 0;           // Nd
  int64_t ctx = 0;         // context bucket: a power of two >= every position + 1 (>= 512)
  int64_t hca_stride = 1;  // ctx / 128: the most visible HCA entries (sizes the attention grid)
  int32_t *nwin = nullptr, *nvis = nullptr, *hca_n = nullptr, *swa_idx = nullptr;
  int32_t *zeros = nullptr, *ones = nullptr, *iota = nullptr;
  int64_t* zero64 = nullptr;
  std::vector<DecodeLayerPtrs> layers;
};

class DecodeInputs {
 public:
  /// Context bucket of a step whose largest position is max_pos.
  static int64_t context_bucket(int64_t max_pos);
  /// Reserves each state's compressed-entry room for this step (pointers are taken after it)
  /// and lays the decode arrays out in `pack`. `runs` are the decoding sequences (one token each).
  Status plan(std::span<const SeqRun> runs, const v4::V4Config& c, HostPack& pack);
  /// The device view, once the pack is uploaded at `device_base`.
  DecodeBatch resolve(uint8_t* device_base) const;
  int64_t n() const { return n_; }
  int64_t ctx() const { return ctx_; }

 private:
  struct LayerOff {
    size_t rings = 0, kv_entries = 0, index_keys = 0, kv = 0, index = 0;
    bool has_kv = false, has_index = false;
  };
  int64_t n_ = 0, ctx_ = 0, hca_stride_ = 1;
  size_t nwin_ = 0, nvis_ = 0, hca_n_ = 0, swa_idx_ = 0, zeros_ = 0, ones_ = 0, iota_ = 0, zero64_ = 0;
  std::vector<LayerOff> layers_;
};

}  // namespace deepinfer::v4gpu
