// MoE grouping / permutation / combine (routing: moe_route.cu; the mHC: mhc.cu), clamped SwiGLU, layout helpers
// and on-device random weights (layer_ops.h).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include <cub/block/block_scan.cuh>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/layer_ops.h"
#include "backend/cuda/mma_common.cuh"
#include "backend/cuda/moe_combine.cuh"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;
using detail::MoeCombineIn;
using detail::moe_combine4;

namespace {

// ---- expert grouping (one block of 256 threads; E <= 1024: 4 experts per thread in the scans) ----
constexpr int kMaxSlots = 8192, kGroupRows = 16;  // default: one m16 tile per group, the fast MT = 1 path
__global__ void __launch_bounds__(256) moe_groups_kernel(const int32_t* __restrict__ experts, int TK, int E,
                                                         const ExpertPtrs* __restrict__ ptrs, const float* x_perm,
                                                         float* g_perm, float* u_perm, const float* a_perm,
                                                         float* y_perm, int64_t d, int64_t inter, int max_groups,
                                                         int group_rows, int32_t* __restrict__ slot_pos,
                                                         Mxfp4Group* __restrict__ g13, Mxfp4Group* __restrict__ g2,
                                                         const int32_t* __restrict__ offsets, int k,
                                                         int32_t* __restrict__ row_token) {
  detail::pdl_entry();
  __shared__ int ex[kMaxSlots];
  __shared__ int cg[2][1024], off[1024];  // cg: the counts and the groups' starts, then (E <= 256) the warps' counts
  int* const cnt = cg[0];
  int* const gst = cg[1];
  if (offsets) {  // sorted already (moe_sort_tokens): the counts from its offsets, slot_pos as it wrote it
    for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = offsets[e + 1] - offsets[e];
  } else {
    for (int i = threadIdx.x; i < E; i += blockDim.x) cnt[i] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < TK; i += blockDim.x) {
      const int e = experts[i];
      ex[i] = e;
      atomicAdd(&cnt[e], 1);
    }
  }
  __syncthreads();
  {  // exclusive prefix sums of the rows and groups per expert: thread i owns experts 4i..4i+3
    using Scan = cub::BlockScan<int, 256>;
    __shared__ typename Scan::TempStorage scan_tmp[2];
    int c[4], rows = 0, groups = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = threadIdx.x * 4 + j;
      c[j] = e < E ? cnt[e] : 0;
      rows += c[j], groups += (c[j] + group_rows - 1) / group_rows;
    }
    int o, g;
    Scan(scan_tmp[0]).ExclusiveSum(rows, o);
    Scan(scan_tmp[1]).ExclusiveSum(groups, g);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = threadIdx.x * 4 + j;
      if (e < E) off[e] = o, gst[e] = g;
      o += c[j], g += (c[j] + group_rows - 1) / group_rows;
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    if (cnt[e] == 0) continue;
    const ExpertPtrs p = ptrs[e];
    for (int c = 0; c * group_rows < cnt[e]; ++c) {
      const int g = gst[e] + c;
      const int64_t r0 = off[e] + c * group_rows;
      const int m = min(group_rows, cnt[e] - c * group_rows);
      // a null buffer (the wide kernels' x / g / u / a: they address x16 / a16 by row0) stays null
      auto at = [r0](auto* base, int64_t cols) { return base ? base + r0 * cols : nullptr; };
      Mxfp4Group a;
      a.w = p.w1, a.scale = p.s1, a.x = at(x_perm, d), a.y = at(g_perm, inter), a.m = m;
      a.row0 = static_cast<int32_t>(r0);
      g13[2 * g] = a;
      a.w = p.w3, a.scale = p.s3, a.y = at(u_perm, inter);
      g13[2 * g + 1] = a;
      a.w = p.w2, a.scale = p.s2, a.x = at(a_perm, inter), a.y = at(y_perm, d);
      g2[g] = a;
    }
  }
  // unused entries: m = 0
  const int used = gst[E - 1] + (cnt[E - 1] + group_rows - 1) / group_rows;
  for (int g = used + threadIdx.x; g < max_groups; g += blockDim.x) {
    Mxfp4Group z;
    g13[2 * g] = z;
    g13[2 * g + 1] = z;
    g2[g] = z;
  }
  if (offsets) return;
  // Slot i's row: its expert's first row + that expert's slots before i (stable). A warp walks
  // slots 32 at a time: the lanes of one expert rank among themselves by a match mask, and the
  // lowest advances the expert's running count. One thread per expert scanning every slot took
  // 23 us at 1,536 slots of 32 experts (H100 ncu); warp 0 alone walking all of them is 48 steps
  // of that serial chain (the kernel: ~13 us in ncu at the EP step). With E <= 256 the 8 warps
  // take a contiguous eighth of the slots each: ranks within the eighth (packed beside the expert
  // in ex[]), then each eighth's base per expert (off[] + the earlier eighths' counts), then the
  // sum: the same rows (H100, route bench: 1,536 slots of 32 experts 14.8 -> 6.2 us, of 256
  // experts 20.2 -> 9.6). Larger E, or up to 256 slots (8 steps or fewer; there the split's extra
  // barriers cost 0.6 us): warp 0 walks them all, advancing off[] (no longer read above).
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  auto walk = [&](int b0, int b1, int* run, bool pack) {
    for (int b = b0; b < b1; b += 32) {
      const int i = b + lane;
      const int e = i < b1 ? ex[i] : -1 - lane;  // past the range: a key of its own
      const unsigned same = __match_any_sync(0xffffffffu, e);
      const int rank = __popc(same & ((1u << lane) - 1u));
      const int r = i < b1 ? run[e] : 0;
      __syncwarp();
      if (i < b1) {
        if (pack) {
          ex[i] = e | (r + rank) << 10;  // E <= 1024: 10 bits of expert
        } else {
          slot_pos[i] = r + rank;
          if (row_token) row_token[r + rank] = i / k;
        }
        if (rank == 0) run[e] = r + __popc(same);
      }
      __syncwarp();
    }
  };
  constexpr int kWarps = 8, kSplitMaxE = 2048 / kWarps, kSplitMinSlots = 257;
  if (E > kSplitMaxE || TK < kSplitMinSlots) {
    if (warp == 0) walk(0, TK, off, false);
    return;
  }
  int(*const wc)[kSplitMaxE] = reinterpret_cast<int(*)[kSplitMaxE]>(&cg[0][0]);  // [warp][expert]
  for (int i = threadIdx.x; i < kWarps * kSplitMaxE; i += blockDim.x) wc[i / kSplitMaxE][i % kSplitMaxE] = 0;
  __syncthreads();
  const int per = (TK + kWarps - 1) / kWarps, b0 = min(TK, warp * per), b1 = min(TK, b0 + per);
  walk(b0, b1, wc[warp], true);
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int base = off[e];
    for (int w = 0; w < kWarps; ++w) {
      const int c = wc[w][e];
      wc[w][e] = base;
      base += c;
    }
  }
  __syncthreads();
  for (int i = b0 + lane; i < b1; i += 32) {
    const int row = wc[warp][ex[i] & 1023] + (ex[i] >> 10);
    slot_pos[i] = row;
    if (row_token) row_token[row] = i / k;
  }
}

