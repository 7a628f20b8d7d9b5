// Model-level CUDA ops (model_ops.h): the bf16 cuBLASLt GEMM (and the router's logits on it), the
// embedding gather, MXFP4 -> FP8 128x128 re-blocking of expert weights for the prefill MoE, and
// the expert sort of a prefill batch.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "backend/cuda/layer_ops.h"
#include "backend/cuda/lt_plan.cuh"
#include "backend/cuda/model_ops.h"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check;
using detail::check_launch;
using detail::fail;
using detail::kLtWorkspace;

namespace {

// ---- bf16 GEMM ----
// Column-major view as fp8_lt.cu: D[N, M] = op(A)[N, K] . B[K, M], A = W [N][K] row-major (op T),
// B = x [M][K] row-major (op N), D = y [M][N] row-major.
cublasStatus_t build_bf16_plan(detail::LtPlan& p, int64_t M, int64_t N, int64_t K, bool y_bf16) {
  const cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
  cublasStatus_t st;
  if ((st = cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS) return st;
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof(tA));
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof(tB));
  if ((st = cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, K, N, K)) != CUBLAS_STATUS_SUCCESS) return st;
  if ((st = cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, K, M, K)) != CUBLAS_STATUS_SUCCESS) return st;
  return cublasLtMatrixLayoutCreate(&p.d, y_bf16 ? CUDA_R_16BF : CUDA_R_32F, N, M, N);
}

// ---- the router's logits as a bf16 GEMM ----
// Thread per 4 values of row t: hi, mid, lo to out[t] at columns j, d + j, 2d + j.
__global__ void split_bf16x3_kernel(const float* __restrict__ x, int64_t T, int64_t d, uint16_t* __restrict__ out) {
  detail::pdl_entry();
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, q = d / 4;
  if (i >= T * q) return;
  const int64_t t = i / q, j = (i % q) * 4;
  const float4 v = *reinterpret_cast<const float4*>(x + t * d + j);
  const float in[4] = {v.x, v.y, v.z, v.w};
  uint16_t part[3][4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    float r = in[c];
#pragma unroll
    for (int p = 0; p < 3; ++p) {  // each part the rounding of what the ones before left (exact)
      const __nv_bfloat16 b = __float2bfloat16_rn(r);
      part[p][c] = __bfloat16_as_ushort(b);
      // |x| past bf16's largest finite value (or inf) rounds hi to inf: the rest is 0, not
      // inf - inf, so the logit is the reference's inf and not NaN.
      r = isinf(__bfloat162float(b)) ? 0.f : r - __bfloat162float(b);
    }
  }
  uint16_t* o = out + t * 3 * d + j;
#pragma unroll
  for (int p = 0; p < 3; ++p)
    *reinterpret_cast<uint2*>(o + p * d) = make_uint2(part[p][0] | uint32_t(part[p][1]) << 16,
                                                      part[p][2] | uint32_t(part[p][3]) << 16);
}

// Thread per 8 bf16 of w [n, d]: to out [n, 3d] at columns j, d + j, 2d + j.
__global__ void repeat3_bf16_kernel(const uint16_t* __restrict__ w, int64_t n, int64_t d, uint16_t* __restrict__ out) {
  detail::pdl_entry();
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, q = d / 8;
  if (i >= n * q) return;
  const int64_t r = i / q, j = (i % q) * 8;
  const uint4 v = *reinterpret_cast<const uint4*>(w + r * d + j);
#pragma unroll
  for (int p = 0; p < 3; ++p) *reinterpret_cast<uint4*>(out + r * 3 * d + p * d + j) = v;
}

