// The two hardware floors, measured in the same run as the bench: device copy bandwidth
// (D2D cudaMemcpy of 2 GB; bytes read + written / time, best of several) and the FP8 GEMM rate
// (fp8_linear_lt 8192 x 8192 x 8192 with 128x128 block scales, best of several).
#pragma once

#include "ops.h"

namespace deepinfer::bench {

/// Bytes per second (read + write) of a 2 GB device-to-device copy, best of `reps`.
double measure_copy_bandwidth(cudaStream_t s, int reps = 6);
/// FLOP/s of fp8_linear_lt at 8192^3 (bf16 output), best of `reps`.
double measure_fp8_rate(Ctx& c, int reps = 6);

}  // namespace deepinfer::bench