__global__ void moe_permute_kernel(const float* __restrict__ h, int k, int d, const int32_t* __restrict__ slot_pos,
                                   float* __restrict__ x_perm) {
  detail::pdl_entry();
  const int i = blockIdx.x;
  const float4* src = reinterpret_cast<const float4*>(h + int64_t(i / k) * d);
  float4* dst = reinterpret_cast<float4*>(x_perm + int64_t(slot_pos[i]) * d);
  for (int c = threadIdx.x; c < d / 4; c += blockDim.x) dst[c] = src[c];
}

__global__ void moe_combine_kernel(const float* __restrict__ y, const int32_t* __restrict__ slot_pos,
                                   const float* __restrict__ w, const float* __restrict__ shared, int64_t T, int k,
                                   int d, float* __restrict__ out) {
  detail::pdl_entry();
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int q = d / 4;
  if (i >= T * q) return;
  const int64_t t = i / q;
  const int e = static_cast<int>(i % q) * 4;
  *reinterpret_cast<float4*>(out + t * d + e) = moe_combine4(MoeCombineIn{y, slot_pos, w, shared, k}, t, d, e);
}

__global__ void swiglu_kernel(const float* __restrict__ g, const float* __restrict__ u, int64_t ld, int64_t R,
                              int64_t I, float L, float* __restrict__ a) {
  detail::pdl_entry();
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= R * I) return;
  const int64_t r = i / I, c = i % I;
  a[i] = detail::swiglu_clamped(g[r * ld + c], u[r * ld + c], L);
}

