// GpuWeights: a V4 checkpoint's tensors uploaded to the device in the formats the CUDA ops take
// (V4-MODEL.md section 3), from the host-mapped v4::V4Weights the loader binds:
//   dense linears (wq_a, wq_b, wkv, wo_a, wo_b, shared experts, indexer wq_b)
//       FP8 e4m3 with 128x128 E8M0 (or fp32) block scales, as stored; any other stored format
//       (bf16, f32, f16, other block sizes) is uploaded as bf16 and runs through the bf16 GEMM
//   bf16 projections (compressor / indexer wkv, wgate, weights_proj, embed, head, router)
//       bf16 (converted when stored otherwise)
//   routed experts     MXFP4 as stored (packed e2m1 + E8M0 per 32), the grouped expert kernel
//   mHC, norms, sinks, ape, bias   fp32; tid2eid int32
// check_gpu_config() rejects configurations the kernels do not implement, naming the field.
// synthetic() builds the same struct from random codes generated on the device in those formats
// (synthetic_weights.cpp): real shapes without a checkpoint, for benches.
#pragma once

#include <vector>

#include "backend/cuda/layer_ops.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"
#include "model/deepseek_v4_gpu/device_buffer.h"

namespace deepinfer::v4gpu {

/// One linear W [n, k] on the device: FP8 block-scaled or bf16.
struct GpuLinear {
  bool fp8 = false;
  bool scale_f32 = false;
  int64_t n = 0, k = 0;
  DeviceBuffer data, scale;
  DeviceBuffer scale32;  // E8M0 scales widened to fp32 for the cuBLASLt path (empty when scale_f32)
  /// The FP8 weight's rows [r0, r0 + rows) (r0 and rows multiples of 128).
  cuda::Fp8Weight fp8_rows(int64_t r0, int64_t rows) const;
  /// The same rows with fp32 scales, as fp8_linear_lt takes them.
  cuda::Fp8Weight lt_rows(int64_t r0, int64_t rows) const;
  /// Fills scale32 from E8M0 scales (once, at load).
  Status add_f32_scales();
  size_t bytes() const { return data.bytes() + scale.bytes() + scale32.bytes(); }
};

struct GpuHc {  // one mHC site, fn [24, 4d] fp32, base [24], scale [3]
  DeviceBuffer fn, base, scale;
};

struct GpuCompressor {
  // wkv's rows then wgate's ([2 cw, d] bf16, concat_rows), so that a decode step's compressor
  // input is one GEMM (rows [0, cw) and [cw, 2 cw) are the two projections).
  GpuLinear wkvg;
  DeviceBuffer ape;      // [ratio, cw] fp32
  DeviceBuffer norm;     // [width] fp32
  int64_t ratio = 0, width = 0;
  bool overlap = false;
  int64_t cw() const { return (overlap ? 2 : 1) * width; }
};

struct GpuLayer {
  v4::AttnKind kind = v4::AttnKind::kSliding;
  int64_t ratio = 0;
  bool hash = false;
  GpuHc hc_attn, hc_ffn;
  DeviceBuffer attn_norm, ffn_norm, q_norm, kv_norm, sinks, inv_freq;
  GpuLinear wq_a, wq_b, wkv, wo_a, wo_b;
  bool has_compressor = false, has_indexer = false;
  GpuCompressor cmp, icmp;
  GpuLinear idx_wq_b, weights_proj;
  DeviceBuffer gate;     // [E, d] bf16
  DeviceBuffer bias;     // [E] fp32 (zeros on hash layers)
  DeviceBuffer tid2eid;  // [vocab, k] int32 (hash layers)
  std::vector<DeviceBuffer> experts;  // per expert: w1, s1, w3, s3, w2, s2 in one blob
  DeviceBuffer expert_ptrs;           // [E] cuda::ExpertPtrs
  bool experts_foldable = false;      // every expert scale byte foldable (cuda::mxfp4_scales_foldable)
  bool experts_fp8_foldable = false;  // ... into the FP8 kernels' e4m3 tables (cuda::mxfp4_scales_fp8_foldable)
  bool experts_tiled = false;         // expert weights in 64-row tiles (cuda::mxfp4_tile64; I, d % 64 == 0)
  // The shared expert: w1's rows then w3's ([2 I, d], concat_rows) so that one GEMM computes the
  // gate and the up projection (the SwiGLU reads the two halves), and w2.
  GpuLinear sh_w13, sh_w2;
};

struct GpuWeights {
  DeviceBuffer embed;  // [vocab, d] bf16
  GpuLinear head;
  DeviceBuffer norm;   // [d] fp32
  GpuHc hc_head;       // padded to the hc_pre layout: fn rows 0..3 = hc_head_fn, the rest zero
  std::vector<GpuLayer> layers;
  size_t bytes = 0;    // device bytes of every weight

