#include "engine/memory_budget.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace deepinfer {

namespace {
std::string mib(int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }
}  // namespace

Result<int64_t> state_capacity_from_device(const DeviceMemory& mem, double utilization, int64_t prefix_cache_bytes) {
  if (!(utilization > 0.0 && utilization <= 1.0))
    return Status::invalid_argument("gpu memory utilization must be in (0, 1], got " + std::to_string(utilization));
  if (mem.total_bytes <= 0 || mem.free_bytes < 0 || mem.free_bytes > mem.total_bytes)
    return Status::invalid_argument("device memory report out of range: " + mib(mem.free_bytes) + " free of " +
                                    mib(mem.total_bytes));
  const int64_t used = mem.total_bytes - mem.free_bytes;
  const int64_t allowed = static_cast<int64_t>(utilization * static_cast<double>(mem.total_bytes));
  const int64_t left = allowed - used - prefix_cache_bytes;
  if (left <= 0)
    return Status::invalid_argument("no device memory left for sequence state at gpu memory utilization " +
                                    std::to_string(utilization) + ": " + mib(allowed) + " allowed of " +
                                    mib(mem.total_bytes) + ", " + mib(used) + " in use (weights, workspaces), " +
                                    mib(prefix_cache_bytes) + " for the prefix cache");
  return left;
}

Result<std::optional<int64_t>> warm_and_size_state(Model& model, int64_t warm_tokens, double utilization,
                                                   int64_t prefix_cache_bytes) {
  if (!model.device_memory()) return std::optional<int64_t>();
  if (warm_tokens > 0) {
    std::unique_ptr<ModelState> st = model.new_state();
    if (!st) return Status::resource_exhausted("no device memory for the warm-up step's state");
    const int64_t vocab = std::max<int64_t>(model.info().vocab_size, 3);
    std::vector<int32_t> ids(static_cast<size_t>(warm_tokens));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(2 + static_cast<int64_t>(i) % (vocab - 2));
    ModelInput in{st.get(), ids, false};
    v4::ForwardOutput out;
    DI_TRY(model.forward(std::span<const ModelInput>(&in, 1), out).with_context("warm-up step"));
  }
  const std::optional<DeviceMemory> mem = model.device_memory();
  if (!mem) return Status::internal("the model stopped reporting its device memory");
  DI_ASSIGN_OR_RETURN(int64_t capacity, state_capacity_from_device(*mem, utilization, prefix_cache_bytes));
  return std::optional<int64_t>(capacity);
}

}  // namespace deepinfer