__global__ void cast_bf16_kernel(const float* __restrict__ src, int64_t rows, int64_t cols, uint16_t* __restrict__ dst,
                                 int64_t ld) {
  detail::pdl_entry();
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= rows * cols) return;
  const __nv_bfloat16 b = __float2bfloat16_rn(src[i]);
  dst[(i / cols) * ld + i % cols] = *reinterpret_cast<const uint16_t*>(&b);
}

// rings[b][(pos[b] mod window) * cols + c] = bf16_rn(src[b * cols + c])
__global__ void rows_to_rings_kernel(const float* __restrict__ src, int64_t batch, int64_t cols,
                                     uint16_t* const* __restrict__ rings, const int32_t* __restrict__ pos,
                                     int64_t window) {
  detail::pdl_entry();
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= batch * cols) return;
  const int64_t b = i / cols, c = i % cols;
  int64_t slot = pos[b] % window;
  if (slot < 0) slot += window;
  const __nv_bfloat16 v = __float2bfloat16_rn(src[i]);
  rings[b][slot * cols + c] = *reinterpret_cast<const uint16_t*>(&v);
}

// 8-byte units: out[b, a, c] = in[a, b, c]
__global__ void swap01_kernel(const uint2* __restrict__ in, int64_t A, int64_t B, int64_t C8, uint2* __restrict__ out) {
  detail::pdl_entry();
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= A * B * C8) return;
  const int64_t c = i % C8, ab = i / C8, b = ab % B, a = ab / B;
  out[(b * A + a) * C8 + c] = in[i];
}

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_random_kernel(void* dst, int64_t count, int kind, float a, float b, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t z = mix64(seed + 0x9e3779b97f4a7c15ull * (i + 1));
    const float u = (static_cast<float>(z >> 40) * (1.f / 16777216.f)) * 2.f - 1.f;  // [-1, 1)
    switch (kind) {
      case 0:
        static_cast<uint8_t*>(dst)[i] = __nv_cvt_float_to_fp8(u * a, __NV_SATFINITE, __NV_E4M3);
        break;
      case 1:
        static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(z);
        break;
      case 2: {
        const int lo = static_cast<int>(a), hi = static_cast<int>(b);
        static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(lo + static_cast<int>(z % uint64_t(hi - lo + 1)));
        break;
      }
      case 3: {
        const __nv_bfloat16 v = __float2bfloat16_rn(u * a);
        static_cast<uint16_t*>(dst)[i] = *reinterpret_cast<const uint16_t*>(&v);
        break;
      }
      default:
        static_cast<float*>(dst)[i] = u * a;
    }
  }
}

inline unsigned blocks_for(int64_t n, int threads = 256) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

int moe_group_rows() { return kGroupRows; }

int64_t moe_build_groups_max_slots() { return kMaxSlots; }

int moe_max_groups(int64_t T, int k, int64_t n_experts, int group_rows) {
  const int64_t tk = T * k;
  return static_cast<int>(std::min<int64_t>(n_experts, tk) + tk / group_rows);
}

