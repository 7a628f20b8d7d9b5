// Forward: one ragged V4 forward on the device (see gpu_model.h for the batching rules), with the
// workspaces, the stream and the decode graphs it keeps between calls. Internal to the GPU model.
//
// A batch is processed with its decoding sequences (one token each) first, as rows 0..Nd-1: their
// stateful attention work runs as ONE launch per op over all of them (per-sequence state reached
// through device pointer tables, decode_inputs.h), then each prefill chunk runs its own. A batch of
// decoding sequences only is replayed from a CUDA graph captured for its shape (Nd and a context
// bucket) the second time that shape is seen; the first time runs eagerly and sizes the workspaces.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cuda/compress_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/layer_ops.h"
#include "model/deepseek_v4/config.h"
#include "model/device_models.h"
#include "model/deepseek_v4_gpu/decode_inputs.h"
#include "model/deepseek_v4_gpu/device_buffer.h"
#include "model/deepseek_v4_gpu/device_sampling.h"
#include "model/deepseek_v4_gpu/gpu_state.h"
#include "model/deepseek_v4_gpu/gpu_weights.h"

namespace deepinfer::v4gpu {

class Forward {
 public:
  Forward(const v4::V4Config& c, const GpuWeights& w);
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;
  /// Runs the batch, advances the states, writes logits [rows, vocab] and row_offsets (both in
  /// the batch's order). With `lent`: the logits may instead be left in the forward's pinned host
  /// buffer, *lent pointing at them (valid until the next run) and `logits` empty.
  Status run(std::span<const SeqRun> batch, std::vector<float>& logits, std::vector<int64_t>& row_offsets,
             std::span<const float>* lent = nullptr);
  /// Launches the batch (every entry's last logits row only) and the sampling of each sequence's
  /// next token on the device (s: one row per batch entry, in the batch's order), without
  /// waiting: host packing, uploads (pinned, asynchronous), graph replay or eager launches, the
  /// sampling kernel and the asynchronous copy of the tokens all go on the stream behind the step
  /// before. feed[i] >= 0 (feed empty or one per entry): entry i's one token is the token the
  /// previous launched step (not yet collected) sampled for its row feed[i], gathered on the
  /// device into the input ids before the embedding reads them. The states advance at launch.
  /// At most two steps in flight; host buffers alternate between two slots, so the host never
  /// writes one that a step in flight still reads or writes.
  Status launch_sampled(std::span<const SeqRun> batch, const HostSampling& s, std::span<const int32_t> feed);
  /// Waits for the oldest launched step's tokens (its own event, not the stream: the next step
  /// keeps running) and returns them (out[i]: batch entry i's).
  Status collect_sampled(std::vector<SampleResult>& out);
  int pending() const;
  size_t workspace_bytes() const { return scratch_.bytes(); }
  /// Decode graphs on (default) or off (every step eager; for tests and profiling).
  void set_graphs(bool on);
  /// Steps replayed from a graph so far, and graphs captured.
  int64_t graph_replays() const { return graph_replays_; }
  int64_t graphs_captured() const { return graphs_captured_; }
  const StepTimes& times() const { return times_; }
  void reset_times() { times_ = {}; }
  /// A change drops the captured decode graphs (they hold the kernels the old knobs chose).
  void set_tuning(const CudaTuning& t) {
    if (!(t == tuning_)) drop_graphs();
    tuning_ = t;
  }