// ---- embedding ----
// One block per token; 16-byte loads when d % 8 == 0 and table / out are 16-byte aligned.
__global__ void embed_kernel(const uint16_t* __restrict__ table, int64_t V, int64_t d, const int32_t* __restrict__ ids,
                             float* __restrict__ out, int32_t* __restrict__ bad, bool vec) {
  detail::pdl_entry();
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  float* o = out + t * d;
  const bool ok = id >= 0 && id < V;
  if (!ok && bad && threadIdx.x == 0) *bad = 1;
  if (vec) {
    const uint4* src = reinterpret_cast<const uint4*>(table + (ok ? int64_t(id) * d : 0));
    for (int64_t c = threadIdx.x; c < d / 8; c += blockDim.x) {
      float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
      if (ok) {
        const uint4 v = src[c];
        lo = make_float4(__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xffff0000u), __uint_as_float(v.y << 16),
                         __uint_as_float(v.y & 0xffff0000u));
        hi = make_float4(__uint_as_float(v.z << 16), __uint_as_float(v.z & 0xffff0000u), __uint_as_float(v.w << 16),
                         __uint_as_float(v.w & 0xffff0000u));
      }
      reinterpret_cast<float4*>(o)[2 * c] = lo;
      reinterpret_cast<float4*>(o)[2 * c + 1] = hi;
    }
  } else {
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
      o[c] = ok ? __uint_as_float(uint32_t(table[int64_t(id) * d + c]) << 16) : 0.f;
  }
}

// ---- MXFP4 -> FP8 128x128 ----
// One block (256 threads) per 128x128 tile: the tile's largest E8M0 byte, then each thread
// converts 2 x 32 values (16 packed bytes = one 32-column scale group each).
__device__ __forceinline__ float pow2i(int e) {  // 2^e for e in [-149, 127], exact
  if (e >= -126) return __int_as_float((e + 127) << 23);
  return __int_as_float(1 << (e + 149));
}

// |e2m1| of a 3-bit code: 0, .5, 1, 1.5, 2, 3, 4, 6 (built from the bits, no table in local memory).
__device__ __forceinline__ float e2m1_magnitude(uint32_t c) {
  return __uint_as_float(c >= 2 ? (((c >> 1) + 126u) << 23) | ((c & 1u) << 22) : (c ? 0x3f000000u : 0u));
}

__global__ void __launch_bounds__(256) mxfp4_to_fp8_kernel(const uint8_t* __restrict__ w,
                                                           const uint8_t* __restrict__ scale, int64_t K,
                                                           uint8_t* __restrict__ out, float* __restrict__ out_scale) {
  const int64_t kt = blockIdx.x, nt = blockIdx.y, n0 = nt * 128, k0 = kt * 128;
  const int64_t sk = K / 32;  // scale bytes per row
  __shared__ int s_max[8];
  int m = 0;
  for (int i = threadIdx.x; i < 128 * 4; i += blockDim.x) m = max(m, int(scale[(n0 + i / 4) * sk + kt * 4 + i % 4]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) s_max[threadIdx.x >> 5] = m;
  __syncthreads();
  int emax = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) emax = max(emax, s_max[i]);
  if (threadIdx.x == 0) out_scale[nt * (K / 128) + kt] = pow2i(min(emax - 127 - 6, 127));
#pragma unroll
  for (int it = 0; it < 2; ++it) {
    const int c = threadIdx.x + it * 256;  // chunk: row c / 4, scale group c % 4
    const int64_t row = n0 + c / 4, g = c % 4;
    const int e = scale[row * sk + kt * 4 + g];
    const uint4 v = *reinterpret_cast<const uint4*>(w + row * (K / 2) + (k0 + g * 32) / 2);
    const float mul = e == 0xff ? __int_as_float(0x7fc00000) : pow2i(max(e - emax + 6, -149));
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    uint32_t res[8];
#pragma unroll
    for (int wi = 0; wi < 4; ++wi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t packed = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t code = mxfp4_dev_code(words[wi], 4 * h + j);
          const float mag = e2m1_magnitude(code & 7) * mul;
          const float val = (code & 8) ? -mag : mag;
          const uint32_t b = __nv_cvt_float_to_fp8(val, __NV_SATFINITE, __NV_E4M3);
          packed |= b << (8 * j);
        }
        res[wi * 2 + h] = packed;
      }
    }
    uint4* dst = reinterpret_cast<uint4*>(out + row * K + k0 + g * 32);
    dst[0] = make_uint4(res[0], res[1], res[2], res[3]);
    dst[1] = make_uint4(res[4], res[5], res[6], res[7]);
  }
}

