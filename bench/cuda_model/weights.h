// Random V4-Flash-shaped weights generated on the GPU in the stored formats (V4-MODEL.md 3):
// FP8 E4M3 + E8M0 128x128 dense linears (wq_a, wq_b, wkv, wo_a, wo_b, shared expert, indexer
// wq_b), bf16 compressor / indexer projections, router and embed / head, MXFP4 routed experts,
// fp32 mHC / sinks / ape / bias. Layer l has compress_ratio(l); layers < 3 route by tid2eid.
// A prefill model keeps the routed experts as FP8 128x128 blocks (mxfp4_to_fp8_blocks once at
// load, from MXFP4 generated into a per-layer scratch) instead of MXFP4.
#pragma once

#include <string>
#include <vector>

#include "backend/cuda/layer_ops.h"
#include "common.h"
#include "kernels.h"

#define DI_KOK(x)                                                                                     \
  do {                                                                                                \
    if (!(x)) ::deepinfer::bench::fail(#x, __FILE__, __LINE__, ::deepinfer::bench::kernels_error()); \
  } while (0)

namespace deepinfer::bench {

struct Fp8Lin {
  dc::Fp8Weight w;         // E8M0 scales (the split-K path)
  float* sf32 = nullptr;   // the same scales as fp32 (cuBLASLt path)
  double bytes = 0;
  dc::Fp8Weight lt() const {  // the weight as fp8_linear_lt takes it
    dc::Fp8Weight f = w;
    f.scale = sf32, f.scale_is_f32 = true;
    return f;
  }
  Fp8Lin rows(int64_t r0, int64_t n) const;  // a 128-aligned row block
};
struct Bf16Lin {
  uint16_t* w = nullptr;
  int64_t n = 0, k = 0;
  double bytes() const { return double(n) * k * 2; }
};
struct HcW {
  float *fn = nullptr, *base = nullptr, *scale = nullptr;
};
struct CompressorW {
  Bf16Lin wkv, wgate;
  float *ape = nullptr, *norm = nullptr;
  int ratio = 0, width = 0;
  bool overlap = false;
  int cw() const { return (overlap ? 2 : 1) * width; }
};
/// One routed expert as FP8 blocks (prefill): w1|w3 stacked [2 * 2048, 4096], w2 [4096, 2048].
struct ExpertFp8 {
  Fp8Lin w13, w2;
};

struct LayerW {
  int ratio = 0;
  bool hash = false;
  HcW hc_attn, hc_ffn;
  float *attn_norm = nullptr, *ffn_norm = nullptr, *q_norm = nullptr, *kv_norm = nullptr, *sink = nullptr;
  Fp8Lin wq_a, wq_b, wkv, wo_a, wo_b, sh13, sh2;
  CompressorW cmp, icmp;  // cmp when ratio > 0; icmp (indexer keys) when ratio == 4
  Fp8Lin idx_wq_b;
  Bf16Lin weights_proj;
  uint16_t* gate = nullptr;  // [E, 4096] bf16
  float* bias = nullptr;     // [E]
  int32_t* tid2eid = nullptr;  // [vocab, 6] (hash layers)
  dc::ExpertPtrs* ptrs = nullptr;  // device [E] (MXFP4 models)
  std::vector<ExpertFp8> fp8_experts;  // prefill models
  float* inv_freq = nullptr;  // [32] this layer's RoPE table
  double dense_bytes = 0;     // every weight byte except the routed experts
};

struct ModelSpec {
  std::string name;
  int layers = 4;
  int experts = 256;     // routed experts held (256, or 32 for the EP-8 slice)
  bool prefill = false;  // FP8 expert blocks instead of MXFP4
};

struct Model {
  ModelSpec spec;
  Arena arena;
  std::vector<LayerW> layers;
  uint16_t *embed = nullptr, *head = nullptr;  // [vocab, 4096] bf16
  float* norm = nullptr;
  HcW hc_head;  // fn [24, 4 * 4096]: rows 0..3 are hc_head_fn (hc_pre's pre = the head collapse)
  double dense_bytes = 0, head_bytes = 0;
};

/// Bytes of one MXFP4 routed expert (w1, w3, w2 with their E8M0 scales).
double mxfp4_expert_bytes();
/// Weight bytes of layer l of a model (for choosing N before allocating).
double layer_weight_bytes(int l, int experts, bool prefill);
/// RoPE inverse frequencies (32 pairs): base 10000 (ratio 0) or 160000 with YaRN (ratio > 0).
std::vector<float> rope_inv_freq(int ratio);
/// Generates the model on the device (stream s). Throws OpError on failure.
void build_model(Model& m, cudaStream_t s);

}  // namespace deepinfer::bench
