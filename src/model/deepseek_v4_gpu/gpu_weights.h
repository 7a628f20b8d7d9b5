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
  /// The FP8 weight's rows [r0, r0 + rows) (r0 and rows multiples of 128).
  cuda::Fp8Weight fp8_rows(int64_t r0, int64_t rows) const;
  size_t bytes() const { return data.bytes() + scale.bytes(); }
};

struct GpuHc {  // one mHC site, fn [24, 4d] fp32, base [24], scale [3]
  DeviceBuffer fn, base, scale;
};

struct GpuCompressor {
  GpuLinear wkv, wgate;  // [cw, d]
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
  GpuLinear sh_w1, sh_w2, sh_w3;
};

struct GpuWeights {
  DeviceBuffer embed;  // [vocab, d] bf16
  GpuLinear head;
  DeviceBuffer norm;   // [d] fp32
  GpuHc hc_head;       // padded to the hc_pre layout: fn rows 0..3 = hc_head_fn, the rest zero
  std::vector<GpuLayer> layers;
  size_t bytes = 0;    // device bytes of every weight

  static Result<GpuWeights> upload(const v4::V4Weights& w, const v4::V4Config& c);
};

/// Ok when the CUDA ops implement this configuration; else an error naming the config field.
Status check_gpu_config(const v4::V4Config& c);

}  // namespace deepinfer::v4gpu
