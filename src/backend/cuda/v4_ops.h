// Small V4 ops the backend headers do not have (V4-MODEL.md 2.1, 2.3, 2.7): RoPE on the tail of
// rows (interleaved pairs), hash routing from a tid2eid table, and the 4-stream expansion of the
// embedding. Used by the GPU model and the whole-model bench (bench/cuda_model). false with the
// message in last_error() on a launch failure, as every op of cuda_ops.h.
#pragma once

#include <cstdint>

namespace deepinfer::cuda {

/// In place on fp32 rows: x[r * ld + off + 2i, +1] rotated by pos[r / rows_per_pos] * inv_freq[i]
/// (i < pairs; sign -1 rotates by the conjugate).
bool rope_rows(float* x, int64_t rows, int64_t ld, int64_t off, int pairs, const int32_t* pos, int rows_per_pos,
               const float* inv_freq, void* stream);
/// The query heads' tail in one pass: out[r, :] = bf16_rn(rope(rms_norm(x[r, :]))) with no norm
/// weight, RoPE as rope_rows(ld = D, off, pairs, pos, rows_per_pos, inv_freq): bit for bit what
/// rms_norm, rope_rows and cast_f32_to_bf16 give one after the other (the norm's sum in the
/// rms_norm kernel's order), without writing x back. x is not modified. D % 256 == 0, D <= 1024,
/// off even.
bool head_norm_rope_bf16(const float* x, int64_t rows, int64_t D, float eps, int64_t off, int pairs,
                         const int32_t* pos, int rows_per_pos, const float* inv_freq, uint16_t* out, void* stream);
/// The same from bf16 rows (e.g. wq_b's bf16 output): the bits head_norm_rope_bf16 gives for the
/// same values as fp32. x may not alias out.
bool head_norm_rope_bf16_in(const uint16_t* x, int64_t rows, int64_t D, float eps, int64_t off, int pairs,
                            const int32_t* pos, int rows_per_pos, const float* inv_freq, uint16_t* out, void* stream);
/// The K=V row's tail in one pass: out[r, :] = bf16_rn(rope(weight * rms_norm(x[r, :]))), RoPE as
/// rope_rows(ld = D, off, pairs, pos, rows_per_pos = 1, inv_freq), and the first n_ring rows also
/// into their rings: rings[r][(pos[r] mod window) * D + :] (rows_to_rings' slot). Bit for bit what
/// rms_norm (with weight), rope_rows, cast_f32_to_bf16 and rows_to_rings give in turn. x is not
/// modified; the same D and off limits as head_norm_rope_bf16.
bool kv_norm_rope_bf16(const float* x, int64_t rows, int64_t D, const float* weight, float eps, int64_t off, int pairs,
                       const int32_t* pos, const float* inv_freq, uint16_t* out, uint16_t* const* rings, int64_t n_ring,
                       int64_t window, void* stream);
/// Hash routing: experts[t, j] = tid2eid[ids[t] * k + j]; weights from the router logits
/// [T, E]: s = sqrt(softplus(logit)), w = s / sum(s of the k picks) * scale.
bool hash_route(const float* logits, int64_t T, int64_t E, const int32_t* ids, const int32_t* tid2eid, int k,
                float scale, int32_t* experts, float* weights, void* stream);
/// X[t, j, :] = e[t, :] for j < streams.
bool expand_streams(const float* e, int64_t T, int64_t d, int streams, float* X, void* stream);

}  // namespace deepinfer::cuda
