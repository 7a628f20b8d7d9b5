// CUDA ops of a V4 decode layer beyond the first slices (issue D): mHC pre/post (Sinkhorn in
// registers), MoE routing (sqrt-softplus, bias-corrected top-k), on-device expert grouping and
// token permutation (so a decode step is one CUDA graph with no host sync), clamped SwiGLU, the
// weighted combine, and small layout helpers. Same conventions as cuda_ops.h: plain C++17, no
// CUDA types, asynchronous on `stream`, false + last_error() on failure, row-independent math
// with a reduction order fixed by the shape (never by the number of rows).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_ops.h"

namespace deepinfer::cuda {

// ---- mHC (n = 4 streams) ----
/// X [T, 4, d] fp32. fn [24, 4d] fp32 row-major, base [24], scale [3] (device).
/// mixes = fn . (X / rms(X)) with the unweighted RMS over all 4d values (eps rms_eps);
/// pre_j = sigmoid(m_j s0 + b_j) + hc_eps, post_j = 2 sigmoid(m_{4+j} s1 + b_{4+j}),
/// comb = Sinkhorn(row softmax(m_{8+4j+k} s2 + b) + hc_eps; column norm, then (iters - 1) x
/// (row, column) norms, each dividing by (sum + hc_eps)); input[T, d] = sum_j pre_j X_j.
/// Outputs pre/post [T, 4], comb [T, 4, 4] (row j = input stream, column k = output stream).
/// workspace: hc_pre_workspace_bytes(T, d). Requires d % 1024 == 0.
size_t hc_pre_workspace_bytes(int64_t T, int64_t d);
/// comb_later: below 1,025 tokens comb is not written here but by hc_pre_comb (the Sinkhorn off the
/// path from X to input: comb is needed only by the sub-layer's closing hc_post); from 1,025 tokens
/// hc_pre writes it all the same.
/// pack (optional): then rms_norm_pack(input, T, d, pack->weight, pack->eps, pack->y, pack->q,
/// pack->scales, pack->scales_t, pack->y16), bit for bit, below 1,025 tokens in the same launch as
/// the collapse (one block a token), from 1,025 tokens as its own launch.
/// The most tokens hc_pre finishes in one launch with the norm (HcNormPack's qe / qes: only up to it).
inline constexpr int64_t kHcPreOneLaunchMaxT = 1024;
struct HcNormPack {
  const float* weight = nullptr;
  float eps = 0.f;
  float* y = nullptr;
  uint8_t* q = nullptr;
  float* scales = nullptr;
  bool scales_t = false;
  uint16_t* y16 = nullptr;
  // The FP8 expert kernels' rows of y (token order, their column order, K-block-major scales
  // [kb * T + t]: moe_rows_fp8's bits at k = 1), for mxfp4_experts_w13_swiglu_fp8's row_token
  // form; up to kHcPreOneLaunchMaxT tokens only (hc_pre's one-launch finish).
  uint8_t* qe = nullptr;
  float* qes = nullptr;
};
/// partials_ready: the chunk partials of X under fn are already in the workspace (an hc_post /
/// moe_combine_hc_post with an HcNext of this fn and workspace made them, over the same T and d:
/// hc_post_partial_fits), so hc_pre goes on from them (one launch less).
bool hc_pre(const float* X, int64_t T, int64_t d, const float* fn, const float* base, const float* scale,
            float rms_eps, float hc_eps, int sinkhorn_iters, float* pre, float* post, float* comb, float* input,
            void* workspace, void* stream = nullptr, bool comb_later = false, const HcNormPack* pack = nullptr,
            bool partials_ready = false);
/// hc_pre's comb after an hc_pre(..., comb_later = true) over the same T, d and workspace (its
/// chunk partials, which must stay untouched until this has run): bitwise hc_pre's own. Nothing
/// to do from 1,025 tokens.
bool hc_pre_comb(int64_t T, int64_t d, const float* base, const float* scale, float rms_eps, float hc_eps,
                 int sinkhorn_iters, float* comb, const void* workspace, void* stream = nullptr);
/// The next sub-layer's hc_pre, for an hc_post that makes its chunk partials in the same launch:
/// fn [24, 4d] and the workspace that hc_pre(..., partials_ready = true) then reads.
struct HcNext {
  const float* fn = nullptr;
  void* workspace = nullptr;
};
/// Whether an hc_post / moe_combine_hc_post over T tokens of width d can take an HcNext (1-16
/// tokens: one block per SM of a column run's four streams; d % 1024 == 0).
bool hc_post_partial_fits(int64_t T, int64_t d);
/// X <- post (x) f + comb^T X, per token (in place). f [T, d]. next (optional): the new X's chunk
/// partials for next->fn into next->workspace as well (hc_post_partial_fits(T, d)), bitwise
/// hc_pre's own.
bool hc_post(float* X, int64_t T, int64_t d, const float* post, const float* comb, const float* f,
             void* stream = nullptr, const HcNext* next = nullptr);

// ---- MoE routing (learned, sqrt-softplus) ----
/// logits[T, E] = h[T, d] . gate[E, d]^T (gate bf16), score = sqrt(softplus(logit)); experts
/// [T, k] = top-k of score + bias (descending, lower index first on ties); weights [T, k] =
/// score / sum(selected scores) * scaling (sum in slot order). Requires d % 256 == 0, E <= 1024,
/// k <= 16. logits_ws: T * E floats. experts and weights both null: the logits only (hash-routed
/// layers take their experts from the token ids, hash_route, and their weights from the logits).
bool moe_route(const float* h, int64_t T, int64_t d, const uint16_t* gate, int64_t E, const float* bias, int k,
               float scaling, float* logits_ws, int32_t* experts, float* weights, void* stream = nullptr);
/// Hash-routed layers in one launch: experts[t, j] = tid2eid[ids[t] * k + j] and their weights
/// (hash_route, v4_ops.h) from only those k logits, each the bits moe_route's kernel gives it
/// (router_logits_kernel's order; not moe_route_gemm's). Requires d % 256 == 0, d <= 4096,
/// 1 <= k <= 16; ids must lie in tid2eid's rows. Either half alone: h null, the experts only (no
/// activation read, so it may run before h is made); experts null, the weights only.
bool hash_route_direct(const float* h, int64_t T, int64_t d, const uint16_t* gate, const int32_t* ids,
                       const int32_t* tid2eid, int k, float scaling, int32_t* experts, float* weights,
                       void* stream = nullptr);
/// Whether hash_route_direct takes width d and k experts a token (its gate rows in registers).
constexpr bool hash_route_direct_fits(int64_t d, int k) { return d > 0 && d % 256 == 0 && d <= 4096 && k >= 1 && k <= 16; }
/// moe_route's second half alone: experts and weights from logits [T, E] computed elsewhere
/// (moe_route_gemm, model_ops.h). Requires E <= 1024, k <= 16.
bool moe_route_from_logits(const float* logits, int64_t T, int64_t E, const float* bias, int k, float scaling,
                           int32_t* experts, float* weights, void* stream = nullptr);

/// Per-expert weight pointers (device array of n_experts of these): MXFP4 w1, w3 [inter, d],
/// w2 [d, inter], each packed e2m1 + E8M0 scale.
struct ExpertPtrs {
  const uint8_t *w1, *s1, *w3, *s3, *w2, *s2;
};
/// Rows per expert group (an expert with more rows gets several groups) by default: 16, so that
/// mxfp4_linear_grouped runs with max_m = min(T, 16), its one-m-tile path (the first layer-bench
/// run on the H200, with 64-row groups, got 0.27-0.39 TB/s on the experts at batch 32-64, i.e.
/// max_m 32-64, against ~1 TB/s at max_m <= 16; most groups hold 1-4 rows). Measured again on
/// the EP slice at batch 256 (~48 rows per expert, docs/performance.md seventh slice): 32-row
/// groups took the same device time and 64-row groups 1.8x more, prefill 8k 2.6x more.
int moe_group_rows();
/// Upper bound of the (expert, chunk of <= group_rows rows) groups for T tokens of top-k.
int moe_max_groups(int64_t T, int k, int64_t n_experts, int group_rows = 16);
/// From experts [T, k] (device), on the device: slot_pos[T*k] (row of each (token, slot) in the
/// expert-sorted order: experts ascending, (token, slot) ascending within one), and the group
/// lists for mxfp4_linear_grouped (groups of at most group_rows = 16, 32 or 64 rows; 128 for the
/// wgmma kernels): groups13
/// [2 * max_groups] (w1 then w3 of each group: x = x_perm rows, y = g_perm / u_perm rows) and
/// groups2 [max_groups] (x = a_perm, y = y_perm); unused entries get m = 0. x_perm, g_perm,
/// u_perm and a_perm may be null (the wide kernels take x16 / a16 by row0): their descriptor
/// pointers are then null. One block, fixed order: the result depends only on `experts`.
/// T * k <= moe_build_groups_max_slots(), unless `offsets` is given: offsets [E + 1] and slot_pos
/// as moe_sort_tokens (model_ops.h, any T) wrote them for the same experts; then only the groups
/// are built (the same descriptors) and `experts` is not read. row_token (no offsets; may be
/// null): [T * k], each row's token, row_token[slot_pos[t * k + j]] = t.
bool moe_build_groups(const int32_t* experts, int64_t T, int k, int64_t n_experts, const ExpertPtrs* ptrs,
                      const float* x_perm, float* g_perm, float* u_perm, const float* a_perm, float* y_perm,
                      int64_t d, int64_t inter, int max_groups, int32_t* slot_pos, Mxfp4Group* groups13,
                      Mxfp4Group* groups2, void* stream = nullptr, int group_rows = 16,
                      const int32_t* offsets = nullptr, int32_t* row_token = nullptr);
int64_t moe_build_groups_max_slots();
/// x_perm[slot_pos[t*k + j]] = h[t] (rows of d floats).
bool moe_permute(const float* h, int64_t T, int k, int64_t d, const int32_t* slot_pos, float* x_perm,
                 void* stream = nullptr);
/// out[t] = shared[t] + sum_j weights[t, j] * y_perm[slot_pos[t*k + j]] (sum over j in slot
/// order first, then added to shared: the CPU backend's order). shared may be null (zeros).
bool moe_combine(const float* y_perm, const int32_t* slot_pos, const float* weights, const float* shared, int64_t T,
                 int k, int64_t d, float* out, void* stream = nullptr);
/// moe_combine's out as hc_post's f, in one pass: X <- post (x) out + comb^T X for the T tokens
/// (X [T, hc_mult, d], post [T, hc_mult], comb [T, hc_mult, hc_mult]), with no out row stored.
/// Bitwise the two calls. next: as for hc_post.
bool moe_combine_hc_post(const float* y_perm, const int32_t* slot_pos, const float* weights, const float* shared,
                         int64_t T, int k, int64_t d, float* X, const float* post, const float* comb,
                         void* stream = nullptr, const HcNext* next = nullptr);

/// Clamped SwiGLU: a[r, i] = silu(min(g, L)) * clamp(u, -L, L) (no clamp when L <= 0), with g
/// at g[r * ld + i], u at u[r * ld + i]; a is [R, I] contiguous.
bool swiglu(const float* g, const float* u, int64_t ld, int64_t R, int64_t I, float limit, float* a,
            void* stream = nullptr);

// ---- layout helpers ----
/// fp32 -> bf16 (round to nearest even), n elements; dst row r at dst + r * dst_ld (rows of `cols`).
bool cast_f32_to_bf16(const float* src, int64_t rows, int64_t cols, uint16_t* dst, int64_t dst_ld,
                      void* stream = nullptr);
/// Decode's new K=V rows into the rings: rings[b][(pos[b] % window) * cols + c] = bf16(src[b * cols + c])
/// for b < batch (rings: a DEVICE array of per-sequence ring pointers [window, cols] bf16).
bool rows_to_rings(const float* src, int64_t batch, int64_t cols, uint16_t* const* rings, const int32_t* pos,
                   int64_t window, void* stream = nullptr);
/// out[b, a, c] = in[a, b, c] for elements of elem_bytes (2 or 4) bytes; c % 4 == 0 for 2-byte.
bool swap01(const void* in, int64_t A, int64_t B, int64_t C, int elem_bytes, void* out, void* stream = nullptr);

// ---- random weights in stored formats (generated on the device) ----
enum class RandomKind : int {
  kE4M3 = 0,     // FP8 E4M3 bytes of uniform(-a, a) (no NaN codes)
  kE2M1 = 1,     // packed e2m1 bytes (every nibble valid)
  kE8M0 = 2,     // E8M0 bytes uniform in [a, b] (integers)
  kBf16 = 3,     // bf16 of uniform(-a, a)
  kF32 = 4,      // fp32 uniform(-a, a)
};
/// count = number of elements (bytes for kE4M3/kE2M1/kE8M0).
bool fill_random(void* dst, int64_t count, RandomKind kind, float a, float b, uint64_t seed, void* stream = nullptr);

}  // namespace deepinfer::cuda
