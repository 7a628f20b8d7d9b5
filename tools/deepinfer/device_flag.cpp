#include "device_flag.h"

#include <cstdio>

#include "backend/registry.h"

namespace deepinfer::cli {

void add_device_option(CLI::App* cmd, std::string& device) {
  cmd->add_option("--device", device, "where the model runs: cpu, or cuda (DeepSeek-V4 checkpoints)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

int check_device_flag(const char* command, const std::string& device) {
  if (device != "cuda") return 0;
  if (!cuda_compiled_in()) {
    std::fprintf(stderr, "deepinfer %s: --device cuda: this build has no CUDA backend (configure with -DDI_CUDA=ON)\n",
                 command);
    return 1;
  }
  if (list_devices().size() < 2) {  // list_devices() starts with "cpu"
    std::fprintf(stderr, "deepinfer %s: --device cuda: no CUDA device is visible on this machine\n", command);
    return 1;
  }
  return 0;
}

}  // namespace deepinfer::cli
