// Sampling on the GPU (issue D): the semantics of src/sample/sampler.h (read it: order of
// operations, ties, NaN handling, raw logprobs), so a seeded request gives the same token on
// either backend. Host-callable C++17 API over device buffers, no CUDA types.
//
// Per row the result is a pure function of (logits row, the row's parameters, its token counts,
// its rng key and position): never of the batch. The random draw is the same Philox4x32-10
// uniform as src/sample/rng.h (rng_uniform(key, position)), so with the same logits the GPU and
// the CPU pick the same token (the CPU accumulates the CDF in double; so does this op).
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::cuda {

/// Per-row parameters (device array of `rows` of these). temperature < 1e-5 (the CPU's
/// kGreedyTemperature) means greedy. top_k <= 0: off; top_p >= 1: off; min_p <= 0: off.
struct GpuSampleParams {
  float temperature = 1.f;
  int32_t top_k = 0;
  float top_p = 1.f;
  float min_p = 0.f;
  float repetition_penalty = 1.f, presence_penalty = 0.f, frequency_penalty = 0.f;
  uint64_t seed = 0;          // RngKey as src/sample/rng.h
  uint32_t sample_index = 0;
  int64_t position = 0;     // SampleRow::position
  int32_t counts_row = -1;  // row of `counts` / `seen` for penalties (-1: no penalties)
  int32_t want_logprobs = 0;  // 0: none; else 1 + number of top logprobs (<= 20)
};

struct GpuSampleArgs {
  const float* logits = nullptr;            // [rows, vocab] fp32, raw
  const GpuSampleParams* params = nullptr;  // [rows] device
  const int32_t* counts = nullptr;          // [*, vocab] output-token counts (frequency/presence)
  const uint8_t* seen = nullptr;            // [*, vocab] token seen in prompt or output (repetition)
  const float* bias = nullptr;              // [rows, vocab] additive (logit_bias, -inf masks) or null
  int32_t rows = 0, vocab = 0;
  int32_t* token = nullptr;                 // [rows] out
  float* logprob = nullptr;                 // [rows] out: raw log_softmax of the chosen token
  int32_t* top_ids = nullptr;               // [rows, 20] out (when want_logprobs > 1)
  float* top_logprobs = nullptr;            // [rows, 20] out
};
size_t sample_workspace_bytes(int32_t rows, int32_t vocab);
bool sample_tokens(const GpuSampleArgs& a, void* workspace, void* stream = nullptr);

}  // namespace deepinfer::cuda
