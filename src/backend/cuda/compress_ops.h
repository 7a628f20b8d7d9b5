// CUDA ops of V4's compressed attention (issue D): the KV / indexer-key compressor (CSA with
// overlapping windows, HCA without) and the lightning indexer's scoring and top-k selection.
// Host-callable C++17 API over device buffers, no CUDA types (like cuda_ops.h). Math and order
// of operations are those of src/model/deepseek_v4/compressor.cpp and attention.cpp (the CPU
// reference the parity tests compare against).
//
// State layout (device, owned by the caller; one slot per sequence, b = 0..batch-1):
//   open window   buf_kv, buf_gate [slots, ratio, cw] fp32, cw = (overlap ? 2 : 1) * width
//   overlap half  prev_kv, prev_gate [slots, ratio, width] fp32 (CSA only; zero-size otherwise)
//   entries       [rows, width] bf16; sequence b's entry e lives at row entry_base[b] + e
// Everything a step needs that depends on positions is computed by the host, which knows every
// sequence's length (no device-to-host read inside a step).
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::cuda {

/// One compressor step: each of `batch` sequences pushes `count[b]` consecutive tokens (decode:
/// 1; prefill chunks: more) starting at position pos0[b]. Token t's projected rows are kv/gate
/// rows tok_offset[b] + i (i < count[b]) of [T, cw] fp32 (the wkv / wgate outputs; the gate
/// WITHOUT ape: the op adds ape[pos % ratio]). When a token closes its window (pos % ratio ==
/// ratio - 1), the window is pooled: per channel a softmax over the gates (CSA: the previous
/// window's first-half rows, then this window's second-half rows; the previous half absent for
/// the first window; HCA: the window's rows), weighted sum of kv, then RMSNorm(norm, eps),
/// RoPE on the last rope_dim dims at position (entry index * ratio) with inv_freq, and written
/// as bf16 to entries row entry_base[b] + pos / ratio. round_mode as CompressorParams (0: none;
/// 1: FP8 e4m3 per 64 on the nope dims; 2: Hadamard then FP4 per 32 on all dims).
/// Sequence b's state at its own addresses (CompressorStepArgs::seq, a DEVICE array [batch]):
/// open window [ratio, cw], overlap half [ratio, width] and entries [capacity, width], as in the
/// slot layout above with slot 0 and entry_base 0 (entry e at entries + e * width).
struct CompressorSeqPtrs {
  float* buf_kv = nullptr;
  float* buf_gate = nullptr;
  float* prev_kv = nullptr;
  float* prev_gate = nullptr;
  uint16_t* entries = nullptr;
};

struct CompressorStepArgs {
  /// When set, sequence b's state is at seq[b] (slot, entry_base, buf_*, prev_* and entries
  /// below are ignored): one launch serves sequences whose states are separate allocations.
  const CompressorSeqPtrs* seq = nullptr;
  const float* kv = nullptr;          // [T, cw], rows row_stride floats apart
  const float* gate = nullptr;        // [T, cw], the same
  int64_t row_stride = 0;             // kv / gate: floats from one row to the next (0: cw; e.g. 2 cw where
                                      // one GEMM wrote both, kv's cw columns then gate's, in each row)
  const float* ape = nullptr;         // [ratio, cw]
  const float* norm = nullptr;        // [width]
  const float* inv_freq = nullptr;    // [rope_dim / 2]
  const int32_t* slot = nullptr;      // [batch] state slot of sequence b
  const int32_t* tok_offset = nullptr;  // [batch]
  const int32_t* count = nullptr;     // [batch]
  const int32_t* pos0 = nullptr;      // [batch]
  const int64_t* entry_base = nullptr;  // [batch]
  float* buf_kv = nullptr;
  float* buf_gate = nullptr;
  float* prev_kv = nullptr;
  float* prev_gate = nullptr;
  uint16_t* entries = nullptr;        // bf16 [rows, width]
  int32_t batch = 0;
  int32_t max_count = 0;              // host bound on count[b]
  int32_t ratio = 4, width = 512, rope_dim = 64;
  bool overlap = true;
  float eps = 1e-6f;
  int32_t round_mode = 0;
};
bool compressor_step(const CompressorStepArgs& a, void* stream = nullptr);
/// Rows [rows, width] fp32 in place: the normalised Hadamard transform, then FP4 e2m1 per 32 with
/// ue8m0 scales (numerics::hadamard then fake_fp4, bitwise): the reference's rounding of the
/// indexer's queries, the same as round_mode 2 gives its keys. width a power of two, 32..1024.
bool hadamard_fp4_rows(float* x, int64_t rows, int64_t width, void* stream = nullptr);

/// Lightning indexer, one query row per token: score[e] = sum_h relu(q_h . key_e) / sqrt(Di) *
/// w_h / sqrt(Hi) over the n_visible[t] entries of the query's sequence (keys row key_base[t] + e),
/// then the top_k best (higher score first, lower e on ties), written in ASCENDING e order as
/// out_base[t] + e into index[t * index_stride ...]; n_index[t] = min(top_k, n_visible[t]).
/// Slots past n_index[t] are set to -1. q fp32 [T, Hi, Di] (normed/roped as the CPU does), w fp32
/// [T, Hi], keys bf16 [rows, Di].
struct IndexerArgs {
  const float* q = nullptr;
  const float* w = nullptr;
  const uint16_t* keys = nullptr;
  /// When set (a DEVICE array [T]), token t's keys start at key_ptrs[t] instead of `keys`
  /// (row key_ptrs[t] + (key_base[t] + e) * head_dim): sequences with separate allocations.
  const uint16_t* const* key_ptrs = nullptr;
  const int64_t* key_base = nullptr;  // [T]
  const int32_t* n_visible = nullptr;  // [T]
  const int64_t* out_base = nullptr;  // [T] (the KV entries' row base of the same sequence)
  int32_t* index = nullptr;           // [T, index_stride]
  int32_t* n_index = nullptr;         // [T]
  int32_t tokens = 0;
  int32_t max_visible = 0;            // host bound on n_visible (sizes scratch / grid)
  int32_t heads = 64, head_dim = 128, top_k = 512;
  int64_t index_stride = 512;
};
size_t indexer_workspace_bytes(const IndexerArgs& a);
bool indexer_select(const IndexerArgs& a, void* workspace, void* stream = nullptr);

}  // namespace deepinfer::cuda
