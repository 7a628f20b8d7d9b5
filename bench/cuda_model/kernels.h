// The bench's small ops live in the CUDA backend (src/backend/cuda/v4_ops.h); the bench keeps
// calling them by their old names.
#pragma once

#include <string>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/v4_ops.h"

namespace deepinfer::bench {
using cuda::expand_streams;
using cuda::hash_route;
using cuda::rope_rows;
inline const std::string& kernels_error() { return cuda::last_error(); }
}  // namespace deepinfer::bench
