// The small V4 ops of v4_ops.h (moved here from the GPU model library: device code lives in the
// backend).
#include "backend/cuda/v4_ops.h"

#include <cuda_bf16.h>

#include <string>

#include "backend/cuda/cuda_common.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;

namespace {

__global__ void rope_kernel(float* x, int64_t rows, int64_t ld, int64_t off, int pairs, const int32_t* pos,
                            int rows_per_pos, const float* inv_freq) {
  detail::pdl_entry();
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

// One warp per row. rms_norm_kernel's 256 threads are emulated: "thread" k = lane + 32j (j < 8)
// sums x[k + 256m]^2 (m < NB, fmaf from 0), then the same halving tree (s = 128, 64, 32 within a
// lane, 16..1 by shuffles, each step own + other), so r has rms_norm's bits. A RoPE pair sits on
// lanes 2q, 2q + 1 (element k + 256m and its neighbour), swapped by one shuffle.
// In: fp32 rows, or bf16 rows (a GEMM's bf16 output: half the bytes read; each value widened
// exactly, so the bits are those of the fp32 kernel on the same values).
__device__ __forceinline__ float load_f32(const float* p) { return *p; }
__device__ __forceinline__ float load_f32(const __nv_bfloat16* p) { return __bfloat162float(*p); }

// The K=V row's extras (kv_norm_rope_bf16): the norm's weight (rms_norm_kernel's w[k] * (x * r)) and
// the first n_ring rows' copies into their rings (rows_to_rings' slot); none for the query heads.
struct RowExtras {
  const float* w = nullptr;
  __nv_bfloat16* const* rings = nullptr;
  int64_t n_ring = 0, window = 1;
};

template <int NB, typename In>
__global__ void __launch_bounds__(256) head_norm_rope_kernel(const In* __restrict__ x, int64_t rows, int D, float eps,
                                                             int off, const int32_t* __restrict__ pos, int rows_per_pos,
                                                             const float* __restrict__ inv_freq,
                                                             __nv_bfloat16* __restrict__ out, RowExtras ex) {
  const int lane = threadIdx.x & 31;
  // The norm's weight (no kernel writes it) into registers before the wait: loaded in the loop
  // below, each load waited behind the previous element's ring store (they may alias), 16 round
  // trips in a row (the K=V tail took 11.9 us for one row, the query heads' 5.0, H100 ncu).
  float wv[8][NB];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int m = 0; m < NB; ++m) wv[j][m] = ex.w ? ex.w[lane + 32 * j + 256 * m] : 1.f;
  detail::pdl_entry();
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const In* xr = x + r * D;
  float v[8][NB];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int m = 0; m < NB; ++m) v[j][m] = load_f32(xr + lane + 32 * j + 256 * m);
  float p[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    p[j] = 0.f;
#pragma unroll
    for (int m = 0; m < NB; ++m) p[j] = fmaf(v[j][m], v[j][m], p[j]);
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) p[j] = p[j] + p[j + 4];  // s = 128
#pragma unroll
  for (int j = 0; j < 2; ++j) p[j] = p[j] + p[j + 2];  // s = 64
  float q = p[0] + p[1];                                 // s = 32
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) q = q + __shfl_down_sync(0xffffffffu, q, s);
  const float rs = rsqrtf(__shfl_sync(0xffffffffu, q, 0) / static_cast<float>(D) + eps);
  const int32_t pr = pos[r / rows_per_pos];
  const float pp = float(pr);
  __nv_bfloat16* ring = nullptr;
  if (r < ex.n_ring) {
    int64_t slot = pr % ex.window;
    if (slot < 0) slot += ex.window;
    ring = ex.rings[r] + slot * D;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int m = 0; m < NB; ++m) {
      const int e = lane + 32 * j + 256 * m;
      float y = ex.w ? wv[j][m] * (v[j][m] * rs) : v[j][m] * rs;
      const float o = __shfl_xor_sync(0xffffffffu, y, 1);  // the pair's other element
      if (e >= off) {
        float s, c;
        sincosf(pp * inv_freq[(e - off) >> 1], &s, &c);
        y = (e & 1) ? o * s + y * c : y * c - o * s;
      }
      const __nv_bfloat16 b = __float2bfloat16_rn(y);
      out[r * D + e] = b;
      if (ring) ring[e] = b;
    }
  }
}

__global__ void hash_route_kernel(const float* logits, int64_t T, int64_t E, const int32_t* ids,
                                  const int32_t* tid2eid, int k, float scale, int32_t* experts, float* weights) {
  detail::pdl_entry();
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
  detail::pdl_entry();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * d4) return;
  const int64_t t = i / d4, c = i % d4;
  const float4 v = e[i];
  for (int j = 0; j < streams; ++j) X[(t * streams + j) * d4 + c] = v;
}

