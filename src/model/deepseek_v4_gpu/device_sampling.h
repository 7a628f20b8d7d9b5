// Sampling on the device for the GPU model (Model::forward_sample): the host side of
// cuda::sample_tokens (backend/cuda/sampling_ops.h, the CPU sampler's semantics and Philox draw).
// HostSampling turns the sampler's rows (sample/sampler.h SampleRow: parameters, token history,
// rng key, position) into the kernel's inputs; DeviceSampler uploads them, samples the logits
// rows already on the device on the forward's stream, and brings back only tokens and logprobs.
//
// Per row: logit_bias and the min_tokens mask of EOS / stop ids become an additive bias row (the
// table exists only when some row needs one); penalties read output counts and a seen flag per
// vocabulary entry (a table row only for the rows with penalties). Those tables are uploaded each
// step (V floats / ints per such row): cheap for the common rows, which need neither.
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

class DeviceSampler {
 public:
  /// Uploads s for a step whose device logits row i will be s's row order[i] (synchronous
  /// copies: call it before the step's forward is launched, so they wait for nothing).
  Status prepare(const HostSampling& s, std::span<const size_t> order);
  /// Samples the prepared rows from logits [rows, vocab] (device, fp32) on `stream`, after the
  /// work already queued there; out[order[i]] gets device row i's result. Waits for the stream.
  Status sample(const float* logits, void* stream, std::vector<SampleResult>& out);

 private:
  Scratch scratch_;
  PinnedBuffer staging_;  // the results
  const HostSampling* s_ = nullptr;
  std::vector<size_t> order_;
  cuda::GpuSampleArgs args_;
};

}  // namespace deepinfer::v4gpu
