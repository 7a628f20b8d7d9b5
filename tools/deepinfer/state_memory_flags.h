// `--state-memory-mib` and `--gpu-memory-utilization` of serve and generate: the engine's budget
// for the running sequences' state (EngineOptions::state_capacity_bytes), or its sizing from the
// device's memory (EngineOptions::gpu_memory_utilization, engine/memory_budget.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "engine/engine.h"

namespace deepinfer::cli {

struct StateMemoryFlags {
  int64_t state_memory_mib = 4096;
  double gpu_memory_utilization = 0;  // > 0: state sized from the device's memory instead

  /// Adds both options to `cmd`, bound to this (which must outlive the parse).
  void add_to(CLI::App* cmd);
  /// Sets the engine's state_capacity_bytes and gpu_memory_utilization.
  void apply(EngineOptions& eo) const;
};

}  // namespace deepinfer::cli
