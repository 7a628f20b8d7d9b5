#include "parallel/gpus_option.h"

#include <string>

namespace deepinfer::parallel {

Status validate_gpus(const GpusRequest& r) {
  if (r.gpus < 1) return Status::invalid_argument("--gpus must be >= 1, got " + std::to_string(r.gpus));
  if (r.gpus == 1) return Status::ok();
  if (r.n_routed_experts > 0 && r.n_routed_experts % r.gpus != 0)
    return Status::invalid_argument("--gpus " + std::to_string(r.gpus) + " does not divide the model's " +
                                    std::to_string(r.n_routed_experts) +
                                    " routed experts (expert parallelism puts the same number on every GPU)");
  if (r.gpus > r.cuda_devices)
    return Status::invalid_argument("--gpus " + std::to_string(r.gpus) + " but this build sees " +
                                    std::to_string(r.cuda_devices) + " CUDA device(s) (see `deepinfer devices`)");
  return Status::unsupported("--gpus " + std::to_string(r.gpus) + ": expert parallelism is not supported on the " +
                             std::string(r.backend) +
                             " backend yet (src/parallel has the dispatch/combine, EPLB and DP balancing; "
                             "see docs/parallel.md); run with --gpus 1");
}

}  // namespace deepinfer::parallel