// ---- expert sort ----
// Slots are cut into chunks of kSortChunk; hist[chunk][e] = slots of expert e in the chunk.
// 1) per chunk: rank of each slot among the chunk's earlier slots of its expert (kept in slot_pos)
//    and the chunk's histogram; 2) one block: offsets[e] (exclusive scan over experts of the
//    totals) and hist[c][e] <- offsets[e] + slots of e in chunks before c; 3) slot_pos += base.
constexpr int kSortChunk = 256;

__global__ void __launch_bounds__(kSortChunk) sort_rank_kernel(const int32_t* __restrict__ experts, int64_t TK, int E,
                                                               int32_t* __restrict__ slot_pos,
                                                               int32_t* __restrict__ hist) {
  detail::pdl_entry();
  __shared__ int ex[kSortChunk];
  const int64_t c = blockIdx.x, i = c * kSortChunk + threadIdx.x;
  const int64_t left = TK - c * kSortChunk;
  const int n = left < kSortChunk ? int(left) : kSortChunk;
  int32_t* h = hist + c * E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) h[e] = 0;
  const int my = threadIdx.x < n ? experts[i] : -1;
  ex[threadIdx.x] = my;
  __syncthreads();
  if (threadIdx.x >= n) return;
  if (my < 0 || my >= E) {  // invalid expert: no slot (offsets[E] then counts only valid slots)
    slot_pos[i] = -1;
    return;
  }
  int rank = 0;
  bool last = true;
  for (int j = 0; j < n; ++j) {
    rank += (j < threadIdx.x) & (ex[j] == my);
    last &= !((j > threadIdx.x) & (ex[j] == my));
  }
  slot_pos[i] = rank;
  if (last) h[my] = rank + 1;
}

constexpr int kScanThreads = 1024;
__global__ void __launch_bounds__(kScanThreads) sort_scan_kernel(int32_t* __restrict__ hist, int64_t n_chunks, int E,
                                                                 int32_t* __restrict__ offsets) {
  detail::pdl_entry();
  __shared__ int part[kScanThreads];
  const int per = (E + kScanThreads - 1) / kScanThreads, e0 = threadIdx.x * per, e1 = min(E, e0 + per);
  // totals of this thread's experts (column sums), converted to per-chunk exclusive bases
  int sum = 0;
  for (int e = e0; e < e1; ++e) {
    int run = 0;
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int v = hist[c * E + e];
      hist[c * E + e] = run;
      run += v;
    }
    offsets[e] = run;  // total for now
    sum += run;
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {  // exclusive scan of the thread totals (1024 adds, once)
    int o = 0;
    for (int t = 0; t < kScanThreads; ++t) {
      const int v = part[t];
      part[t] = o;
      o += v;
    }
    offsets[E] = o;
  }
  __syncthreads();
  int o = part[threadIdx.x];
  for (int e = e0; e < e1; ++e) {
    const int cnt = offsets[e];
    offsets[e] = o;
    for (int64_t c = 0; c < n_chunks; ++c) hist[c * E + e] += o;
    o += cnt;
  }
}

__global__ void __launch_bounds__(kSortChunk) sort_place_kernel(const int32_t* __restrict__ experts, int64_t TK, int E,
                                                                const int32_t* __restrict__ base,
                                                                int32_t* __restrict__ slot_pos) {
  detail::pdl_entry();
  const int64_t i = blockIdx.x * int64_t(kSortChunk) + threadIdx.x;
  if (i >= TK) return;
  const int e = experts[i];
  if (e < 0 || e >= E) return;
  slot_pos[i] += base[blockIdx.x * int64_t(E) + e];
}

}  // namespace

