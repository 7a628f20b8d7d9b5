// GpuSequenceState: one sequence's V4 state on the device (ARCHITECTURE.md "Model state is not a
// plain KV cache"; the CPU twin is v4::SequenceState):
//   every layer        ring [window, head_dim] bf16: K=V row of position p at slot p % window
//   CSA / HCA layers   open window buf_kv / buf_gate [ratio, cw] fp32, CSA overlap half
//                      prev_kv / prev_gate [ratio, width] fp32, compressed entries [n, width] bf16
//   CSA layers         the same for the lightning indexer's keys (width index_head_dim)
// Entries live in capacity-doubling device buffers. clone() is a device copy of everything;
// bytes() counts every byte allocated for the sequence.
#pragma once

#include <vector>

#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4_gpu/device_buffer.h"
#include "model/model.h"

namespace deepinfer::v4gpu {

struct GpuCompressorState {
  int64_t ratio = 0, width = 0;
  bool overlap = false;
  DeviceBuffer buf_kv, buf_gate, prev_kv, prev_gate;
  DeviceBuffer entries;      // bf16 [capacity, width]
  int64_t capacity = 0;      // rows allocated
  /// Makes room for `rows` entries (doubling), keeping the ones written.
  Status reserve(int64_t rows);
  Result<GpuCompressorState> clone() const;
  size_t bytes() const;
};

struct GpuLayerState {
  DeviceBuffer ring;  // bf16 [window, head_dim]
  bool has_kv = false, has_index = false;
  GpuCompressorState kv, index;
  Result<GpuLayerState> clone() const;
  size_t bytes() const;
};

class GpuSequenceState final : public ModelState {
 public:
  static Result<std::unique_ptr<GpuSequenceState>> create(const v4::V4Config& c);
  int64_t length() const override { return length_; }
  size_t bytes() const override;
  /// A device copy; an out-of-memory device gives nullptr (ModelState::clone cannot fail otherwise).
  std::unique_ptr<ModelState> clone() const override;

  void advance(int64_t n) { length_ += n; }
  GpuLayerState& layer(size_t l) { return layers_[l]; }
  size_t num_layers() const { return layers_.size(); }

 private:
  int64_t length_ = 0;
  std::vector<GpuLayerState> layers_;
};

}  // namespace deepinfer::v4gpu
