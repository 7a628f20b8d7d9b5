// `--gpus N` of `deepinfer serve` and `deepinfer generate` (src/parallel/gpus_option.h).
#pragma once

#include <string>

namespace deepinfer::cli {

/// Validates --gpus against the CUDA devices and the model's config.json (n_routed_experts).
/// Returns 0 to go on (N == 1: the single-device path), else prints the error and returns the
/// exit code: 2 for a bad value, 1 for a valid request this build cannot run yet.
int check_gpus_flag(const char* command, int gpus, const std::string& model_dir);

}  // namespace deepinfer::cli