bool bf16_linear_lt(const uint16_t* x, int64_t M, const uint16_t* w, int64_t N, int64_t K, void* y, bool y_bf16,
                    void* workspace, void* stream) {
  if (M <= 0 || N <= 0) return true;
  if (K <= 0) return fail("bf16_linear_lt: K must be positive");
  if (!x || !w || !y) return fail("bf16_linear_lt: null argument");
  if (!workspace) return fail("bf16_linear_lt: workspace (fp8_linear_lt_workspace_bytes) required");
  detail::LtCache& c = detail::lt_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  detail::LtPlan* p = nullptr;
  const detail::LtKey key{int(detail::LtKind::kBf16), M, N, K, y_bf16};
  auto build = [&](detail::LtPlan& np) { return build_bf16_plan(np, M, N, K, y_bf16); };
  if (!detail::lt_get_plan(c, key, "bf16_linear_lt", build, &p)) return false;
  const float one = 1.f, zero = 0.f;
  const cublasStatus_t st = cublasLtMatmul(c.handle, p->desc, &one, w, p->a, x, p->b, &zero, y, p->d, y, p->d,
                                           &p->algo, workspace, kLtWorkspace, as_stream(stream));
  if (st != CUBLAS_STATUS_SUCCESS) return detail::lt_fail("bf16_linear_lt", "cublasLtMatmul", st);
  return true;
}

namespace {
// moe_route_gemm's rows per GEMM: the three-part rows of a whole 8k-token chunk would take 192 MB
// of workspace (at d = 4096) for no more speed than GEMMs of 2048 rows.
constexpr int64_t kRouteGemmMaxRows = 2048;
// moe_route_gemm's workspace: cuBLASLt's, then the three-part rows [min(T, kRouteGemmMaxRows), 3d],
// then the gate [E, 3d].
struct RouteWs {
  size_t x3, w3, bytes;
  RouteWs(int64_t T, int64_t d, int64_t E) {
    auto up = [](size_t n) { return (n + 255) / 256 * 256; };
    const size_t rows = size_t(std::min(T, kRouteGemmMaxRows));
    x3 = kLtWorkspace, w3 = x3 + up(rows * 3 * d * 2), bytes = w3 + up(size_t(E) * 3 * d * 2);
  }
};
}  // namespace

size_t moe_route_gemm_workspace_bytes(int64_t T, int64_t d, int64_t E) { return RouteWs(T, d, E).bytes; }

bool moe_route_gemm(const float* h, int64_t T, int64_t d, const uint16_t* gate, int64_t E, const float* bias, int k,
                    float scaling, float* logits_ws, int32_t* experts, float* weights, void* workspace, void* stream) {
  if (d % 8 || E % 8 || E > 1024 || k > 16 || k > E) return fail("moe_route_gemm: need d % 8 == 0, E % 8 == 0, E <= 1024, k <= 16");
  if (T <= 0) return true;
  if (!h || !gate || !logits_ws || !workspace || !experts != !weights) return fail("moe_route_gemm: null argument");
  auto* base = static_cast<unsigned char*>(workspace);
  const RouteWs ws(T, d, E);
  auto* x3 = reinterpret_cast<uint16_t*>(base + ws.x3);
  auto* w3 = reinterpret_cast<uint16_t*>(base + ws.w3);
  const cudaStream_t s = as_stream(stream);
  detail::launch_pdl(repeat3_bf16_kernel, static_cast<unsigned>((E * d / 8 + 255) / 256), 256, 0, s, gate, E, d, w3);
  if (!check_launch("repeat3_bf16_kernel")) return false;
  for (int64_t t0 = 0; t0 < T; t0 += kRouteGemmMaxRows) {  // rows are independent
    const int64_t m = std::min(kRouteGemmMaxRows, T - t0);
    detail::launch_pdl(split_bf16x3_kernel, static_cast<unsigned>((m * d / 4 + 255) / 256), 256, 0, s, h + t0 * d, m, d,
                       x3);
    if (!check_launch("split_bf16x3_kernel")) return false;
    if (!bf16_linear_lt(x3, m, w3, E, 3 * d, logits_ws + t0 * E, false, base, stream)) return false;
  }
  if (!experts) return true;  // the logits only
  return moe_route_from_logits(logits_ws, T, E, bias, k, scaling, experts, weights, stream);
}

