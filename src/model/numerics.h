// Numerics: the option to reproduce the official DeepSeek reference's low-precision rounding
// (V4-MODEL.md 2.9 and section 7) on top of the exact default, and the rounding helpers it uses.
// The default (reference_rounding = false) computes in f32 without rounding any activation or KV
// value, which is what transformers and the exact NumPy reference compute.
//
// With reference_rounding:
//   V4    every FP8/MXFP4 linear (wq_a, wq_b, wkv, wo_b, indexer wq_b, experts, shared experts)
//         sees its activation rounded through FP8 e4m3 per 128 along K (ue8m0 scales); window KV
//         and compressed KV nope dims through FP8 per 64 (ue8m0); indexer q and keys get the
//         normalised Hadamard transform, then FP4 e2m1 per 32 (ue8m0).
//   V4.1  what the NumPy reference's kv_quant=True applies (tools/reference/README.md): window KV
//         FP8 per 32 over all dims (ue8m0), compressed entries FP4 with e4m3 scales per 16, index
//         keys and index q FP4 per 32 (ue8m0), all after RoPE; and, as [O] does, the inputs of the
//         FP8/FP4 linears (wq_a, wkv, wq_b, indexer wq_b, wo_b, routed and shared experts' w1/w3
//         and w2 inputs, engram wkv) through FP8 e4m3 per 32 along K (ue8m0). `kv_only` drops the
//         activation part: exactly the NumPy reference's kv_quant, the part it can check.
// Rounding is "fake quantisation": values are rounded onto the grid and kept as f32.
#pragma once

#include <cstdint>
#include <string>

namespace deepinfer {

struct Numerics {
  bool reference_rounding = false;
  bool kv_only = false;  // V4.1 only, with reference_rounding: no activation rounding
  /// GPU: every op takes one code path whatever the batch and chunk sizes (FP8 linears on the
  /// tiled kernel at any M, bf16 GEMMs in fixed 64-row calls), so a sequence's logits are bitwise
  /// the same alone, in any batch and with any prefill chunking; decode is slower. The CPU backend
  /// is always invariant (no effect there).
  bool batch_invariant = false;
};

/// Options of V4Model::load / V41Model::load / load_model.
struct LoadOptions {
  Numerics numerics;
  std::string device = "cpu";  // load_model: "cpu" or "cuda" (model/device_models.h)
};

namespace numerics {

/// Round-to-nearest-even onto the e4m3fn grid (max 448, subnormal quantum 2^-9), saturating.
float round_e4m3(float x);
/// Round-to-nearest-even onto the e2m1 grid {0, .5, 1, 1.5, 2, 3, 4, 6}, saturating at 6.
float round_e2m1(float x);
/// 2^ceil(log2(t)) for t > 0 (the ue8m0 scale rounding).
float pow2_ceil(float t);
/// ue8m0 scale of an FP8 block: 2^ceil(log2(max(amax, 1e-4) / 448)).
float fp8_scale(float amax);
/// ue8m0 scale of an FP4 block: 2^ceil(log2(max(amax, 6 * 2^-126) / 6)).
float fp4_scale(float amax);
/// e4m3 scale of an FP4 block (V4.1 compressed KV): round_e4m3(max(amax, 6 * 2^-9) / 6).
float fp4_scale_e4m3(float amax);

/// In place, over x[0, n) in blocks of `block` (the last one may be shorter): x = q(x / s) * s.
void fake_fp8(float* x, int64_t n, int64_t block);
void fake_fp4(float* x, int64_t n, int64_t block, bool e4m3_scale = false);
/// `rows` rows of `n`: each row rounded as above.
void fake_fp8_rows(float* x, int64_t rows, int64_t n, int64_t block);
void fake_fp4_rows(float* x, int64_t rows, int64_t n, int64_t block, bool e4m3_scale = false);

/// In place normalised Walsh-Hadamard transform (H_n / sqrt(n)) of x[0, n); n a power of two.
void hadamard(float* x, int64_t n);

}  // namespace numerics
}  // namespace deepinfer
