// Validation of `--gpus N` (deepinfer serve / generate): one process drives N GPUs of one node,
// experts split over them (expert parallelism), attention data-parallel.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace deepinfer::parallel {

struct GpusRequest {
  int gpus = 1;                  // --gpus
  int cuda_devices = 0;          // devices the build sees
  int64_t n_routed_experts = 0;  // from the model's config.json (0: unknown, not checked)
  std::string_view backend = "cpu";  // the backend the engine runs on
};

/// N >= 1; N == 1 is today's single-device path whatever the backend. N > 1 needs N CUDA devices,
/// N dividing the routed experts, and a backend with expert parallelism (none yet: the serving
/// engine runs the CPU backend), else a clear error.
Status validate_gpus(const GpusRequest& r);

}  // namespace deepinfer::parallel
