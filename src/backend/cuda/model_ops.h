// CUDA ops the whole V4 model needs beyond one decode layer (issue D): bf16 GEMMs (the
// checkpoint's bf16 compressor / indexer projections and head), the embedding gather, and the
// prefill MoE path (MXFP4 experts re-blocked to FP8 128x128 for cuBLASLt, per-expert row offsets).
// Same conventions as cuda_ops.h: plain C++17, no CUDA types, asynchronous on `stream`, false +
// last_error() on failure, row-independent math with a reduction order fixed by the shape.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_ops.h"

namespace deepinfer::cuda {

/// y[M, N] = x[M, K] . W[N, K]^T with x and W bf16, fp32 accumulate, y fp32 (or bf16 when
/// y_bf16), through cuBLASLt (plans cached per (M, N, K, out type)). A fixed algorithm per shape:
/// the result of a row does not depend on M only if the caller keeps M fixed (decode graphs do);
/// say so where batch invariance matters. workspace: fp8_linear_lt_workspace_bytes().
bool bf16_linear_lt(const uint16_t* x, int64_t M, const uint16_t* w, int64_t N, int64_t K, void* y, bool y_bf16,
                    void* workspace, void* stream = nullptr);

/// y[M, N] = x[M, K] . W[N, K]^T for a few rows (M <= bf16_gemv_max_rows()), x and W bf16, y fp32:
/// a warp per output column n streams W's row n, its lanes holding the whole row (K <= 4096) in
/// registers, loaded before the PDL wait (no kernel writes weights), so the weight stream overlaps
/// the kernels before it; then each lane's fmaf over its columns (l * 8 .. l * 8 + 7 of each 256)
/// in order, and the warp's xor tree. A row's sum never depends on M (each row on its own), but
/// it is not bf16_linear_lt's order. K % 256 == 0 and K <= 4096.
bool bf16_gemv(const uint16_t* x, int64_t M, const uint16_t* w, int64_t N, int64_t K, float* y, void* stream = nullptr);
constexpr int64_t bf16_gemv_max_rows() { return 8; }
/// Whether bf16_gemv takes M rows of K inputs (0 <= M <= bf16_gemv_max_rows(), K a multiple of 256
/// up to 4096: a lane holds its 16-byte slice of each 256-wide step of a weight row).
constexpr bool bf16_gemv_fits(int64_t M, int64_t K) {
  return M >= 0 && M <= bf16_gemv_max_rows() && K > 0 && K % 256 == 0 && K <= 4096;
}

/// moe_route (layer_ops.h) with its logits as one bf16 GEMM on the tensor cores (prefill): each
/// fp32 row of h is split exactly into three bf16 parts, h = hi + mid + lo (each the rounding of
/// what the ones before left), and logits = [hi | mid | lo] . [gate | gate | gate]^T with K = 3d
/// through cuBLASLt, fp32 accumulate: every product is exact, so the logits are fp32 dot
/// products as the reference's `x.float() @ W.float()`, only summed in another order than
/// moe_route's kernel (last bits differ; not for batch-invariant mode). Then the same top-k (none
/// where experts and weights are both null: the logits only).
/// workspace: moe_route_gemm_workspace_bytes(T, d, E).
size_t moe_route_gemm_workspace_bytes(int64_t T, int64_t d, int64_t E);
bool moe_route_gemm(const float* h, int64_t T, int64_t d, const uint16_t* gate, int64_t E, const float* bias, int k,
                    float scaling, float* logits_ws, int32_t* experts, float* weights, void* workspace,
                    void* stream = nullptr);

/// out[t, :] = float(table[ids[t], :]) for a bf16 table [V, d]; ids outside [0, V) give zeros
/// and set *bad (device int, may be null) to 1.
bool embed_rows(const uint16_t* table, int64_t V, int64_t d, const int32_t* ids, int64_t T, float* out,
                int32_t* bad = nullptr, void* stream = nullptr);

/// MXFP4 weight [N, K] (packed e2m1 [N, K/2] in the device layout, cuda_ops.h; E8M0 [N, K/32]) ->
/// FP8 E4M3 [N, K] with fp32 scales [N/128, K/128] (the layout fp8_linear_lt takes with
/// scale_is_f32): per 128x128 tile, scale = 2^(emax - 127 - 6) with emax the tile's largest E8M0
/// byte, value = e2m1 * 2^(e - emax + 6) rounded to e4m3. Exact while e >= emax - 11 (smaller
/// values go to e4m3 subnormals, then zero). Requires N % 128 == 0, K % 128 == 0.
bool mxfp4_to_fp8_blocks(const uint8_t* w, const uint8_t* scale, int64_t N, int64_t K, uint8_t* out,
                         float* out_scale, void* stream = nullptr);

/// From experts [T, k] (device): counts per expert and offsets [E + 1] (exclusive prefix sum,
/// offsets[E] = T * k) of the expert-sorted order that moe_build_groups' slot_pos uses (experts
/// ascending, (token, slot) ascending within one), and slot_pos [T * k] itself. Works for any T
/// (prefill); one pass of counting + one of placement, deterministic.
bool moe_sort_tokens(const int32_t* experts, int64_t T, int k, int64_t n_experts, int32_t* offsets,
                     int32_t* slot_pos, void* workspace, void* stream = nullptr);
size_t moe_sort_tokens_workspace_bytes(int64_t T, int k, int64_t n_experts);

}  // namespace deepinfer::cuda
