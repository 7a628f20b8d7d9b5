// Sampling on the device for the GPU model (Model::forward_sample): the host side of
// cuda::sample_tokens (backend/cuda/sampling_ops.h, the CPU sampler's semantics and Philox draw).
// HostSampling turns the sampler's rows (sample/sampler.h SampleRow: parameters, token history,
// rng key, position) into the kernel's inputs; DeviceSampler uploads them, samples the logits
// rows already on the device on the forward's stream, and brings back only tokens and logprobs.
//
// Per row: logit_bias and the min_tokens mask of EOS / stop ids become an additive bias row (the
// table exists only when some row needs one); penalties read output counts and a seen flag per
// vocabulary entry (a table row only for the rows with penalties). Those tables are uploaded each
// step (V floats / ints per such row): cheap for the common rows, which need neither. Every
// upload and download is asynchronous on the forward's stream, through pinned memory.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/sampling_ops.h"
#include "core/result.h"
#include "model/deepseek_v4_gpu/device_buffer.h"
#include "sample/sampler.h"

namespace deepinfer::v4gpu {

struct HostSampling {
  int64_t vocab = 0;
  std::vector<cuda::GpuSampleParams> params;  // [rows]
  std::vector<float> bias;                    // [rows, vocab] or empty
  std::vector<int32_t> counts;                // [rows with penalties, vocab]
  std::vector<uint8_t> seen;                  // [rows with penalties, vocab]
  std::vector<int32_t> top;                   // [rows] top logprobs wanted (0..20)
  std::vector<bool> logprobs;                 // [rows] the chosen token's logprob wanted
};

/// The kernel's inputs for `rows` (their `logits` spans are not read). Token ids outside
/// [0, vocab) in a row's history are an error.
Result<HostSampling> host_sampling(std::span<const SampleRow> rows, int64_t vocab);

/// Samples a step's rows on the device. Two slots alternate between steps (the caller picks one
/// per step): each has its own pinned staging (inputs and results) and device buffers, so the
/// host can stage step N+1 in one slot while step N's copies and kernel still use the other, and
/// step N's device tokens stay readable (to feed step N+1) while step N+1 is launched.
class DeviceSampler {
 public:
  static constexpr int kSlots = 2;
  /// Stages s in `slot` for a step whose device logits row i will be s's row order[i]: copied
  /// into the slot's pinned memory and uploaded asynchronously on `stream` (after the work queued
  /// there). The slot must not be in use by a step not yet waited for.
  Status prepare(int slot, const HostSampling& s, std::span<const size_t> order, void* stream);
  /// Samples the slot's rows from logits [rows, vocab] (device, fp32) on `stream` and queues the
  /// copies of the results into the slot's pinned memory. Does not wait.
  Status launch(int slot, const float* logits, void* stream);
  /// The slot's sampled tokens on the device, in device row order (valid until the slot is
  /// prepared again).
  const int32_t* device_tokens(int slot) const { return slots_[slot].args.token; }
  /// Device row of caller row j of the slot's step.
  int32_t device_row(int slot, size_t j) const { return slots_[slot].device_row[j]; }
  size_t rows(int slot) const { return slots_[slot].order.size(); }
  /// Once the slot's copies are done (the caller waited for them): out[order[i]] = device row i's result.
  Status results(int slot, std::vector<SampleResult>& out) const;

 private:
  struct Slot {
    Scratch scratch;                 // inputs (one block), results
    PinnedBuffer staging_in, staging_out;
    std::vector<size_t> order;       // device row i = caller row order[i]
    std::vector<int32_t> device_row; // inverse of order
    std::vector<int32_t> top;        // per caller row
    std::vector<bool> logprobs;
    int64_t vocab = 0;
    bool any_top = false;
    cuda::GpuSampleArgs args;
    void* host_out = nullptr;
  };
  Slot slots_[kSlots];
  Scratch shared_;  // the sampling workspace (stream-ordered between steps)
};

}  // namespace deepinfer::v4gpu
