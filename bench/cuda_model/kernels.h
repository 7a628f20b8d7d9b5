// The bench's small ops moved to the GPU model library (src/model/deepseek_v4_gpu/kernels.h);
// the bench keeps calling them by their old names.
#pragma once

#include "model/deepseek_v4_gpu/kernels.h"

namespace deepinfer::bench {
using v4gpu::expand_streams;
using v4gpu::hash_route;
using v4gpu::kernels_error;
using v4gpu::rope_rows;
}  // namespace deepinfer::bench