 private:
  struct Acts;
  struct SeqIdx;
  struct Launched;
  /// Batch indices in processing order: the decoding sequences first, then the prefill chunks.
  static std::vector<size_t> processing_order(std::span<const SeqRun> batch);
  /// The padded size of a decode-only batch of n sequences: 1, 2, 4, 8, 16, 24, 32, 48, 64, then
  /// steps of 32 to 256 and of 64 beyond (decode is weight-bound: a few idle rows cost little).
  static int64_t decode_bucket(int64_t n);
  /// Uploads the inputs (from slot `slot`'s pinned pack), feeds the fed entries' tokens from the
  /// previous step's sampled tokens (`feed`: (ids row, device token row) pairs of prev_tokens),
  /// and launches the forward (or replays its graph) without waiting for it; records the slot's
  /// forward events around it and advances the states.
  Status launch(std::span<const SeqRun> batch, Launched& L, int slot,
                std::span<const std::pair<size_t, int32_t>> feed = {}, const int32_t* prev_tokens = nullptr);
  /// After the stream is done: adds the step's times (the host's, the device's from the slot's
  /// events, and the rest of the wait for the results).
  void finish(const Launched& L, std::chrono::steady_clock::time_point t_done);
  Status ensure_slots();
  Status body(std::span<const SeqRun> runs, const std::vector<SeqIdx>& idx, const DecodeBatch& dec, Acts& a);
  /// A normed activation's forms for the linears that read it, written by its norm in the same pass
  /// (norm_pack): e4m3 rows with scales (row-major, or K-block-major for cuBLASLt: qs_t) and a
  /// bf16 copy of x16_rows rows (past the activation's rows: pad rows a bf16 GEMM call may read).
  /// A linear takes the part its path needs when there is one in its layout, else makes its own.
  struct Packed {
    const uint8_t* q8 = nullptr;
    const float* qs = nullptr;
    bool qs_t = false;
    const uint16_t* x16 = nullptr;
    int64_t rows = 0;      // the activation's rows (K-block-major scales serve exactly this many)
    int64_t x16_rows = 0;
    /// The same forms from row o of a K-wide activation (the K-block-major scales cannot be offset).
    Packed rows_from(int64_t o, int64_t K) const;
  };
  // `lane`: -1 the main stream, 0..kWoLanes-1 a side stream (with its own GEMM workspaces).
  // `y_bf16`: where given, an FP8 linear on cuBLASLt writes bf16 rows into y's memory and sets it
  // (every other path, or no bf16 plan: fp32 rows, false).
  Status linear(const void* x, bool x_bf16, int64_t M, const GpuLinear& W, int64_t r0, int64_t rows, float* y,
                int lane = -1, const Packed* p = nullptr, bool* y_bf16 = nullptr);
  Status linear_bf16(const void* x, bool x_bf16, int64_t M, const GpuLinear& W, int64_t r0, int64_t rows, float* y,
                     int lane = -1, const Packed* p = nullptr);
  Status linear(const float* x, int64_t M, const GpuLinear& W, float* y, int lane = -1, const Packed* p = nullptr,
                bool* y_bf16 = nullptr) {
    return linear(x, false, M, W, 0, W.n, y, lane, p, y_bf16);
  }
  /// y = rms_norm(x [T, K]) and, with tuning_.act_pack, p's forms in the same pass: e4m3 in the
  /// layout an FP8 linear of T rows and `n_out` outputs takes (when `fp8`), bf16 (when `bf16`);
  /// slots[3]: the e4m3, scale and bf16 buffers. Without act_pack, p is empty.
  Status norm_pack(const float* x, int64_t T, int64_t K, const float* w, float* y, int64_t n_out, bool fp8, bool bf16,
                   const int (&slots)[3], Packed& p);
  /// norm_pack's buffers: p's forms allocated in their slots; false where the norm writes y alone
  /// (act_pack off, K % 128, neither form asked for).
  Result<bool> pack_buffers(int64_t T, int64_t K, int64_t n_out, bool fp8, bool bf16, const int (&slots)[3], Packed& p);
  /// The norm a sub-layer applies to hc_pre's input, as norm_pack's arguments (x = the input).
  struct SubNorm {
    const float* w;
    float* y;
    int64_t n_out;
    bool fp8, bf16;
    int slots[3];
    Packed& p;
    uint8_t* qe = nullptr;  // the FP8 expert kernels' token rows of y (dc::HcNormPack::qe), where given
    float* qes = nullptr;
  };
  /// Whether an FP8 linear of M rows, N outputs and K inputs runs on cuBLASLt (K-block-major scales).
  bool fp8_on_lt(int64_t M, int64_t N, int64_t K, bool y_bf16 = false) const;
  /// V4's grouped output projection in one quantisation and one launch per 128 rows (the FP8
  /// decode paths): y [M, G*N] from bf16 x [M, G*K] and W [G*N, K] (group g: x columns [g*K, ..)
  /// times W rows [g*N, ..)). Returns false (nothing launched) where it does not apply
  /// (batch-invariant mode, M from the cuBLASLt threshold on when the wgmma kernel is off, M past
  /// kGroupedWgmmaMaxRows, a bf16 W): the caller then runs one linear per group.
  /// x_quantised: its e4m3 rows and scales are already in grouped_input's buffers (the decode
  /// attention's merge writes them), so no quantisation here.
  Result<bool> linear_grouped(const uint16_t* x, int64_t M, const GpuLinear& W, int64_t G, float* y,
                              bool x_quantised);
  /// Whether linear_grouped applies to M rows of W in G groups, and whether on the wgmma kernel.
  bool grouped_applies(int64_t M, const GpuLinear& W, int64_t G) const;
  bool grouped_wgmma(int64_t M, const GpuLinear& W, int64_t G) const;
  /// linear_grouped's quantised input: e4m3 [M, G*K] and scales [M, G*K/128].
  Result<std::pair<uint8_t*, float*>> grouped_input(int64_t M, const GpuLinear& W, int64_t G);
  /// Past linear_grouped's rows (prefill chunks), with tuning_.act_pack and cuBLASLt plans: the
  /// grouped wo_a with no transposed copies. x [T, G*K] bf16 is quantised once into group-major
  /// e4m3 (each group's rows contiguous, with its VEC128 scales), the G GEMMs (spread over the
  /// side lanes) write y_groups [G, T, N], and wo_b's e4m3 input (wo_b_in, for linear_lt_packed)
  /// is quantised straight from there. Returns false where it does not apply or a cuBLASLt plan is
  /// missing (the caller's transposing path then runs). The same bytes as that path's.
  Result<bool> grouped_out_lt(const uint16_t* x, int64_t T, const GpuLayer& L, int64_t G, float* y_groups,
                              Packed& wo_b_in);
  /// cuBLASLt's FP8 GEMM on an activation already quantised with K-block-major scales (p: rows M);
  /// false (nothing launched) where no plan runs it: fp8_on_lt is false or cuBLASLt finds none.
  /// y is fp32, or bf16 with y_bf16 (the rows rounded once from the fp32 sums).
  Result<bool> linear_lt_packed(const Packed& p, int64_t M, const GpuLinear& W, int64_t r0, int64_t rows, void* y,
                                int lane, bool y_bf16 = false);
  /// Whether an FP8 linear of M rows and N output columns (per group) runs on the wgmma decode
  /// kernel (default mode; tuning_.fp8_wgmma_rows .. fp8_wgmma_max_rows).
  bool fp8_wgmma_for(int64_t M, int64_t N) const;
  // Side streams: 5 carry the attention's independent paths (lanes 0-4, attention()); 7 let the 8
  // groups of wo_a's per-group GEMMs (16 CTAs each at 256 rows) run at once.
  static constexpr int kXnLanes = 5, kWoLanes = 7;
  void* st(int lane) const { return lane < 0 ? stream_ : side_[lane]; }
  static int ls(int slot, int lane) { return lane < 0 ? slot : slot + 100 * (lane + 1); }  // a lane's own slot
  /// Side streams first..first+n-1 wait for the main stream's work so far / the main stream waits
  /// for them.
  Status fork(int n, int first = 0);
  Status join(int n, int first = 0);
  /// mHC pre of a sub-layer (hc: its weights) into a.pre / post / xin on the main stream, and its
  /// Sinkhorn (a.comb) on side lane kCombLane (lane 6, which otherwise serves only the transposing
  /// wo_a path), so the path from X to the sub-layer's input does not wait for it; join_comb(a)
  /// before the closing hc_post (and before a.hcws is written again). Up to kCombSideMaxT tokens
  /// only: at 256 (the EP step) the side launch's 256 blocks slowed the step (H100: device 31.0 ->
  /// 31.5 ms) while batches 1 and 8 gained 1.4% and 2.2%; above it hc_pre writes comb itself.
  static constexpr int kCombLane = kWoLanes - 1;
  static_assert(kXnLanes <= kCombLane, "the attention's lanes end before the Sinkhorn's");
  static constexpr int64_t kCombSideMaxT = 64;
  static bool comb_on_side(int64_t T) { return T <= kCombSideMaxT; }
  /// hc_pre (comb on the side lane where comb_on_side) and then the sub-layer's norm of its input,
  /// in hc_pre's launch (dc::HcNormPack): norm_pack's outputs, bit for bit.
  Status hc_pre_split(const GpuHc& hc, Acts& a, const SubNorm& norm);
  /// The HcNormPack that has hc_pre write norm's outputs over T rows (its packed forms where
  /// norm_pack would write them, else y alone).
  Result<cuda::HcNormPack> hc_norm_pack(int64_t T, const SubNorm& norm);
  Status join_comb(const Acts& a);
  /// Where a sub-layer's closing post can make the next hc_pre's chunk partials (next: that hc_pre's
  /// site; tuning_.hc_post_partial; dc::hc_post_partial_fits): the HcNext to pass, with
  /// a.hc_partials set so that hc_pre_split skips its partial launch; else none.
  std::optional<cuda::HcNext> hc_next(const GpuHc* next, Acts& a) const;
  Status attention(const GpuLayer& L, size_t l, std::span<const SeqRun> runs, const std::vector<SeqIdx>& idx,
                   const DecodeBatch& dec, Acts& a);
  /// A compressor's kv and gate inputs of M rows of x, [M, cw] each (two GEMMs over wkvg's halves).
  Status compressor_input(const float* x, int64_t M, const GpuCompressor& c, float* kv, float* gate, int lane,
                          const Packed* p);
  /// The same for a decode step's rows of a.xn, into kvg ([2 max(Bd, kBf16MinRows), cw] floats):
  /// one GEMM over wkvg ([Bd, 2 cw]: each row's kv then its gate) outside batch-invariant mode, so
  /// the compressor lane runs one GEMM where it ran two; q's kv, gate and row stride set to match.
  Status decode_compressor_input(const float* x, int64_t Bd, const GpuCompressor& c, float* kvg, int lane,
                                 const Packed* p, cuda::CompressorStepArgs& q);
  Status decode_compress(const GpuLayer& L, size_t l, const DecodeBatch& dec, Acts& a, int lane);
  Status decode_index(const GpuLayer& L, size_t l, const DecodeBatch& dec, Acts& a, int lane, int w_lane);
  /// quantise_out: the output's e4m3 rows and scales also written, into grouped_input's buffers.
  Status attention_decode(const GpuLayer& L, size_t l, const DecodeBatch& dec, Acts& a, bool quantise_out);
  Status attention_seq(const GpuLayer& L, GpuLayerState& S, const SeqIdx& si, Acts& a);
  struct AttnIndex {  // HCA's visible-entry counts (its rows: every visible entry) and sliding layers' index
    const int32_t *hca_n, *swa_idx, *zeros;
    int64_t hca_stride;  // the most visible HCA entries of any query (sizes the grid)
  };
  Status attend(const GpuLayer& L, cuda::IndexerArgs* x, const AttnIndex& ai, int32_t split, cuda::DecodeAttnArgs& t);
  /// Routed rows (tokens x top-k) of a forward from which the wide expert kernels run (int64 max: never).
  int64_t wide_experts_from(const GpuLayer& L) const;
  bool wgmma_experts() const;
  bool fp8_experts(const GpuLayer& L) const;
  /// How a chunk of R routed rows (tokens x top-k) runs: the wide kernels or the narrow ones, on
  /// warpgroup MMA, their groups' rows, on the FP8 kernels.
  struct MoeChunk {
    bool wide, wg;
    int gr;
    bool fp8;
  };
  MoeChunk moe_chunk(const GpuLayer& L, int64_t R) const;
  /// next_hc: the mHC site whose hc_pre comes next (the next layer's attention; after the last
  /// layer the head's for a decode-only batch, else null): at decode sizes the MoE's closing post
  /// makes its partials (hc_next).
  Status moe(const GpuLayer& L, const GpuHc* next_hc, Acts& a);
  /// A MoE's routing buffers over T tokens in chunks of Tm (their slots: the same pointers at every
  /// call of a forward), and whether the norm writes the experts' e4m3 rows (rows_by_norm).
  struct MoeBufs {
    int64_t from = 0, Tm = 0, Rm = 0;  // wide_experts_from; chunk tokens; chunk rows (Tm x top-k)
    bool can_wide = false, rows_by_norm = false;
    int32_t *experts = nullptr, *slot_pos = nullptr, *offsets = nullptr, *row_token = nullptr;
    float *lws = nullptr, *wts = nullptr, *yp = nullptr;
    void* sort_ws = nullptr;
    cuda::Mxfp4Group *g13 = nullptr, *g2 = nullptr;
    struct Narrow {  // the narrow expert kernels' fp32 rows (null for the wide kernels)
      float *xp = nullptr, *gp = nullptr, *up = nullptr, *ap = nullptr;
    };
  };
  Result<MoeBufs> moe_bufs(const GpuLayer& L, int64_t T);
  Result<MoeBufs::Narrow> moe_narrow_rows(const MoeBufs& b, bool wide);
  /// A chunk of n tokens' expert groups from b.experts (sorted first past one block), on stream s.
  Status moe_groups(const GpuLayer& L, const MoeBufs& b, int64_t n, void* s);
  /// Whether n tokens route through moe_route_gemm (prefill sizes; never in batch-invariant mode).
  bool route_gemm_for(int64_t n) const;
  /// Whether layer L's hash route over T tokens splits (one chunk with rows_by_norm, the direct
  /// route): the experts (from the token ids alone) and their groups by moe_hash_early before the
  /// layer's attention, the weights after hc_pre on a lane of their own; w13 then waits for hc_pre only.
  bool hash_early(const GpuLayer& L, const MoeBufs& b, int64_t T) const;
  Status moe_hash_early(const GpuLayer& L, Acts& a);
  /// moe_hash_early's lane: free at decode (the attention's lanes are 0-4, the Sinkhorn's 6; 5 serves
  /// only the per-group wo_a of prefill chunks).
  static constexpr int kHashLane = 5;
  static_assert(kHashLane >= kXnLanes && kHashLane < kCombLane, "a lane of its own");
  /// hash_early up to this many tokens: measured at batch 1-8 (H100, against e04bd48: batch 4
  /// -0.8%, 8 -0.6%, 1 and 2 within noise); the EP step's 256 tokens ran it once at +0.7% (25.85
  /// -> 26.03 ms, one run each), so larger batches keep the route in line, as kCombSideMaxT does.
  static constexpr int64_t kHashEarlyMaxT = 64;
  /// Every run decodes one row: the head's rows are X's first a.Nd rows, in order.
  static bool decode_only(std::span<const SeqRun> runs, const Acts& a);
  Status head(std::span<const SeqRun> runs, const std::vector<SeqIdx>& idx, Acts& a);
  Status alloc_acts(Acts& a);
  template <class T>
  Result<T*> buf(int slot, int64_t count) {
    DI_ASSIGN_OR_RETURN(void* p, scratch_.get(slot, static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T)));
    return static_cast<T*>(p);
  }
  Status ensure_stream();
  void drop_graphs();
  /// With tuning_.profile: waits for the device and adds the time since the last mark to `part`.
  Status mark(std::string_view part);  // v4::part names; empty: the start
  /// Adds `s` seconds to StepTimes::parts_s[part].
  void add_part(std::string_view part, double s);

