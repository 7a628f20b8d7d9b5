// The small V4 ops of v4_ops.h (moved here from the GPU model library: device code lives in the
// backend).
#include "backend/cuda/v4_ops.h"

#include "backend/cuda/cuda_common.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;

namespace {

__global__ void rope_kernel(float* x, int64_t rows, int64_t ld, int64_t off, int pairs, const int32_t* pos,
                            int rows_per_pos, const float* inv_freq) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * pairs) return;
  const int64_t r = i / pairs;
  const int p = int(i % pairs);
  float* v = x + r * ld + off + 2 * p;
  float s, c;
  sincosf(float(pos[r / rows_per_pos]) * inv_freq[p], &s, &c);
  const float a = v[0], b = v[1];
  v[0] = a * c - b * s;
  v[1] = a * s + b * c;
}

__global__ void hash_route_kernel(const float* logits, int64_t T, int64_t E, const int32_t* ids,
                                  const int32_t* tid2eid, int k, float scale, int32_t* experts, float* weights) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  float sum = 0.f;
  for (int j = 0; j < k; ++j) {
    const int32_t e = tid2eid[int64_t(ids[t]) * k + j];
    const float l = logits[t * E + e];
    const float sp = l > 20.f ? l : log1pf(expf(l));
    const float s = sqrtf(sp);
    experts[t * k + j] = e;
    weights[t * k + j] = s;
    sum += s;
  }
  for (int j = 0; j < k; ++j) weights[t * k + j] = weights[t * k + j] / sum * scale;
}

__global__ void expand_kernel(const float4* e, int64_t T, int64_t d4, int streams, float4* X) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * d4) return;
  const int64_t t = i / d4, c = i % d4;
  const float4 v = e[i];
  for (int j = 0; j < streams; ++j) X[(t * streams + j) * d4 + c] = v;
}

unsigned blocks(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

}  // namespace

bool rope_rows(float* x, int64_t rows, int64_t ld, int64_t off, int pairs, const int32_t* pos, int rows_per_pos,
               const float* inv_freq, void* stream) {
  if (rows <= 0) return true;
  rope_kernel<<<blocks(rows * pairs, 256), 256, 0, as_stream(stream)>>>(x, rows, ld, off, pairs, pos,
                                                                                        rows_per_pos, inv_freq);
  return check_launch("rope_rows");
}

bool hash_route(const float* logits, int64_t T, int64_t E, const int32_t* ids, const int32_t* tid2eid, int k,
                float scale, int32_t* experts, float* weights, void* stream) {
  if (T <= 0) return true;
  hash_route_kernel<<<blocks(T, 128), 128, 0, as_stream(stream)>>>(logits, T, E, ids, tid2eid, k,
                                                                                   scale, experts, weights);
  return check_launch("hash_route");
}

bool expand_streams(const float* e, int64_t T, int64_t d, int streams, float* X, void* stream) {
  if (d % 4 != 0) return fail("expand_streams: d % 4 != 0");
  const int64_t d4 = d / 4;
  expand_kernel<<<blocks(T * d4, 256), 256, 0, as_stream(stream)>>>(
      reinterpret_cast<const float4*>(e), T, d4, streams, reinterpret_cast<float4*>(X));
  return check_launch("expand_streams");
}

}  // namespace deepinfer::cuda
