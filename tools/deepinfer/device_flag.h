// `--device cpu|cuda` of score, generate, serve and bench: where the model runs (load_model's
// LoadOptions::device). "cuda" needs a build with the CUDA backend and a visible CUDA device.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace deepinfer::cli {

/// Adds --device (default "cpu") bound to `device`.
void add_device_option(CLI::App* cmd, std::string& device);
/// 0 to go on; else prints why `device` cannot run here and returns 1.
int check_device_flag(const char* command, const std::string& device);

}  // namespace deepinfer::cli