  const v4::V4Config& c_;
  const GpuWeights& w_;
  Scratch scratch_;
  void* stream_ = nullptr;
  void* side_[kWoLanes] = {};
  void* fork_ev_ = nullptr;
  void* join_ev_[kWoLanes] = {};
  bool graphs_on_ = true;
  std::map<std::pair<int64_t, int64_t>, void*> graphs_;  // (Nd, context bucket) -> executable graph
  std::map<std::pair<int64_t, int64_t>, int> seen_;      // shapes run eagerly so far
  std::set<std::pair<int64_t, int64_t>> uncapturable_;   // shapes whose capture failed
  uint64_t graph_generation_ = 0;                        // scratch_.generation() the graphs were captured at
  int64_t graph_replays_ = 0, graphs_captured_ = 0;
  StepTimes times_;
  PinnedBuffer pinned_logits_;  // the lent logits
  DeviceSampler sampler_;       // launch_sampled
  // Host buffers and events of a step, in two slots that alternate between steps.
  struct StepSlot {
    PinnedBuffer pack;  // the inputs' pinned copy, uploaded asynchronously
    void *fwd_begin = nullptr, *fwd_end = nullptr, *done = nullptr;  // timed events
  };
  StepSlot slots_[DeviceSampler::kSlots];
  int next_slot_ = 0;
  struct Pending;
  std::vector<Pending> pending_;  // launched sampled steps not yet collected, oldest first
  // Decode-only sampled steps are padded up to a graph bucket (decode_bucket) with rows of this
  // state (never advanced: every pad row decodes token 0 at position 0, so their writes to it are
  // the same values), so a serving batch that shrinks or grows row by row replays a few graphs
  // instead of running eagerly and capturing at every new size.
  std::unique_ptr<GpuSequenceState> pad_state_;
  CudaTuning tuning_;
  double last_mark_s_ = 0;  // steady-clock seconds of the last mark()
  std::set<std::tuple<int64_t, int64_t, int64_t, bool>> lt_missing_;  // (M, N, K, y_bf16) cuBLASLt has no FP8 plan for
};

}  // namespace deepinfer::v4gpu
