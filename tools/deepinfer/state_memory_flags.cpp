#include "state_memory_flags.h"

namespace deepinfer::cli {

void StateMemoryFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--state-memory-mib", state_memory_mib, "model state capacity of the running sequences (MiB)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpu-memory-utilization", gpu_memory_utilization,
                  "F in (0, 1], e.g. 0.9: size the state capacity from the device instead of --state-memory-mib: F of "
                  "its memory, less the weights, a warm-up step's workspaces and the prefix cache (as vLLM's flag); "
                  "a model in host memory (--device cpu) keeps --state-memory-mib")
      ->check(CLI::Range(0.0, 1.0));
}

void StateMemoryFlags::apply(EngineOptions& eo) const {
  eo.state_capacity_bytes = state_memory_mib << 20;
  eo.gpu_memory_utilization = gpu_memory_utilization;
}

}  // namespace deepinfer::cli
