// What the op benches (cuda_ops_bench, cuda_attn_lt_bench, cuda_layer_bench) share: checked
// calls that end the run with the failing call named, device buffers filled with random bytes,
// a CUDA-graph timer (median of replays of a graph of back-to-back calls), the rotation count that
// keeps inputs out of the 60 MB L2, and the two ceilings measured in the same run (device copy
// bandwidth; a dense FP8 GEMM 8192^3 through cuBLASLt with tensor-wide scales).
// (The whole-model bench, bench/cuda_model/, throws instead of exiting: one failing configuration
// must not end its run; it has its own checked calls and floors.)
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_ops.h"

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
#define OK(x)                                                                                                     \
  do {                                                                                                            \
    if (!(x)) {                                                                                                   \
      std::fprintf(stderr, "%s:%d %s failed: %s\n", __FILE__, __LINE__, #x, deepinfer::cuda::last_error().c_str()); \
      std::exit(1);                                                                                               \
    }                                                                                                             \
  } while (0)

namespace deepinfer::bench {

/// cudaMalloc of max(n, 256) bytes; with `fill`, random bytes written on `s` and finished before
/// returning (so a later cudaMemcpy on the legacy stream, not ordered after `s`, is not overwritten).
void* dalloc(size_t n, cudaStream_t s, bool fill = true);

/// A device copy of `v` (dalloc then cudaMemcpy).
template <class T>
T* upload(const std::vector<T>& v, cudaStream_t s) {
  T* p = static_cast<T*>(dalloc(v.size() * sizeof(T), s, false));
  CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

/// Median ms of one call of `body(i)` (i = call index): two warm-up calls, then `replays` timed
/// launches of a graph of `reps` calls (or, without `use_graph`, `reps` eager calls each time).
double time_graph(cudaStream_t s, int reps, const std::function<void(int)>& body, bool use_graph = true,
                  int replays = 7);

/// Copies of an input of `bytes_per_call` to rotate over so that a graph's calls read >= 512 MB
/// (past the L2), between 1 and `max_sets`.
int rotation(size_t bytes_per_call, int max_sets = 32);

/// Bytes per second (read + written) of a 2 GiB device-to-device copy, median of 5.
double measure_copy_rate(cudaStream_t s);

/// FLOP/s of a dense FP8 GEMM 8192^3 through cuBLASLt (e4m3 in, bf16 out, tensor-wide scales),
/// median of 5; 0 when cuBLASLt offers no algorithm for it.
double measure_fp8_gemm_rate(cudaStream_t s);

}  // namespace deepinfer::bench
