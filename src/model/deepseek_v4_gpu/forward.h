// Forward: one ragged V4 forward on the device (see gpu_model.h for the batching rules), with the
// workspaces it keeps between calls. Internal to the GPU model.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4_gpu/device_buffer.h"
#include "model/deepseek_v4_gpu/gpu_state.h"
#include "model/deepseek_v4_gpu/gpu_weights.h"

namespace deepinfer::v4gpu {

struct SeqRun {
  GpuSequenceState* state = nullptr;
  std::span<const int32_t> tokens;
  bool all_logits = false;
};

class Forward {
 public:
  Forward(const v4::V4Config& c, const GpuWeights& w) : c_(c), w_(w) {}
  /// Runs the batch, advances the states, writes logits [rows, vocab] and row_offsets.
  Status run(std::span<const SeqRun> batch, std::vector<float>& logits, std::vector<int64_t>& row_offsets);
  size_t workspace_bytes() const { return scratch_.bytes(); }

 private:
  struct Acts;
  struct SeqIdx;
  Status linear(const void* x, bool x_bf16, int64_t M, const GpuLinear& W, int64_t r0, int64_t rows, float* y);
  Status linear_bf16(const void* x, bool x_bf16, int64_t M, const GpuLinear& W, int64_t r0, int64_t rows, float* y);
  Status linear(const float* x, int64_t M, const GpuLinear& W, float* y) { return linear(x, false, M, W, 0, W.n, y); }
  Status attention(const GpuLayer& L, size_t l, std::span<const SeqRun> batch, const std::vector<SeqIdx>& idx, Acts& a);
  Status attention_seq(const GpuLayer& L, GpuLayerState& S, const SeqIdx& si, Acts& a);
  Status moe(const GpuLayer& L, Acts& a);
  Status head(std::span<const SeqRun> batch, const std::vector<SeqIdx>& idx, Acts& a, std::vector<float>& logits,
              std::vector<int64_t>& row_offsets);
  template <class T>
  Result<T*> buf(int slot, int64_t count) {
    DI_ASSIGN_OR_RETURN(void* p, scratch_.get(slot, static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T)));
    return static_cast<T*>(p);
  }

  const v4::V4Config& c_;
  const GpuWeights& w_;
  Scratch scratch_;
};

}  // namespace deepinfer::v4gpu
