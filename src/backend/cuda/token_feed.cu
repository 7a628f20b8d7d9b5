// The overlapped step loop's token gather (token_feed.h).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/token_feed.h"

namespace deepinfer::cuda {

namespace {

__global__ void feed_tokens_kernel(int32_t* ids, const int32_t* tokens, const int32_t* pairs, int32_t n) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ids[pairs[2 * i]] = tokens[pairs[2 * i + 1]];
}

}  // namespace

bool feed_tokens(int32_t* ids, const int32_t* tokens, const int32_t* pairs, int32_t n, void* stream) {
  if (n < 0) return detail::fail("feed_tokens: n < 0");
  if (n == 0) return true;
  constexpr int kThreads = 256;
  feed_tokens_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, detail::as_stream(stream)>>>(ids, tokens, pairs, n);
  return detail::check_launch("feed_tokens");
}

}  // namespace deepinfer::cuda
