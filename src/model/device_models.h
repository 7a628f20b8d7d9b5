// The device models load_model dispatches to for LoadOptions::device != "cpu". Which file
// defines load_cuda_model (and the synthetic model and floor helpers below) is chosen in
// src/model/CMakeLists.txt: model_device_cuda.cpp (the DeepSeek-V4 GPU model,
// model/deepseek_v4_gpu) when the CUDA backend is built, else model_device_none.cpp (a clear
// error). No #if outside src/backend.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/decode_floor.h"
#include "model/deepseek_v4/prefill_flops.h"
#include "model/numerics.h"

namespace deepinfer {

class Model;

/// A deepseek_v4 checkpoint on the CUDA device; an error when the build or machine has none.
Result<std::unique_ptr<Model>> load_cuda_model(const std::string& dir, const LoadOptions& opt);

/// A DeepSeek-V4 model of config `c` on the CUDA device with random weights generated there in
/// the stored formats (v4gpu::GpuWeights::synthetic); an error when the build or machine has none.
Result<std::unique_ptr<Model>> synthetic_cuda_model(const v4::V4Config& c, uint64_t seed, const LoadOptions& opt);

/// Bytes one decode step (one token for each of `batch` sequences at `context` tokens) must move
/// at least, for the bench's memory floor:
struct DecodeBytes {
  double dense = 0;    // every weight but the routed experts, the embedding and tid2eid (once)
  double experts = 0;  // per MoE layer: the expected distinct routed experts of the batch,
                       // E * (1 - (1 - k/E)^batch), times one expert's bytes
  double state = 0;    // state read per sequence: window ring rows, compressed KV (HCA: all,
                       // CSA: the index_topk kept), the CSA indexer's keys
  double weights = 0;  // not part of the floor: every weight byte on the device
  double total() const { return dense + experts + state; }
};
/// DecodeBytes of a model load_cuda_model / synthetic_cuda_model made; an error for other models.
Result<DecodeBytes> cuda_decode_bytes(const Model& m, int64_t batch, int64_t context);

/// v4::prefill_flops of the config of a model load_cuda_model / synthetic_cuda_model made, for
/// one prompt of `tokens_per_prompt` tokens (the bench's compute floor); an error for other models.
Result<v4::PrefillFlops> cuda_prefill_flops(const Model& m, int64_t tokens_per_prompt);

/// The config of a model load_cuda_model / synthetic_cuda_model made (for v4::decode_part_floors /
/// prefill_part_floors: the floors of the parts its profile names); an error for other models.
Result<v4::V4Config> cuda_v4_config(const Model& m);

/// Where a CUDA model's forwards spent their wall time, summed since the last reset: host
/// preparation (inputs packed, state room reserved, uploaded), the device's work (launch to
/// stream done; graph-replayed steps counted apart) and the logits' copy back to the host.
struct StepTimes {
  int64_t steps = 0, graph_steps = 0;  // graph_steps: launched from a graph (captured in the step or before)
  int64_t captures = 0;                 // graphs captured in these steps (their host time is the capture's)
  int64_t graph_drops = 0;              // times the graphs were dropped because a workspace moved
  double host_s = 0, device_s = 0, logits_s = 0;
  /// The host preparation by part ("host: ..."), and with CudaTuning::profile the device time by
  /// part of the forward (embedding, each layer's attention projections / attention / output,
  /// MoE shared / routed / combine, head), summed over the layers, in the order first seen. Each
  /// device part ends with a device synchronisation, so parts do not overlap (side streams are
  /// serialised) and a profiled step runs eagerly.
  std::vector<std::pair<std::string, double>> parts_s;
};
/// The model's StepTimes; reset=true zeroes them afterwards. An error for non-CUDA models.
Result<StepTimes> cuda_step_times(Model& m, bool reset);

/// Knobs of a CUDA model that change its speed; only moe_wide_rows, moe_wgmma, moe_fp8, moe_split_k,
/// fp8_wgmma_rows, fp8_wgmma_max_rows, attn_wgmma, attn_split, bf16_gemv_max_n and lt_timed change results,
/// and only in the last bits (another kernel's fp32 sum order, never in batch-invariant mode).
struct CudaTuning {
  int moe_group_rows = 0;  // rows per routed-expert group of the narrow kernel: 16, 32 or 64; 0: 16
  int moe_wide_rows = 0;   // the wide expert kernels from this many routed rows (tokens x top-k); 0: 1 where the
                           // experts take the FP8 kernels, else 32; -1: never
  bool moe_wgmma = true;   // the wide expert kernels on warpgroup MMA (groups <= 128 rows); false: mma.sync (<= 64)
  bool moe_wgmma_exact = false;  // always their variant for any scales (slower), even when all fold
  bool moe_fp8 = true;     // expert groups (<= 128 rows) on the FP8 kernels (e4m3 rows, as the reference) where the scales fold
  int moe_fp8_max_rows = 0;  // the FP8 expert kernels for groups of up to 64 or 128 rows (prefill's); 0: 128
  int moe_split_k = 0;     // the FP8 expert kernels' K split over clusters of 2 at decode widths: 0 by their rule
                           // (few groups, long K), 1 never, 2 wherever the widths allow
  int route_gemm_rows = 0;  // routers of more than this many rows take their logits from one bf16 GEMM
                            // (moe_route_gemm); 0: 256 (prefill chunks), -1: never
  int fp8_wgmma_rows = 0;  // FP8 linears from this many rows (to 64; the grouped wo_a to 256) on the wgmma decode kernel; 0: 1, -1: never
  int fp8_wgmma_max_rows = 0;  // ... and up to this many rows, 64-256 (past 64 every N, where cuBLASLt runs them by
                               // default); 0: 64
  int attn_heads_per_block = 0;  // decode attention's heads per block: 16 or 64; 0: by the launch size
  bool attn_wgmma = true;  // attention's 64-head blocks (large launches) on the warpgroup-MMA kernel
  int attn_split = 0;      // decode attention's base split in rows (a multiple of 64; 0: 64 for batches that would
                           // leave most SMs idle, else 256: dc::decode_base_split), fewer splits where the batch fills
                           // the GPU (dc::decode_split_rows); default mode only
  int bf16_gemv_max_n = 0;  // bf16 linears of up to 8 rows (decode) and at most this many outputs on the GEMV kernel
                            // (cuda::bf16_gemv: weights loaded before the PDL wait, no split-K reduction launch); 0:
                            // 16384 (the compressors' and indexer's projections), any at 1-2 rows (the head too); -1: never
  bool act_pack = true;    // a norm writes its FP8 / bf16 forms for the linears that read it (up to 1,024 tokens the
                           // ffn norm also the routed experts' e4m3 rows), and past 256 rows the grouped wo_a's FP8
                           // input is written group-major, wo_b's from its groups (same bits)
  bool hc_post_partial = true;  // up to 16 tokens an mHC post makes the next sub-layer's hc_pre partial sums in its
                                // own launch (same bits)
  bool lt_timed = true;    // cuBLASLt FP8 GEMMs of up to kLtTimedMaxRows rows: the fastest algorithm, timed when first seen
  bool profile = false;    // StepTimes::parts_s (every step eager, synchronised per part)
  bool operator==(const CudaTuning&) const = default;
  /// An error naming the first knob out of its range (by its `deepinfer bench` flag), else ok.
  Status check() const {
    auto one_of = [](int v, std::initializer_list<int> ok) { return std::find(ok.begin(), ok.end(), v) != ok.end(); };
    auto bad = [](const char* flag, const char* range, int v) {
      return Status::invalid_argument(std::string(flag) + " must be " + range + ", not " + std::to_string(v));
    };
    constexpr const char* kCount = "-1 (never), 0 (the default) or a count";
    if (!one_of(moe_group_rows, {0, 16, 32, 64})) return bad("--moe-group-rows", "0, 16, 32 or 64", moe_group_rows);
    if (moe_wide_rows < -1) return bad("--moe-wide-rows", kCount, moe_wide_rows);
    if (!one_of(moe_fp8_max_rows, {0, 64, 128})) return bad("--moe-fp8-max-rows", "0, 64 or 128", moe_fp8_max_rows);
    if (!one_of(moe_split_k, {0, 1, 2})) return bad("--moe-split-k", "0 (by the rule), 1 (never) or 2 (always)", moe_split_k);
    if (route_gemm_rows < -1) return bad("--route-gemm-rows", kCount, route_gemm_rows);
    if (fp8_wgmma_rows < -1) return bad("--fp8-wgmma-rows", kCount, fp8_wgmma_rows);
    if (fp8_wgmma_max_rows != 0 && (fp8_wgmma_max_rows < 64 || fp8_wgmma_max_rows > 256))
      return bad("--fp8-wgmma-max-rows", "0 (the default, 64) or 64 to 256", fp8_wgmma_max_rows);
    if (!one_of(attn_heads_per_block, {0, 16, 64}))
      return bad("--attn-heads-per-block", "0 (by the launch size), 16 or 64", attn_heads_per_block);
    if (bf16_gemv_max_n < -1) return bad("--bf16-gemv-max-n", kCount, bf16_gemv_max_n);
    if (attn_split < 0 || attn_split % 64 || attn_split > 65536)
      return bad("--attn-split", "0 (the default, by the batch) or a multiple of 64 up to 65536", attn_split);
    return Status::ok();
  }
};
/// Applies `t` to a CUDA model; an error for non-CUDA models or a group size not 0/16/32/64.
Status cuda_set_tuning(Model& m, const CudaTuning& t);

}  // namespace deepinfer