bool embed_rows(const uint16_t* table, int64_t V, int64_t d, const int32_t* ids, int64_t T, float* out, int32_t* bad,
                void* stream) {
  if (T <= 0 || d <= 0) return true;
  if (!table || !ids || !out) return fail("embed_rows: null argument");
  if (T > 0x7fffffff) return fail("embed_rows: T too large");
  const bool vec = d % 8 == 0 && reinterpret_cast<uintptr_t>(table) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  detail::launch_pdl(embed_kernel, unsigned(T), 256, 0, as_stream(stream), table, V, d, ids, out, bad, vec);
  return check_launch("embed_rows");
}

bool mxfp4_to_fp8_blocks(const uint8_t* w, const uint8_t* scale, int64_t N, int64_t K, uint8_t* out, float* out_scale,
                         void* stream) {
  if (N <= 0 || K <= 0) return true;
  if (N % 128 || K % 128) return fail("mxfp4_to_fp8_blocks: N, K must be multiples of 128");
  if (N / 128 > 65535) return fail("mxfp4_to_fp8_blocks: N too large");
  if (!w || !scale || !out || !out_scale) return fail("mxfp4_to_fp8_blocks: null argument");
  mxfp4_to_fp8_kernel<<<dim3(unsigned(K / 128), unsigned(N / 128)), 256, 0, as_stream(stream)>>>(w, scale, K, out,
                                                                                                  out_scale);
  return check_launch("mxfp4_to_fp8_blocks");
}

size_t moe_sort_tokens_workspace_bytes(int64_t T, int k, int64_t n_experts) {
  const int64_t tk = T * k, chunks = std::max<int64_t>(1, (tk + kSortChunk - 1) / kSortChunk);
  return size_t(chunks) * size_t(std::max<int64_t>(n_experts, 1)) * sizeof(int32_t);
}

bool moe_sort_tokens(const int32_t* experts, int64_t T, int k, int64_t n_experts, int32_t* offsets, int32_t* slot_pos,
                     void* workspace, void* stream) {
  if (n_experts <= 0 || k <= 0 || T < 0) return fail("moe_sort_tokens: bad shape");
  const int64_t tk = T * k;
  if (tk > 0x7fffffff || n_experts > (1 << 20)) return fail("moe_sort_tokens: T * k or n_experts too large");
  if (!offsets || (tk > 0 && (!experts || !slot_pos || !workspace))) return fail("moe_sort_tokens: null argument");
  const int E = static_cast<int>(n_experts);
  const int64_t chunks = (tk + kSortChunk - 1) / kSortChunk;
  int32_t* hist = static_cast<int32_t*>(workspace);
  if (chunks == 0) {
    return check(cudaMemsetAsync(offsets, 0, size_t(E + 1) * sizeof(int32_t), as_stream(stream)),
                 "moe_sort_tokens: memset");
  }
  detail::launch_pdl(sort_rank_kernel, unsigned(chunks), kSortChunk, 0, as_stream(stream), experts, tk, E, slot_pos, hist);
  if (!check_launch("moe_sort_tokens rank")) return false;
  detail::launch_pdl(sort_scan_kernel, 1, kScanThreads, 0, as_stream(stream), hist, chunks, E, offsets);
  if (!check_launch("moe_sort_tokens scan")) return false;
  detail::launch_pdl(sort_place_kernel, unsigned(chunks), kSortChunk, 0, as_stream(stream), experts, tk, E, hist, slot_pos);
  return check_launch("moe_sort_tokens place");
}

}  // namespace deepinfer::cuda