bool moe_build_groups(const int32_t* experts, int64_t T, int k, int64_t n_experts, const ExpertPtrs* ptrs,
                      const float* x_perm, float* g_perm, float* u_perm, const float* a_perm, float* y_perm,
                      int64_t d, int64_t inter, int max_groups, int32_t* slot_pos, Mxfp4Group* groups13,
                      Mxfp4Group* groups2, void* stream, int group_rows, const int32_t* offsets,
                      int32_t* row_token) {
  if ((!offsets && T * k > kMaxSlots) || n_experts > 1024)
    return fail("moe_build_groups: T*k > 8192 without offsets, or E > 1024");
  if (offsets && row_token) return fail("moe_build_groups: row_token is written with slot_pos (no offsets)");
  if (group_rows != 16 && group_rows != 32 && group_rows != 64 && group_rows != 128)
    return fail("moe_build_groups: group_rows not 16, 32, 64 or 128");
  if (max_groups < moe_max_groups(T, k, n_experts, group_rows)) return fail("moe_build_groups: max_groups too small");
  if (T <= 0) return true;
  detail::launch_pdl(moe_groups_kernel, 1, 256, 0, as_stream(stream), experts, static_cast<int>(T * k), static_cast<int>(n_experts),
                                                      ptrs, x_perm, g_perm, u_perm, a_perm, y_perm, d, inter,
                                                      max_groups, group_rows, slot_pos, groups13, groups2, offsets, k,
                                                      row_token);
  return check_launch("moe_groups_kernel");
}

bool moe_permute(const float* h, int64_t T, int k, int64_t d, const int32_t* slot_pos, float* x_perm, void* stream) {
  if (d % 4) return fail("moe_permute: d % 4 != 0");
  if (T <= 0) return true;
  detail::launch_pdl(moe_permute_kernel, static_cast<unsigned>(T * k), 256, 0, as_stream(stream), h, k, static_cast<int>(d), slot_pos,
                                                                                   x_perm);
  return check_launch("moe_permute_kernel");
}

bool moe_combine(const float* y_perm, const int32_t* slot_pos, const float* weights, const float* shared, int64_t T,
                 int k, int64_t d, float* out, void* stream) {
  if (d % 4) return fail("moe_combine: d % 4 != 0");
  if (T <= 0) return true;
  detail::launch_pdl(moe_combine_kernel, blocks_for(T * d / 4), 256, 0, as_stream(stream), y_perm, slot_pos, weights, shared, T, k,
                                                                           static_cast<int>(d), out);
  return check_launch("moe_combine_kernel");
}

bool swiglu(const float* g, const float* u, int64_t ld, int64_t R, int64_t I, float limit, float* a, void* stream) {
  if (R * I <= 0) return true;
  detail::launch_pdl(swiglu_kernel, blocks_for(R * I), 256, 0, as_stream(stream), g, u, ld, R, I, limit, a);
  return check_launch("swiglu_kernel");
}

bool cast_f32_to_bf16(const float* src, int64_t rows, int64_t cols, uint16_t* dst, int64_t dst_ld, void* stream) {
  if (rows * cols <= 0) return true;
  detail::launch_pdl(cast_bf16_kernel, blocks_for(rows * cols), 256, 0, as_stream(stream), src, rows, cols, dst, dst_ld);
  return check_launch("cast_bf16_kernel");
}

bool rows_to_rings(const float* src, int64_t batch, int64_t cols, uint16_t* const* rings, const int32_t* pos,
                   int64_t window, void* stream) {
  if (batch * cols <= 0) return true;
  if (!src || !rings || !pos) return fail("rows_to_rings: null argument");
  if (window <= 0) return fail("rows_to_rings: window must be positive");
  detail::launch_pdl(rows_to_rings_kernel, blocks_for(batch * cols), 256, 0, as_stream(stream), src, batch, cols, rings, pos, window);
  return check_launch("rows_to_rings_kernel");
}

bool swap01(const void* in, int64_t A, int64_t B, int64_t C, int elem_bytes, void* out, void* stream) {
  if ((C * elem_bytes) % 8) return fail("swap01: C * elem_bytes % 8 != 0");
  const int64_t c8 = C * elem_bytes / 8;
  if (A * B * c8 <= 0) return true;
  detail::launch_pdl(swap01_kernel, blocks_for(A * B * c8), 256, 0, as_stream(stream), static_cast<const uint2*>(in), A, B, c8,
                                                                        static_cast<uint2*>(out));
  return check_launch("swap01_kernel");
}

bool fill_random(void* dst, int64_t count, RandomKind kind, float a, float b, uint64_t seed, void* stream) {
  if (count <= 0) return true;
  fill_random_kernel<<<4096, 256, 0, as_stream(stream)>>>(dst, count, static_cast<int>(kind), a, b, seed);
  return check_launch("fill_random_kernel");
}

}  // namespace deepinfer::cuda
