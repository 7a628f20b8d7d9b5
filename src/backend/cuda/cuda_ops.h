// CUDA op set (issue D, first slice): host-callable C++ API over device buffers. No CUDA type
// leaks out of this header (streams are void*; 0 = the legacy default stream), so the rest of
// the tree stays device-free. Plain C++17 so both nvcc (CUDA 17) and the C++20 tree include it.
//
// Every op is row-independent and uses a reduction order fixed by the op's shape (never by the
// number of rows M), so a row's result does not depend on the batch it is computed in.
// Calls are asynchronous on `stream`; each returns false on a launch error (last_error() says
// which) and checks its shape preconditions (also false, with a message).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

// The few inline helpers that device code uses too (nvcc: __host__ __device__).
#ifdef __CUDACC__
#define DI_HOST_DEVICE __host__ __device__
#else
#define DI_HOST_DEVICE
#endif

namespace deepinfer::cuda {

/// True when a CUDA device is usable (false on machines with nvcc but no GPU).
bool device_available();
/// Message of the last failed call on this thread ("" if none).
const std::string& last_error();

// ---- memory and timing (thin wrappers so tests and benches need no CUDA headers) ----
void* device_alloc(size_t bytes);  // nullptr on failure
void device_free(void* p);
bool copy_to_device(void* dst, const void* src, size_t bytes);
bool copy_to_host(void* dst, const void* src, size_t bytes);
bool copy_device_to_device(void* dst, const void* src, size_t bytes, void* stream = nullptr);
bool synchronize();
/// Stream-ordered device memory for state that lives and dies between steps (a sequence's state):
/// cudaMallocAsync / cudaMemsetAsync / cudaMemcpyAsync / cudaFreeAsync on the legacy default
/// stream, from the device's default memory pool (freed blocks kept for reuse, not returned to the
/// driver). The host never waits: each op runs on the device after all work queued before it on
/// the blocking streams (stream_create's) and before the work queued on them after it, so a block
/// freed while a step still reads it is reused only once that step is done. Not for use while this
/// thread captures a graph. device_alloc_ordered gives nullptr on failure (no memory).
void* device_alloc_ordered(size_t bytes);
/// The current device's free and total memory (cudaMemGetInfo, the free counting the blocks the
/// ordered pool holds for reuse); false on failure.
bool device_memory_info(size_t* free_bytes, size_t* total_bytes);
void device_free_ordered(void* p);
bool memset_ordered(void* p, int value, size_t bytes);
bool copy_ordered(void* dst, const void* src, size_t bytes);
/// Asynchronous copies on `stream` (host memory should be pinned: host_alloc_pinned).
bool copy_to_device_async(void* dst, const void* src, size_t bytes, void* stream);
bool copy_to_host_async(void* dst, const void* src, size_t bytes, void* stream);
void* host_alloc_pinned(size_t bytes);  // nullptr on failure
void host_free_pinned(void* p);
/// A stream of its own (blocking with respect to the legacy stream); nullptr on failure.
void* stream_create();
void stream_destroy(void* stream);
bool stream_synchronize(void* stream);
/// Events for ordering streams (no timing): `waiter` waits for the work `stream` had issued when
/// the event was recorded. Captured into a graph as a fork / join of its branches.
void* event_create();
void event_destroy(void* event);
bool event_record(void* event, void* stream);
bool stream_wait_event(void* waiter, void* event);
/// An event that can also be timed and waited for (a step's completion and device time); nullptr
/// on failure. Destroyed with event_destroy.
void* timed_event_create();
/// Blocks until the work the event was recorded after is done (the rest of its stream may run on).
bool event_synchronize(void* event);
/// Milliseconds between two completed timed events; false on failure.
bool event_elapsed_ms(void* start, void* end, float* ms);

// ---- CUDA graphs: the ops issued on `stream` between begin and end, replayed as one launch ----
/// Starts capturing `stream` (thread-local mode: other threads may keep using the device).
bool graph_begin_capture(void* stream);
/// Ends the capture and instantiates it: the executable graph, or nullptr (last_error says why;
/// the capture is always ended).
void* graph_end_capture(void* stream);
bool graph_launch(void* exec, void* stream);
void graph_destroy(void* exec);
/// Fills `bytes` of device memory with a deterministic pseudo-random byte pattern.
bool fill_random_bytes(void* dst, size_t bytes, uint64_t seed, void* stream = nullptr);

// ---- activation quantisation (the official reference's FP8 linear input) ----
/// x [M, K] (fp32, or bf16 when x_is_bf16) -> q [M, K] FP8 E4M3 and scales [M, K/128] fp32, one
/// per 128 along K: s = 2^ceil(log2(max(amax, 1e-4) / 448)), q = e4m3_rn(x / s) (saturating).
/// Requires K % 128 == 0.
bool quantize_act_fp8(const void* x, bool x_is_bf16, int64_t M, int64_t K, uint8_t* q, float* scales,
                      void* stream = nullptr);

// ---- FP8 block-scaled linear: y[M, N] = x[M, K] . W[N, K]^T, fp32 out ----
/// Weight: F8_E4M3 [N, K] row-major, one scale per 128x128 tile, [N/128, K/128] row-major,
/// E8M0 bytes (scale_is_f32 false) or fp32. The activation comes quantised (quantize_act_fp8).
/// Math: per 128-wide K block, an FP8 tensor-core dot (fp32 accumulate) times sx * sw, summed
/// over blocks in a fixed order. Requires N % 128 == 0 and K % 128 == 0.
struct Fp8Weight {
  const uint8_t* data = nullptr;
  const void* scale = nullptr;
  bool scale_is_f32 = false;
  int64_t n = 0, k = 0;
};
/// Workspace bytes fp8_linear needs for these shapes: 0 today (the decode path's split-K sums
/// meet in shared memory within a block); kept so callers need not change if a path needs one.
size_t fp8_linear_workspace_bytes(int64_t M, int64_t N, int64_t K);
/// Picks the decode path (M <= 64: weight-streaming GEMV, a tile's K blocks split over up to 8
/// warps of one block by a split fixed by the shape (never M), fixed-order sums) or the tiled path
/// (M > 64: 128x128x128 tiles, 3-stage cp.async pipeline).
bool fp8_linear(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, float* y, void* workspace,
                void* stream = nullptr);
/// The two paths, callable directly (tests check both on every shape).
bool fp8_linear_skinny(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, float* y,
                       void* workspace, void* stream = nullptr);
bool fp8_linear_tiled(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, float* y,
                      void* stream = nullptr);
/// `groups` products over one weight tensor in one launch of the decode path (V4's grouped wo_a):
/// w holds all groups' rows [G*N, K] (N = w.n / G, a multiple of 128; K = w.k); group g takes
/// columns [g*K, (g+1)*K) of x's rows ([M, G*K] quantised as whole rows: quantize_act_fp8 over
/// G*K columns) and weight rows [g*N, (g+1)*N), and writes y's columns [g*N, (g+1)*N) (y [M, G*N]).
/// M <= 64. The split over K follows from (G*N, K): fixed for a shape, never from M.
bool fp8_linear_grouped_skinny(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, int groups,
                               float* y, void* stream = nullptr);

/// The decode path on Hopper's wgmma (fp8_wgmma.cu), for 1 to kFp8WgmmaMaxRows rows: the weights
/// as wgmma's 64-row side, the batch rows as its N (16/32/64/128 columns; 256 as two halves of 128
/// that share each weight tile); blocks of 128 weight rows,
/// K split over up to 8 blocks of a cluster whose partial rows are summed in rank order. The split
/// follows from (G*N, K), the column width and how many clusters the device holds at once (one
/// wave), never from M within a width. Same scaling and layouts as fp8_linear /
/// fp8_linear_grouped_skinny (groups = 1: a plain linear). SM90 only; a row's bits may differ from
/// the other paths'. Fastest at 16-64 rows (op bench); at 128 cuBLASLt is ahead.
constexpr int64_t kFp8WgmmaMaxRows = 256;
bool fp8_linear_wgmma(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, float* y,
                      void* stream = nullptr);
bool fp8_linear_grouped_wgmma(const uint8_t* xq, const float* xs, int64_t M, const Fp8Weight& w, int groups,
                              float* y, void* stream = nullptr);

// ---- FP8 block-scaled GEMM through cuBLASLt (SM90 block scaling; the prefill path) ----
/// Like quantize_act_fp8, but the scales are written K-block-major ("M-major"), the layout
/// cuBLASLt's CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F expects: scales_t[kb * M + m].
bool quantize_act_fp8_t(const void* x, bool x_is_bf16, int64_t M, int64_t K, uint8_t* q, float* scales_t,
                        void* stream = nullptr);
/// quantize_act_fp8_t with the columns in groups of group_k (a multiple of 128 dividing K), one side
/// group-major: groups_in false, x is [M][K] and q [K / group_k][M][group_k] (each group's rows
/// contiguous: one GEMM's operand per group); true, x is [K / group_k][M][group_k] and q [M][K].
/// The scales are quantize_act_fp8_t's of the [M][K] matrix (group g's own VEC128 block at
/// scales_t + g * (group_k / 128) * M); the bytes are quantize_act_fp8_t's, only moved.
bool quantize_act_fp8_t_grouped(const void* x, bool x_is_bf16, int64_t M, int64_t K, int64_t group_k, bool groups_in,
                                uint8_t* q, float* scales_t, void* stream = nullptr);
/// E8M0 128x128 weight scales -> fp32 [N/128, K/128] (once, when the weight is loaded).
bool fp8_scales_to_f32(const Fp8Weight& w, float* out, void* stream = nullptr);
/// Workspace the cuBLASLt path may use; pass a buffer of this many bytes.
size_t fp8_linear_lt_workspace_bytes();
/// y[M, N] = x[M, K] . W[N, K]^T through cublasLtMatmul with A = W (BLK128x128_32F scales, fp32,
/// w.scale_is_f32 required) and B = x (VEC128_32F, scales from quantize_act_fp8_t); fp32
/// accumulate, y fp32 or bf16 (y_bf16). Plans (descriptors + heuristic algorithm) are cached per
/// (M, N, K, out type). Returns false with a message when cuBLASLt has no algorithm. `timed`: the
/// plan takes the fastest of the heuristic's candidates, each timed once on these operands when
/// the shape is first seen (synchronising the stream then; not while it is being captured), in
/// place of the heuristic's first; the candidates include each one's splits of K where cuBLASLt
/// allows them (the partial sums reduced in the workspace, in a fixed order); such plans are cached
/// apart from the untimed ones.
bool fp8_linear_lt(const uint8_t* xq, const float* xs_t, int64_t M, const Fp8Weight& w, void* y, bool y_bf16,
                   void* workspace, void* stream = nullptr, bool timed = false);
/// The cached fp8_linear_lt plan's algorithm of that shape in words ("tile 20 stages 8 split 4"),
/// or "" where the shape has no plan yet.
std::string fp8_linear_lt_algo(int64_t M, int64_t N, int64_t K, bool y_bf16, bool timed);

// ---- V4 decode attention (one query token per sequence) ----
/// 64 heads x 512 over one shared K=V head. Sequence b attends to the n_window[b] (<= 128) newest
/// rows of its ring (window[b], or window_ptrs[b]; position p at slot p % 128, read in position
/// order: slot (pos[b] - nw + 1 + j) mod 128 for j < nw) and then to entries[index[b][j]] for
/// j < n_index[b] (index -1 = skipped), with sink[h] in the denominator, scale 1/sqrt(512); the
/// output's last 64 dims get the conjugate (inverse) rotation at pos[b] (interleaved pairs,
/// angle = pos * inv_freq[i]). Rows are split into splits of split_rows (a multiple of 64; a row's
/// result follows from its rows and split_rows alone, so a split size fixed for every batch makes
/// results independent of the batch: batch-invariant mode's one split a query; the default mode
/// takes decode_split_rows' choice by batch). bf16 q, K/V and output; fp32
/// softmax statistics and accumulation; P rounded to bf16 before PV (as the reference kernel).
/// Several splits: each split's unnormalised output is kept in bf16 in the workspace (its m, l in
/// fp32) and merged in fp32 by the combine (half the bytes of fp32 partials, written and read back).
struct DecodeAttnArgs {
  const uint16_t* q = nullptr;        // [batch, 64, 512] bf16 (normed, roped)
  const uint16_t* window = nullptr;   // [batch, 128, 512] bf16 ring (or [R, 512] rows, below)
  /// Prefill (one "batch" entry per query token): when set, query b's window rows are rows
  /// window_row0[b] .. window_row0[b] + n_window[b] - 1 of `window` seen as [R, 512] (the
  /// chunk's contiguous KV rows) instead of ring b. Same math, same split order.
  const int64_t* window_row0 = nullptr;  // [batch] (device) or null
  /// Ring mode only, when set (DEVICE array [batch]): query b's ring is window_ptrs[b] [128, 512]
  /// instead of window + b * 128 * 512. A ring holds position p at slot p % 128; its rows are
  /// read in position order (pos[b] - n_window[b] + 1 .. pos[b]), the order of the prefill
  /// mode's contiguous rows, so a token gets the same sums whichever mode computes it.
  const uint16_t* const* window_ptrs = nullptr;
  /// When set (DEVICE array [batch]): query b's compressed rows are entry_ptrs[b] + index * 512.
  const uint16_t* const* entry_ptrs = nullptr;
  const int32_t* n_window = nullptr;  // [batch] (device)
  const uint16_t* entries = nullptr;  // [E, 512] bf16 compressed rows
  const int32_t* index = nullptr;     // [batch, index_stride] (device)
  const int32_t* n_index = nullptr;   // [batch] (device), <= index_stride
  /// When set, compressed row i of query b is entry i (i < n_index[b]): HCA's every visible entry
  /// in order, with no index array (`index` is not read and may be null).
  bool index_is_prefix = false;
  int64_t index_stride = 0;
  const float* sink = nullptr;        // [64]
  const int32_t* pos = nullptr;       // [batch]
  const float* inv_freq = nullptr;    // [32]
  uint16_t* out = nullptr;            // [batch, 64, 512] bf16
  /// Optional (both or neither): out also quantised, exactly as quantize_act_fp8(out, bf16, batch,
  /// 64 * 512, out_q8, out_qs) writes it (e4m3 [batch, 32768], scales [batch, 256]): by the split
  /// merge where one runs (no launch of its own), else by that quantisation's launch.
  uint8_t* out_q8 = nullptr;
  float* out_qs = nullptr;
  int32_t batch = 0;
  int32_t max_rows = 0;               // host-side bound on n_window + n_index (sizes the grid)
  int32_t split_rows = 512;
  /// Heads per block, 16 or 64; 0 (default) = chosen from the launch size. The output is bitwise
  /// the same either way (tests force both).
  int32_t heads_per_block = 0;
  /// The warpgroup-MMA kernel (attention_wgmma.cu; SM90) in place of the mma.sync kernel's 64-head
  /// blocks (heads_per_block 64, or chosen so from the launch size): the same rows, splits,
  /// softmax and merge, one block per (split, sequence), several times the tensor rate. Its last
  /// bits differ from the mma.sync kernel's, so with the automatic choice a row's bits follow the
  /// launch size (not for batch-invariant mode).
  bool wgmma = false;
};
size_t decode_attention_workspace_bytes(const DecodeAttnArgs& a);
/// The split size for a launch of `batch` queries of at most max_rows rows each, from a base
/// split (a multiple of 64): the base where the batch needs its splits to fill the GPU; fewer,
/// longer splits (as few as one, no combine) where the batch alone fills it (about one split per
/// query at 128 queries on an H100's 132 SMs). A multiple of 64. For the default mode only: the
/// result follows the batch, so a row's bits do (batch-invariant mode runs one split per query).
int32_t decode_split_rows(int32_t batch, int32_t max_rows, int32_t base_split);
/// The default mode's base split for decode_split_rows: 256 rows, or 64 where the batch's queries
/// at 256 would leave most of the GPU idle (batch x splits of 256 x 4 blocks of 16 heads < SMs /
/// 5). Follows the batch, as decode_split_rows does.
int32_t decode_base_split(int32_t batch, int32_t max_rows);
bool decode_attention(const DecodeAttnArgs& a, void* workspace, void* stream = nullptr);

// ---- MXFP4 expert linear for decode (small M per expert) ----
/// The device layout of one little-endian word of 8 stored codes (code c = nibble c, s|e1 e0|m):
/// magnitudes stay at bits 4c..4c+2; the sign of code c < 4 moves to bit 8c + 7, of code c >= 4 to
/// bit 8(c - 4) + 3 (why: mma_common.cuh). Host and device.
DI_HOST_DEVICE inline int mxfp4_dev_sign_bit(int c) { return c < 4 ? 8 * c + 7 : 8 * (c - 4) + 3; }
DI_HOST_DEVICE inline uint32_t mxfp4_word_to_device(uint32_t w) {
  uint32_t out = w & 0x77777777u;
  for (int c = 0; c < 8; ++c) out |= ((w >> (4 * c + 3)) & 1u) << mxfp4_dev_sign_bit(c);
  return out;
}
/// Code c (0..7) of a device-layout word as the stored 4-bit code s|e1 e0|m.
DI_HOST_DEVICE inline uint32_t mxfp4_dev_code(uint32_t w, int c) {
  return ((w >> (4 * c)) & 7u) | (((w >> mxfp4_dev_sign_bit(c)) & 1u) << 3);
}
/// The inverse of mxfp4_word_to_device.
DI_HOST_DEVICE inline uint32_t mxfp4_word_from_device(uint32_t w) {
  uint32_t out = 0;
  for (int c = 0; c < 8; ++c) out |= mxfp4_dev_code(w, c) << (4 * c);
  return out;
}

/// Where column pair q (0..15, columns 2q, 2q+1) of a 32-column group is stored in x16 / a16.
DI_HOST_DEVICE inline int mxfp4_f16_pair_pos(int q) { return 4 * (q & 3) + (q >> 2); }

/// Weight: packed e2m1 [N, K/2] bytes in the DEVICE layout (mxfp4_to_device_layout of the stored
/// bytes: low nibble = even column, sign bits moved within each 32-bit word), E8M0 scale [N, K/32].
/// Every MXFP4 op of this backend (these, the wide experts, the dequantisations) takes that layout.
/// One group = one expert's y[m, N] = x[m, K] . W^T with x fp32 (rounded to fp16 for the
/// tensor cores: |x| < 65504 required) and y fp32. Requires N % 32 == 0, K % 128 == 0.
struct Mxfp4Group {
  const uint8_t* w = nullptr;
  const uint8_t* scale = nullptr;
  const float* x = nullptr;  // [m, K]
  float* y = nullptr;        // [m, N]
  int32_t m = 0;             // rows of this group (0..64; 0..128 for the wgmma kernels)
  int32_t row0 = 0;          // first row in the permuted row buffers (the wide kernels' x16 / a16)
};
/// How the groups' weights and scales are stored: as uploaded (rows, the device nibble layout) or
/// as mxfp4_tile64 copies (N % 64 == 0), which stream as whole 4 KB runs (op bench, H200: the FP8
/// experts 1.2-1.4x faster). Every MXFP4 expert kernel below takes it. A scoped enum, not a bool:
/// a stream pointer passed in its place does not compile.
enum class Mxfp4Layout : uint8_t { rows, tiles64 };
/// Whether every scale byte of the groups' weights lies in the range the f16 kernels fold into
/// their tables exactly (mxfp4_scales_foldable): `foldable` selects the faster wgmma kernel.
enum class Mxfp4Scales : uint8_t { any, foldable };
/// `groups` is a DEVICE array of n_groups descriptors (all with the same N and K).

bool mxfp4_linear_grouped(const Mxfp4Group* groups, int n_groups, int max_m, int64_t N, int64_t K,
                          Mxfp4Layout layout = Mxfp4Layout::rows, void* stream = nullptr);

// ---- MXFP4 experts with many rows per expert ("wide": each group's weights read once) ----
// Each block owns 256 weight rows of one group and all of its <= 64 rows, K walked in 128-wide
// chunks through a shared-memory ring (weights, scales and the fp16 rows, cp.async); the 8 warps
// split the weight rows, not K, so x is read from shared memory by every warp and each output
// element is one thread's sequential fp32 sum over K (per 32: a fresh mma fragment times its
// scale). Inputs are fp16 (the same rounding the narrow kernel applies to its fp32 x).
/// x16 [R, K] fp16 of the permuted rows, in the "pair-transposed" column order the wide kernels'
/// ldmatrix wants: within each 32 columns, pair (2q, 2q+1) for q = 4t + c (t, c in 0..3) is stored
/// at pair position 4c + t (moe_permute_f16 and the w13 epilogue write it; mxfp4_f16_pair_pos).
/// The group's rows start at row g.row0.
/// g13 as moe_build_groups writes it ([2 * n_groups]: w1 then w3 of each group): writes
/// a16[row0 + r, :I] = fp16(swiglu_clamped(x W1^T, x W3^T, limit)), pair-transposed as x16.
/// Needs I % 128 == 0, K % 128 == 0.
bool mxfp4_experts_w13_swiglu(const Mxfp4Group* g13, int n_groups, int max_m, const uint16_t* x16, int64_t I, int64_t K,
                              float limit, uint16_t* a16, Mxfp4Layout layout = Mxfp4Layout::rows,
                              void* stream = nullptr);
/// g2: y[r, :N] (the descriptor's fp32 y) = a16[row0 + r, :K] . W2^T. Needs N % 256 == 0,
/// K % 128 == 0.
bool mxfp4_experts_w2(const Mxfp4Group* g2, int n_groups, int max_m, const uint16_t* a16, int64_t N, int64_t K,
                      Mxfp4Layout layout = Mxfp4Layout::rows, void* stream = nullptr);
/// The same two steps on Hopper's warpgroup MMA (mxfp4_wgmma.cu): identical inputs, outputs and
/// scale handling; groups of up to 128 rows (the wgmma width follows each group's rows), weights
/// dequantised in registers straight into the MMA's A operand. w13 needs I % 64 == 0, w2
/// N % 128 == 0; K % 256 == 0. Mxfp4Scales::foldable: the caller promises that every scale byte of the
/// groups' weights is foldable (mxfp4_scales_foldable), which selects the faster kernel (results
/// are the same either way; with a false promise they are wrong). sm_90a only.
bool mxfp4_experts_w13_swiglu_wgmma(const Mxfp4Group* g13, int n_groups, int max_m, const uint16_t* x16, int64_t I,
                                    int64_t K, float limit, uint16_t* a16, Mxfp4Scales scales = Mxfp4Scales::any,
                                    Mxfp4Layout layout = Mxfp4Layout::rows, void* stream = nullptr);
bool mxfp4_experts_w2_wgmma(const Mxfp4Group* g2, int n_groups, int max_m, const uint16_t* a16, int64_t N, int64_t K,
                            Mxfp4Scales scales = Mxfp4Scales::any, Mxfp4Layout layout = Mxfp4Layout::rows,
                            void* stream = nullptr);
/// *foldable (device int, set to 1 by the caller beforehand) is cleared when any of the n E8M0
/// scale bytes lies outside [106, 132], the range the expert kernels fold into their fp16 tables
/// exactly.
bool mxfp4_scales_foldable(const uint8_t* scale, int64_t n, int32_t* foldable, void* stream = nullptr);
/// The same two steps on FP8 warpgroup MMA (mxfp4_fp8.cu), as the official reference computes
/// them: activation rows quantised to e4m3 per 128 along K (quantize_act_fp8's rule), weights
/// e2m1 times their E8M0 scale, folded into e4m3 (every scale byte of the groups' weights in
/// [114, 125]: mxfp4_scales_fp8_foldable). Groups of at most 128 rows (K % 128, as the wide ones);
/// max_m > 64 runs the one-block-per-SM kernel whose wgmma takes 128 rows at once (prefill).
/// Rows: x8 [rows_total, K] e4m3 in the kernels' K order with scales xs [K / 128, rows_total]
/// (moe_rows_fp8 writes both); the w13 step writes the SwiGLU rows as fp32 a32 [rows_total, I]
/// (row0 of each group), which moe_rows_fp8 (k = 1, no slot_pos) quantises for the w2 step.
bool moe_rows_fp8(const float* src, int64_t T, int k, int64_t K, const int32_t* slot_pos, uint8_t* x8, float* xs,
                  int64_t rows_total, void* stream = nullptr);
/// layout: as for the kernels above. split: K over clusters of 2 blocks for decode-width groups
/// (<= 16 rows, K / 128 even and >= 8): 0 where twice the blocks still fit the GPU at once (batch
/// 1's few experts), 1 never, 2 wherever the shape allows; the halves' sums are added in order
/// (deterministic; not the unsplit kernel's bits). row_token (w13 only; may be null): x8 / xs hold
/// one row per token (rows_total tokens: moe_rows_fp8 at k = 1, or hc_pre's HcNormPack::qe), and a
/// group's row r reads token row_token[row0 + r] (moe_build_groups'); a32 stays in group-row order.
/// The same bits as the slot rows.
bool mxfp4_experts_w13_swiglu_fp8(const Mxfp4Group* g13, int n_groups, int max_m, const uint8_t* x8, const float* xs,
                                  int64_t rows_total, int64_t I, int64_t K, float limit, float* a32,
                                  Mxfp4Layout layout = Mxfp4Layout::rows, void* stream = nullptr, int split = 0,
                                  const int32_t* row_token = nullptr);
bool mxfp4_experts_w2_fp8(const Mxfp4Group* g2, int n_groups, int max_m, const uint8_t* a8, const float* as,
                          int64_t rows_total, int64_t N, int64_t K, Mxfp4Layout layout = Mxfp4Layout::rows,
                          void* stream = nullptr, int split = 0);
/// A 64-row tiled copy of an MXFP4 weight [N, K] (device layout, [N, K/2] bytes) and its scales
/// [N, K/32] into wt, st of the same sizes: per 64 rows and 128 codes of K, the rows' 64 x 64 bytes
/// contiguous (4 KB), and their 64 x 4 scale bytes (256 B), so a block streams whole 4 KB runs.
/// N % 64 == 0, K % 128 == 0.
bool mxfp4_tile64(const uint8_t* w, const uint8_t* scale, int64_t N, int64_t K, uint8_t* wt, uint8_t* st,
                  void* stream = nullptr);
/// Clears *foldable (device int32, set to 1 by the caller) if any of the n scale bytes lies outside
/// [114, 125], the range the FP8 expert kernels fold into their e4m3 tables.
bool mxfp4_scales_fp8_foldable(const uint8_t* scale, int64_t n, int32_t* foldable, void* stream = nullptr);
/// x16[slot_pos[i], :] = fp16(h[i / k, :]) pair-transposed, for the T * k routed slots
/// (moe_permute in fp16). Needs d % 32 == 0 (whole 32-column groups).
bool moe_permute_f16(const float* h, int64_t T, int k, int64_t d, const int32_t* slot_pos, uint16_t* x16,
                     void* stream = nullptr);

// ---- RMSNorm: y = x * rsqrt(mean(x^2) + eps) * weight (weight may be null), fp32 ----
bool rms_norm(const float* x, int64_t n, int64_t d, const float* weight, float eps, float* y,
              void* stream = nullptr);
/// rms_norm's y (bit for bit) and, from the same pass, y's FP8 activation (q and scales as
/// quantize_act_fp8 writes them, or with scales_t as quantize_act_fp8_t does) and/or its bf16 copy
/// y16 [n, d] (cast_f32_to_bf16's rounding): the consumers of a normed row get their inputs
/// without a pass each. q (with scales) and y16 may be null. d % 128 == 0.
bool rms_norm_pack(const float* x, int64_t n, int64_t d, const float* weight, float eps, float* y, uint8_t* q,
                   float* scales, bool scales_t, uint16_t* y16, void* stream = nullptr);

// ---- dequantisation (for peers and checks): FP8 block weight -> bf16 [N, K] ----
bool dequant_fp8_to_bf16(const Fp8Weight& w, uint16_t* out, void* stream = nullptr);
/// Packed e2m1 bytes (the stored layout) -> the device layout, in place: mxfp4_word_to_device on
/// each 32-bit word. bytes % 4 == 0, w 4-byte aligned. Run it once per weight, at upload.
bool mxfp4_to_device_layout(uint8_t* w, int64_t bytes, void* stream = nullptr);
bool dequant_mxfp4_to_bf16(const uint8_t* w, const uint8_t* scale, int64_t N, int64_t K, uint16_t* out,
                           void* stream = nullptr);

// ---- read-bandwidth probes (bench only): one kernel streaming [p, p + bytes) from memory ----
/// kLdg: `blocks` x 256 threads, `depth` (1, 2, 4, 8) 16-byte loads in flight per thread; kBulk:
/// `blocks` blocks, each streaming its share through `depth` shared-memory stages of `chunk` bytes
/// (cp.async.bulk + mbarrier); kRows: the fp8 GEMV's loads (rows of `chunk` bytes, 8 per warp,
/// 8 x 64 B per instruction), `depth` (1..8) K blocks of 128 B at a time. sink: 4 device bytes,
/// practically never written.
enum class ReadProbe { kLdg, kBulk, kRows };
bool read_probe(ReadProbe mode, const void* p, int64_t bytes, int blocks, int depth, int chunk, uint32_t* sink,
                void* stream = nullptr);

}  // namespace deepinfer::cuda