  static Result<GpuWeights> upload(const v4::V4Weights& w, const v4::V4Config& c);
  /// Random weights of config `c` generated on the device in the stored formats (FP8 e4m3 +
  /// E8M0 128x128 dense linears, MXFP4 routed experts, bf16 projections / embed / head / router,
  /// fp32 mHC / norms / sinks / ape / bias, int32 tid2eid with distinct experts per row), scaled
  /// as bench/cuda_model does so activations stay finite through all 43 layers. Deterministic in
  /// `seed`. The fields are those upload() fills.
  static Result<GpuWeights> synthetic(const v4::V4Config& c, uint64_t seed);
};

// ---- shared by upload() and synthetic() ----
/// One expert's blob: w1, s1, w3, s3, w2, s2 (packed e2m1 / E8M0 each), every part 16-aligned.
struct ExpertLayout {
  size_t off[6] = {};
  size_t len[6] = {};
  size_t bytes = 0;
  cuda::ExpertPtrs ptrs(const uint8_t* base) const;
  /// The blob's three packed e2m1 parts (stored layout) -> the device layout the MXFP4 kernels
  /// read (cuda::mxfp4_to_device_layout), in place, on the default stream.
  Status to_device_layout(uint8_t* base, const std::string& what) const;
  /// The blob (w1, w3 [I, d], w2 [d, I], device layout) -> a new blob of the same layout holding
  /// each weight and its scales in 64-row tiles (cuda::mxfp4_tile64); the old one is freed.
  Status to_tiles(DeviceBuffer& blob, int64_t I, int64_t d, const std::string& what) const;
};
ExpertLayout expert_layout(const size_t part_bytes[6]);
/// Whether the experts' weights go into 64-row tiles: they stream as whole 4 KB runs (op bench,
/// H200: the wide expert kernels 1.2-1.4x faster); needs I and d % 64 == 0.
inline bool experts_tileable(int64_t I, int64_t d) { return I % 64 == 0 && d % 64 == 0; }
/// Whether every E8M0 scale byte of the experts (w1, w3 [I, d], w2 [d, I]) lies in the range the
/// expert kernels fold into their fp16 tables (cuda::mxfp4_scales_foldable); synchronises.
Result<bool> experts_scales_foldable(const std::vector<cuda::ExpertPtrs>& ptrs, int64_t I, int64_t d,
                                     bool fp8 = false);
/// The layer's RoPE inverse frequencies (model/deepseek_v4/rope.h): main table for sliding
/// layers, the YaRN "compress" one for CSA/HCA.
Result<DeviceBuffer> rope_inv_freq(v4::AttnKind kind, const v4::V4Config& c);
/// hc_head [n, n*d] as an hc_pre site, zero-filled: fn [(2+n)*n, cols], base [(2+n)*n], scale
/// {1, 1, 1}; the caller writes fn rows 0..n-1, base[0..n-1] and scale[0] (pre_j = sigmoid(m_j
/// s0 + b_j) + eps is the head collapse).
Result<GpuHc> hc_head_site(int64_t n, int64_t cols);
size_t layer_bytes(const GpuLayer& g);
/// Two linears of one input as one: a's rows then b's, [a.n + b.n, k] (FP8 rows stay whole 128-row
/// scale blocks, as every FP8 GpuLinear's n is a multiple of 128). An error where their k or
/// formats differ (upload them both as bf16 then).
Result<GpuLinear> concat_rows(const GpuLinear& a, const GpuLinear& b, const std::string& what);
/// GpuWeights::bytes: every weight buffer (hc_head's fn only).
size_t total_bytes(const GpuWeights& g);

/// Ok when the CUDA ops implement this configuration; else an error naming the config field.
Status check_gpu_config(const v4::V4Config& c);

}  // namespace deepinfer::v4gpu