unsigned blocks(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

template <typename In>
bool launch_head_norm_rope(const char* what, const In* x, int64_t rows, int64_t D, float eps, int64_t off, int pairs,
                           const int32_t* pos, int rows_per_pos, const float* inv_freq, uint16_t* out, void* stream,
                           RowExtras ex = {}) {
  if (D % 256 || D > 1024) return fail(std::string(what) + ": D must be a multiple of 256, at most 1024");
  if (off % 2 || off < 0 || off + 2 * int64_t(pairs) != D) return fail(std::string(what) + ": off + 2 * pairs != D");
  if (ex.n_ring > 0 && (ex.rings == nullptr || ex.window <= 0 || ex.n_ring > rows))
    return fail(std::string(what) + ": ring rows need rings, a positive window and at most `rows` rows");
  if (rows <= 0) return true;
  // A warp a row; blocks of 2 warps up to kFewRows rows (batch 1's 64 query heads: 32 SMs, not 8),
  // else 8. The block size moves rows between SMs only: the same bits.
  constexpr int64_t kFewRows = 1024;
  const int threads = rows <= kFewRows ? 64 : 256;
  const unsigned grid = blocks(rows, threads / 32);
  auto* o = reinterpret_cast<__nv_bfloat16*>(out);
  const int d = static_cast<int>(D), of = static_cast<int>(off);
  const cudaStream_t s = as_stream(stream);
  switch (D / 256) {
    case 1: detail::launch_pdl(head_norm_rope_kernel<1, In>, grid, threads, 0, s, x, rows, d, eps, of, pos, rows_per_pos, inv_freq, o, ex); break;
    case 2: detail::launch_pdl(head_norm_rope_kernel<2, In>, grid, threads, 0, s, x, rows, d, eps, of, pos, rows_per_pos, inv_freq, o, ex); break;
    default: detail::launch_pdl(head_norm_rope_kernel<4, In>, grid, threads, 0, s, x, rows, d, eps, of, pos, rows_per_pos, inv_freq, o, ex);
  }
  return check_launch(what);
}

}  // namespace

bool rope_rows(float* x, int64_t rows, int64_t ld, int64_t off, int pairs, const int32_t* pos, int rows_per_pos,
               const float* inv_freq, void* stream) {
  if (rows <= 0) return true;
  detail::launch_pdl(rope_kernel, blocks(rows * pairs, 256), 256, 0, as_stream(stream), x, rows, ld, off, pairs, pos,
                                                                                        rows_per_pos, inv_freq);
  return check_launch("rope_rows");
}

bool head_norm_rope_bf16(const float* x, int64_t rows, int64_t D, float eps, int64_t off, int pairs,
                         const int32_t* pos, int rows_per_pos, const float* inv_freq, uint16_t* out, void* stream) {
  return launch_head_norm_rope("head_norm_rope_bf16", x, rows, D, eps, off, pairs, pos, rows_per_pos, inv_freq, out,
                               stream);
}

bool head_norm_rope_bf16_in(const uint16_t* x, int64_t rows, int64_t D, float eps, int64_t off, int pairs,
                            const int32_t* pos, int rows_per_pos, const float* inv_freq, uint16_t* out, void* stream) {
  return launch_head_norm_rope("head_norm_rope_bf16_in", reinterpret_cast<const __nv_bfloat16*>(x), rows, D, eps, off,
                               pairs, pos, rows_per_pos, inv_freq, out, stream);
}

bool kv_norm_rope_bf16(const float* x, int64_t rows, int64_t D, const float* weight, float eps, int64_t off, int pairs,
                       const int32_t* pos, const float* inv_freq, uint16_t* out, uint16_t* const* rings, int64_t n_ring,
                       int64_t window, void* stream) {
  RowExtras ex;
  ex.w = weight;
  ex.rings = reinterpret_cast<__nv_bfloat16* const*>(rings);
  ex.n_ring = n_ring;
  ex.window = window;
  return launch_head_norm_rope("kv_norm_rope_bf16", x, rows, D, eps, off, pairs, pos, 1, inv_freq, out, stream, ex);
}

bool hash_route(const float* logits, int64_t T, int64_t E, const int32_t* ids, const int32_t* tid2eid, int k,
                float scale, int32_t* experts, float* weights, void* stream) {
  if (T <= 0) return true;
  detail::launch_pdl(hash_route_kernel, blocks(T, 128), 128, 0, as_stream(stream), logits, T, E, ids, tid2eid, k,
                                                                                   scale, experts, weights);
  return check_launch("hash_route");
}

bool expand_streams(const float* e, int64_t T, int64_t d, int streams, float* X, void* stream) {
  if (d % 4 != 0) return fail("expand_streams: d % 4 != 0");
  const int64_t d4 = d / 4;
  detail::launch_pdl(expand_kernel, blocks(T * d4, 256), 256, 0, as_stream(stream), reinterpret_cast<const float4*>(e), T, d4, streams, reinterpret_cast<float4*>(X));
  return check_launch("expand_streams");
}

}  // namespace deepinfer::cuda
