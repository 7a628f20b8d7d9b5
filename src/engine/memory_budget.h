// How much sequence state a device leaves room for (EngineOptions::gpu_memory_utilization, the
// meaning vLLM gives its flag of that name): of the device's total memory the engine may use the
// share `utilization`; what is already in use (weights, and the workspaces a warm-up step grew)
// comes off it, then the prefix cache's bytes; the rest is the running sequences' state.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "model/model.h"

namespace deepinfer {

/// utilization x total - (total - free) - prefix_cache_bytes; an invalid_argument error naming the
/// figures when that is not positive, or when utilization is not in (0, 1].
Result<int64_t> state_capacity_from_device(const DeviceMemory& mem, double utilization, int64_t prefix_cache_bytes);

/// For a model with device memory (Model::device_memory): one warm-up prefill of `warm_tokens`
/// tokens on a state of its own (so the forward's workspaces reach their size before memory is
/// read; the state is freed after), then state_capacity_from_device. nullopt (nothing run) for a
/// model without device memory.
Result<std::optional<int64_t>> warm_and_size_state(Model& model, int64_t warm_tokens, double utilization,
                                                   int64_t prefix_cache_bytes);

}  // namespace deepinfer
