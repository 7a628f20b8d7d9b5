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
/// Hash routing: experts[t, j] = tid2eid[ids[t] * k + j]; weights from the router logits
/// [T, E]: s = sqrt(softplus(logit)), w = s / sum(s of the k picks) * scale.
bool hash_route(const float* logits, int64_t T, int64_t E, const int32_t* ids, const int32_t* tid2eid, int k,
                float scale, int32_t* experts, float* weights, void* stream);
/// X[t, j, :] = e[t, :] for j < streams.
bool expand_streams(const float* e, int64_t T, int64_t d, int streams, float* X, void* stream);

}  // namespace deepinfer::cuda
