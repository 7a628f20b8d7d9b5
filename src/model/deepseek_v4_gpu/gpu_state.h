// GpuSequenceState: one sequence's V4 state on the device (ARCHITECTURE.md "Model state is not a
// plain KV cache"; the CPU twin is v4::SequenceState):
//   every layer        ring [window, head_dim] bf16: K=V row of position p at slot p % window
//   CSA / HCA layers   open window buf_kv / buf_gate [ratio, cw] fp32, CSA overlap half
//                      prev_kv / prev_gate [ratio, width] fp32, compressed entries [n, width] bf16
//   CSA layers         the same for the lightning indexer's keys (width index_head_dim)
// Entries live in device buffers grown by at least 1.5x (GpuCompressorState::grown_capacity).
// Every buffer is stream-ordered device memory (DeviceBuffer::ordered_zeros): creating, growing,
// cloning and freeing a state queue their work behind the steps in flight and never make the host
// wait. clone() is a device copy of everything; bytes() counts every byte allocated for the sequence.
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
  /// Makes room for `rows` entries (grown_capacity), keeping the ones written.
  Status reserve(int64_t rows);
  /// The rows a reserve of `rows` allocates past `capacity`: at least 1.5x (a growth costs an
  /// allocation and a copy of the entries, so their number stays logarithmic in the length) but
  /// never more than `rows` rounded up to 64. Doubling held a context of 4 x 2^k tokens (2^k + 1 rows) in 2^(k+1)
  /// rows: 2x the entries' memory at 32k, where the EP slice's batch of 256 then did not fit.
  static int64_t grown_capacity(int64_t capacity, int64_t rows);
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
  /// Model::fill_synthetic_state for this state (fresh: length 0): every layer's window ring, its
  /// compressors' open windows and overlap halves (fp32 uniform(-1, 1)) and their length / ratio
  /// compressed entries (bf16 uniform(-1, 1)) random from `seed`; then length() == length.
  Status fill_synthetic(int64_t length, uint64_t seed);
  GpuLayerState& layer(size_t l) { return layers_[l]; }
  size_t num_layers() const { return layers_.size(); }

 private:
  int64_t length_ = 0;
  std::vector<GpuLayerState> layers_;
};

}  // namespace deepinfer::v4gpu
