// Private to the V4 CUDA forward (forward.cpp, forward_linear.cpp): its workspace slots and the
// row thresholds that pick a kernel per shape.
#pragma once

#include <cstdint>

namespace deepinfer::v4gpu::fwd {

// Workspace slots (Scratch): one per buffer of a forward.
enum Slot : int {
  kIds, kPos, kI32Pack, kI64Pack, kE, kX, kPre, kPost, kComb, kHcWs, kXin, kXn, kQa, kQan, kQb, kQ16, kKv, kKv16,
  kKvRows, kCkv, kCgate, kIkv, kIgate, kQidx, kWidx, kIndex, kNIndex, kAo, kOperm, kOa, kOa2, kF, kH, kSgu, kSa,
  kSy, kLogitsWs, kExperts, kWts, kSlotPos, kXp, kGp, kUp, kAp, kYp, kG13, kG2, kQ8, kQs, kFp8Ws, kLtWs,
  kX16, kYPad, kXp16, kAp16, kAttnWs, kIdxWs, kXr, kHin, kHn, kLogits, kInputs, kDIndex, kDNIndex, kMoeOff, kSortWs,
  kX8, kXs8, kA32, kA8, kAs8, kRouteWs, kXe8, kXes8, kRowTok,
  kPackQ8, kPackQs, kPack16, kQanQ8, kQanQs, kQan16,  // norm_pack's forms: xn, h and the head's rows; qan
  kWoaQ8, kWoaQs, kWobQ8, kWobQs,  // the per-group wo_a path's group-major FP8 input and wo_b's from its output
  kSlotCount,
};
static_assert(kSlotCount < 100, "Forward::ls gives lane l the slots 100 (l + 1) + slot");

inline constexpr int64_t kBf16MinRows = 16;   // cuBLASLt bf16 GEMMs run with at least this many rows
inline constexpr int64_t kBf16GemvMaxN = 16384;  // CudaTuning::bf16_gemv_max_n 0: bf16 decode linears of up to this many outputs on the GEMV
inline constexpr int64_t kBf16GemvAnyNRows = 4;  // ... and of any width (the head) at up to this many rows
inline constexpr int64_t kMoeChunk = 1024;    // routed-expert chunk of the narrow kernels (their fp32 rows)
// ... and of the wide ones: each chunk reads every routed expert's weights once (8 chunks of 1k
// tokens read them 8 times), so a prefill of up to 8k tokens is one chunk (moe_sort_tokens sorts
// its rows past moe_build_groups' one-block limit).
inline constexpr int64_t kMoeWideChunk = 8192;
inline constexpr int64_t kBiRows = 64;        // batch-invariant mode: every bf16 GEMM call has this many rows
inline constexpr int64_t kLtMinRows = 32;     // default mode: FP8 linears of at least this many rows use cuBLASLt
// ... and up to this many rows (decode batches, small mixed steps) on the fastest of cuBLASLt's
// candidate algorithms, timed when the shape is first seen (CudaTuning::lt_timed): at 256 rows its
// first choice ran the 2-8 MB weights at 16-22 us each (the EP step, ncu, H100). Larger prefill
// chunks, whose sizes vary, keep the heuristic's first.
inline constexpr int64_t kLtTimedMaxRows = 512;
// Default mode: FP8 linears of 1-64 rows use the wgmma decode kernel, except from 33 rows those with
// 4096 output columns (wo_b, shared w2), where cuBLASLt measured ahead (op bench fp8mid, H200).
// Below 16 rows the mma.sync GEMV (fp8_linear_skinny) ran until the thirty-eighth slice: the wgmma
// kernel took v4-flash-4's batch-1 step from 1.135 to 1.088 ms of device time and batch 8's from
// 1.855 to 1.794 (H100, --fp8-wgmma-rows 1 against 16 in one call).
inline constexpr int64_t kWgmmaMinRows = 1, kWgmmaMaxRows = 64, kWgmmaLtN = 4096;
// The grouped wo_a also past 64 rows, in one launch up to this many (kFp8WgmmaMaxRows; at 129-256
// rows each weight tile serves both halves of the batch): cuBLASLt there is one call per group on
// transposed copies.
inline constexpr int64_t kGroupedWgmmaMaxRows = 256;
// Default mode: routers of more than this many rows take their logits from one bf16 GEMM of
// exact three-part rows (moe_route_gemm) instead of moe_route's fp32 kernel (10-20 TFLOP/s at
// prefill sizes); decode batches up to 256 keep the kernel, whose bits do not depend on the rows.
inline constexpr int64_t kRouteGemmRows = 256;

}  // namespace deepinfer::v4gpu::fwd
