// The overlapped step loop's device piece (Model::launch_sample, model/model.h): the gather that
// puts step N's sampled tokens into step N+1's input ids (its events: cuda_ops.h's timed events).
// Plain C++17 over void* streams, like cuda_ops.h.
#pragma once

#include <cstdint>

namespace deepinfer::cuda {

/// ids[pairs[2i]] = tokens[pairs[2i + 1]] for i < n, on `stream` after the work queued there
/// (the upload of step N+1's ids, step N's sampling). Nothing is launched for n == 0.
bool feed_tokens(int32_t* ids, const int32_t* tokens, const int32_t* pairs, int32_t n, void* stream);

}  // namespace deepinfer::cuda
