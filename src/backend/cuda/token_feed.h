// The overlapped step loop's device pieces (Model::launch_sample, model/model.h): the gather
// that puts step N's sampled tokens into step N+1's input ids, and the events a step is waited
// for and timed by (cuda_ops.h's events only order streams and cannot be timed). Plain C++17
// over void* streams and events, like cuda_ops.h.
#pragma once

#include <cstdint>

namespace deepinfer::cuda {

/// ids[pairs[2i]] = tokens[pairs[2i + 1]] for i < n, on `stream` after the work queued there
/// (the upload of step N+1's ids, step N's sampling). Nothing is launched for n == 0.
bool feed_tokens(int32_t* ids, const int32_t* tokens, const int32_t* pairs, int32_t n, void* stream);

/// An event that can be timed and waited for; nullptr on failure.
void* timed_event_create();
/// Blocks until the work the event was recorded after is done (the rest of its stream may run on).
bool event_synchronize(void* event);
/// Milliseconds between two completed timed events; false on failure.
bool event_elapsed_ms(void* start, void* end, float* ms);

}  // namespace deepinfer::cuda
