#include "model/deepseek_v4_gpu/forward.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "backend/cuda/compress_ops.h"
#include "backend/cuda/layer_ops.h"
#include "backend/cuda/v4_ops.h"
#include "backend/cuda/model_ops.h"
#include "backend/cuda/token_feed.h"
#include "core/log.h"
#include "model/deepseek_v4/decode_floor.h"
#include "model/deepseek_v4_gpu/forward_acts.h"
#include "model/deepseek_v4_gpu/forward_slots.h"

namespace deepinfer::v4gpu {

namespace dc = deepinfer::cuda;
namespace part = v4::part;  // the profile's part names (decode_floor.h)

using namespace fwd;

/// Per-sequence index arrays (device) of a prefill chunk, built once per forward, the same for
/// every layer.
struct Forward::SeqIdx {
  int64_t o = 0, n = 0, p0 = 0;
  int64_t hca_stride = 1;
  int32_t *nwin, *nvis, *hca_n, *swa_idx, *zeros, *one_count, *one_pos0, *zero32;
  int64_t *row0, *zero64;
};

namespace {

// Copies ring rows of positions [p_begin, p_end) to dst rows 0.. (slot = p % window: at most two runs).
Status ring_to_rows(const uint16_t* ring, int64_t window, int64_t D, int64_t p_begin, int64_t p_end, uint16_t* dst,
                    void* stream) {
  for (int64_t p = p_begin; p < p_end;) {
    const int64_t slot = p % window, run = std::min(p_end - p, window - slot);
    DI_CUDA_TRY(dc::copy_device_to_device(dst + (p - p_begin) * D, ring + slot * D, static_cast<size_t>(run * D) * 2,
                                          stream));
    p += run;
  }
  return Status::ok();
}

// Writes rows of positions [p_begin, p_end) from src rows 0.. into the ring.
Status rows_to_ring(const uint16_t* src, int64_t window, int64_t D, int64_t p_begin, int64_t p_end, uint16_t* ring,
                    void* stream) {
  for (int64_t p = p_begin; p < p_end;) {
    const int64_t slot = p % window, run = std::min(p_end - p, window - slot);
    DI_CUDA_TRY(dc::copy_device_to_device(ring + slot * D, src + (p - p_begin) * D, static_cast<size_t>(run * D) * 2,
                                          stream));
    p += run;
  }
  return Status::ok();
}

// The compressor's weights and step parameters; the caller sets the state and the per-sequence arrays.
dc::CompressorStepArgs compressor_args(const GpuCompressor& w, const float* kv, const float* gate,
                                       const float* inv_freq, int64_t rope_dim, float eps, int round_mode) {
  dc::CompressorStepArgs q;
  q.kv = kv, q.gate = gate, q.ape = w.ape.as<float>(), q.norm = w.norm.as<float>(), q.inv_freq = inv_freq;
  q.ratio = static_cast<int32_t>(w.ratio), q.width = static_cast<int32_t>(w.width);
  q.rope_dim = static_cast<int32_t>(rope_dim);
  q.overlap = w.overlap, q.eps = eps, q.round_mode = round_mode;
  return q;
}

// One sequence's chunk of n tokens, its state at its own addresses (slot 0, entry base 0).
void set_one_sequence(dc::CompressorStepArgs& q, GpuCompressorState& s, int32_t* zero32, int32_t* count,
                      int32_t* pos0, int64_t* zero64, int64_t n) {
  q.slot = zero32, q.tok_offset = zero32, q.count = count, q.pos0 = pos0, q.entry_base = zero64;
  q.buf_kv = s.buf_kv.as<float>(), q.buf_gate = s.buf_gate.as<float>();
  q.prev_kv = s.prev_kv.as<float>(), q.prev_gate = s.prev_gate.as<float>();
  q.entries = s.entries.as<uint16_t>();
  q.batch = 1, q.max_count = static_cast<int32_t>(n);
}

// Decode: Nd sequences of one token (row b = sequence b), states through the pointer table.
void set_decode(dc::CompressorStepArgs& q, const dc::CompressorSeqPtrs* seq, const DecodeBatch& d, const int32_t* pos) {
  q.seq = seq;
  q.slot = d.zeros, q.tok_offset = d.iota, q.count = d.ones, q.pos0 = pos, q.entry_base = d.zero64;
  q.batch = static_cast<int32_t>(d.n), q.max_count = 1;
}

}  // namespace

Status Forward::attention_seq(const GpuLayer& L, GpuLayerState& S, const SeqIdx& si, Acts& a) {
  const int64_t D = c_.head_dim, W = c_.window, H = c_.num_heads, n = si.n, o = si.o, d = c_.hidden;
  const float eps = static_cast<float>(c_.rms_eps);
  const bool rr = c_.numerics.reference_rounding;
  // Window rows: the W - 1 positions before the chunk (from the ring), then the chunk's own.
  DI_ASSIGN_OR_RETURN(uint16_t* kvrows, buf<uint16_t>(kKvRows, (W - 1 + a.max_n) * D));
  const int64_t first = std::max<int64_t>(0, si.p0 - (W - 1));
  DI_TRY(ring_to_rows(S.ring.as<uint16_t>(), W, D, first, si.p0, kvrows + (first - (si.p0 - (W - 1))) * D, stream_));
  DI_CUDA_TRY(
      dc::copy_device_to_device(kvrows + (W - 1) * D, a.kv16 + o * D, static_cast<size_t>(n * D) * 2, stream_));

  const int64_t nr = std::max(n, kBf16MinRows);
  if (L.has_compressor) {
    DI_TRY(S.kv.reserve((si.p0 + n) / L.ratio + 1));
    DI_ASSIGN_OR_RETURN(float* ckv, buf<float>(kCkv, nr * L.cmp.cw()));
    DI_ASSIGN_OR_RETURN(float* cgate, buf<float>(kCgate, nr * L.cmp.cw()));
    const Packed xp = a.xnp.rows_from(o, d);
    DI_TRY(compressor_input(a.xn + o * d, n, L.cmp, ckv, cgate, -1, &xp));
    dc::CompressorStepArgs q = compressor_args(L.cmp, ckv, cgate, L.inv_freq.as<float>(), c_.rope_dim, eps, rr ? 1 : 0);
    set_one_sequence(q, S.kv, si.zero32, si.one_count, si.one_pos0, si.zero64, n);
    DI_CUDA_TRY(dc::compressor_step(q, stream_));
  }
  dc::DecodeAttnArgs t;
  t.q = a.q16 + o * H * D, t.window = kvrows, t.window_row0 = si.row0, t.n_window = si.nwin;
  t.sink = L.sinks.as<float>(), t.pos = a.pos + o, t.inv_freq = L.inv_freq.as<float>(), t.out = a.ao + o * H * D;
  t.batch = static_cast<int32_t>(n);
  t.entries = L.has_compressor ? S.kv.entries.as<uint16_t>() : kvrows;
  if (L.has_indexer) {
    const int64_t Hi = c_.index_n_heads, Di = c_.index_head_dim, K = c_.index_topk;
    DI_TRY(S.index.reserve((si.p0 + n) / L.ratio + 1));
    DI_ASSIGN_OR_RETURN(float* ikv, buf<float>(kIkv, nr * L.icmp.cw()));
    DI_ASSIGN_OR_RETURN(float* igate, buf<float>(kIgate, nr * L.icmp.cw()));
    DI_ASSIGN_OR_RETURN(float* widx, buf<float>(kWidx, nr * Hi));
    DI_ASSIGN_OR_RETURN(int32_t* index, buf<int32_t>(kIndex, a.max_n * K));
    DI_ASSIGN_OR_RETURN(int32_t* n_index, buf<int32_t>(kNIndex, a.max_n));
    const Packed xp = a.xnp.rows_from(o, d);
    DI_TRY(compressor_input(a.xn + o * d, n, L.icmp, ikv, igate, -1, &xp));
    dc::CompressorStepArgs q = compressor_args(L.icmp, ikv, igate, L.inv_freq.as<float>(), c_.rope_dim, eps, rr ? 2 : 0);
    set_one_sequence(q, S.index, si.zero32, si.one_count, si.one_pos0, si.zero64, n);
    DI_CUDA_TRY(dc::compressor_step(q, stream_));
    DI_TRY(linear(a.xn + o * d, n, L.weights_proj, widx, -1, &xp));
    dc::IndexerArgs x;
    x.q = a.qidx + o * Hi * Di, x.w = widx, x.keys = S.index.entries.as<uint16_t>();
    x.key_base = si.zero64, x.n_visible = si.nvis, x.out_base = si.zero64, x.index = index, x.n_index = n_index;
    x.max_visible = static_cast<int32_t>(std::max<int64_t>((si.p0 + n) / L.ratio, 1));
    DI_TRY(attend(L, &x, {si.hca_n, si.swa_idx, si.zeros, si.hca_stride}, 0, t));
  } else {
    DI_TRY(attend(L, nullptr, {si.hca_n, si.swa_idx, si.zeros, si.hca_stride}, 0, t));
  }
  // The ring keeps the last W rows (after every query of the chunk has read the old ones).
  const int64_t keep = std::min(n, W);
  DI_TRY(rows_to_ring(a.kv16 + (o + n - keep) * D, W, D, si.p0 + n - keep, si.p0 + n, S.ring.as<uint16_t>(), stream_));
  return Status::ok();
}

// The Nd decoding sequences (rows 0..Nd-1) of layer l in one launch per op. Each query reads its
// ring in position order (the same rows and order as attention_seq's contiguous rows); in
// batch-invariant mode with one split, so a token gets the same bits whichever path computes it.
// decode_compress and decode_index run on side lanes (attention() forks them; decode_index's head
// weights on a lane of their own, w_lane); the ring rows
// are written on the K=V lane; attention_decode runs after the join.
Status Forward::compressor_input(const float* x, int64_t M, const GpuCompressor& c, float* kv, float* gate, int lane,
                                 const Packed* p) {
  DI_TRY(linear(x, false, M, c.wkvg, 0, c.cw(), kv, lane, p));
  return linear(x, false, M, c.wkvg, c.cw(), c.cw(), gate, lane, p);
}

Status Forward::decode_compressor_input(const float* x, int64_t Bd, const GpuCompressor& c, float* kvg, int lane,
                                        const Packed* p, dc::CompressorStepArgs& q) {
  const int64_t cw = c.cw();
  if (c_.numerics.batch_invariant) {  // the prefill's two GEMM shapes: a token's inputs the same bits either way
    float* const gate = kvg + std::max(Bd, kBf16MinRows) * cw;
    q.kv = kvg, q.gate = gate, q.row_stride = 0;
    return compressor_input(x, Bd, c, kvg, gate, lane, p);
  }
  q.kv = kvg, q.gate = kvg + cw, q.row_stride = 2 * cw;
  return linear(x, false, Bd, c.wkvg, 0, 2 * cw, kvg, lane, p);
}

Status Forward::decode_compress(const GpuLayer& L, size_t l, const DecodeBatch& dec, Acts& a, int lane) {
  if (!L.has_compressor) return Status::ok();
  const int64_t Bd = dec.n, nr = std::max(Bd, kBf16MinRows);
  const float eps = static_cast<float>(c_.rms_eps);
  DI_ASSIGN_OR_RETURN(float* ckv, buf<float>(kCkv, 2 * nr * L.cmp.cw()));
  dc::CompressorStepArgs q = compressor_args(L.cmp, nullptr, nullptr, L.inv_freq.as<float>(), c_.rope_dim, eps,
                                             c_.numerics.reference_rounding ? 1 : 0);
  DI_TRY(decode_compressor_input(a.xn, Bd, L.cmp, ckv, lane, &a.xnp, q));
  set_decode(q, dec.layers[l].kv, dec, a.pos);
  DI_CUDA_TRY(dc::compressor_step(q, st(lane)));
  return Status::ok();
}

Status Forward::decode_index(const GpuLayer& L, size_t l, const DecodeBatch& dec, Acts& a, int lane, int w_lane) {
  const int64_t Bd = dec.n, nr = std::max(Bd, kBf16MinRows), Hi = c_.index_n_heads;
  const float eps = static_cast<float>(c_.rms_eps);
  DI_ASSIGN_OR_RETURN(float* ikv, buf<float>(kIkv, 2 * nr * L.icmp.cw()));
  DI_ASSIGN_OR_RETURN(float* widx, buf<float>(kWidx, nr * Hi));
  DI_TRY(linear(a.xn, Bd, L.weights_proj, widx, w_lane, &a.xnp));
  dc::CompressorStepArgs q = compressor_args(L.icmp, nullptr, nullptr, L.inv_freq.as<float>(), c_.rope_dim, eps,
                                             c_.numerics.reference_rounding ? 2 : 0);
  DI_TRY(decode_compressor_input(a.xn, Bd, L.icmp, ikv, lane, &a.xnp, q));
  set_decode(q, dec.layers[l].index, dec, a.pos);
  DI_CUDA_TRY(dc::compressor_step(q, st(lane)));
  return Status::ok();
}

Status Forward::attention_decode(const GpuLayer& L, size_t l, const DecodeBatch& dec, Acts& a, bool quantise_out) {
  const int64_t Bd = dec.n;
  const DecodeLayerPtrs& P = dec.layers[l];
  dc::DecodeAttnArgs t;
  t.q = a.q16, t.window_ptrs = P.rings, t.n_window = dec.nwin;
  t.sink = L.sinks.as<float>(), t.pos = a.pos, t.inv_freq = L.inv_freq.as<float>(), t.out = a.ao;
  if (quantise_out) {
    DI_ASSIGN_OR_RETURN(const auto q, grouped_input(Bd, L.wo_a, c_.o_groups));
    t.out_q8 = q.first, t.out_qs = q.second;
  }
  t.batch = static_cast<int32_t>(Bd);
  t.entry_ptrs = P.kv_entries;
  t.heads_per_block = tuning_.attn_heads_per_block;
  const AttnIndex ai{dec.hca_n, dec.swa_idx, dec.zeros, dec.hca_stride};
  // -1: the default mode's base split by the launch (dc::decode_base_split).
  const int32_t split = c_.numerics.batch_invariant ? 0 : tuning_.attn_split > 0 ? tuning_.attn_split : -1;
  if (L.has_indexer) {
    const int64_t Hi = c_.index_n_heads, K = c_.index_topk;
    DI_ASSIGN_OR_RETURN(float* widx, buf<float>(kWidx, std::max(Bd, kBf16MinRows) * Hi));  // decode_index's
    DI_ASSIGN_OR_RETURN(int32_t* index, buf<int32_t>(kDIndex, Bd * K));
    DI_ASSIGN_OR_RETURN(int32_t* n_index, buf<int32_t>(kDNIndex, Bd));
    dc::IndexerArgs x;
    x.q = a.qidx, x.w = widx, x.key_ptrs = P.index_keys;
    x.key_base = dec.zero64, x.n_visible = dec.nvis, x.out_base = dec.zero64, x.index = index, x.n_index = n_index;
    x.max_visible = static_cast<int32_t>(dec.ctx / L.ratio);
    return attend(L, &x, ai, split, t);
  }
  return attend(L, nullptr, ai, split, t);
}

// t's compressed rows (CSA: the indexer's top-k, `x` with its inputs and outputs set, run here;
// HCA: every visible entry; sliding: none), then decode attention with base split `split` (0: one
// split per query, no merge; -1: dc::decode_base_split's).
Status Forward::attend(const GpuLayer& L, dc::IndexerArgs* x, const AttnIndex& ai, int32_t split, dc::DecodeAttnArgs& t) {
  const int64_t W = c_.window;
  if (x) {
    const int64_t K = c_.index_topk;
    x->tokens = t.batch;
    x->heads = static_cast<int32_t>(c_.index_n_heads), x->head_dim = static_cast<int32_t>(c_.index_head_dim);
    x->top_k = static_cast<int32_t>(K), x->index_stride = K;
    DI_ASSIGN_OR_RETURN(void* iws, scratch_.get(kIdxWs, std::max<size_t>(dc::indexer_workspace_bytes(*x), 16)));
    DI_CUDA_TRY(dc::indexer_select(*x, iws, stream_));
    t.index = x->index, t.n_index = x->n_index, t.index_stride = K, t.max_rows = static_cast<int32_t>(W + K);
  } else if (L.has_compressor) {
    t.index = nullptr, t.index_is_prefix = true, t.n_index = ai.hca_n;
    t.max_rows = static_cast<int32_t>(W + ai.hca_stride);
  } else {
    t.index = ai.swa_idx, t.n_index = ai.zeros, t.index_stride = 1, t.max_rows = static_cast<int32_t>(W);
  }
  // split != 0 (the default mode's decode): the base split where the batch needs its splits to
  // fill the GPU, fewer and longer ones where the batch alone fills it (decode_split_rows).
  if (split < 0) split = dc::decode_base_split(t.batch, t.max_rows);
  t.split_rows = split > 0 ? dc::decode_split_rows(t.batch, t.max_rows, split) : (t.max_rows + 63) / 64 * 64;
  // The warpgroup-MMA kernel where the mma.sync one would run 64-head blocks (launches of more
  // than half a wave of them: prefill, decode from batch ~23 at context 4k); never in batch-invariant mode,
  // where a row's bits must not follow the launch size.
  t.wgmma = !c_.numerics.batch_invariant && tuning_.attn_wgmma;
  DI_ASSIGN_OR_RETURN(void* aws, scratch_.get(kAttnWs, std::max<size_t>(dc::decode_attention_workspace_bytes(t), 16)));
  DI_CUDA_TRY(dc::decode_attention(t, aws, stream_));
  return Status::ok();
}

Status Forward::fork(int n, int first) {
  DI_CUDA_TRY(dc::event_record(fork_ev_, stream_));
  for (int i = first; i < first + n; ++i) DI_CUDA_TRY(dc::stream_wait_event(side_[i], fork_ev_));
  return Status::ok();
}

Status Forward::join(int n, int first) {
  for (int i = first; i < first + n; ++i) {
    DI_CUDA_TRY(dc::event_record(join_ev_[i], side_[i]));
    DI_CUDA_TRY(dc::stream_wait_event(stream_, join_ev_[i]));
  }
  return Status::ok();
}

Status Forward::hc_pre_split(const GpuHc& hc, Acts& a, const SubNorm& norm) {
  const float eps = static_cast<float>(c_.rms_eps), hc_eps = static_cast<float>(c_.hc_eps);
  const int iters = static_cast<int>(c_.hc_sinkhorn_iters);
  const float *base = hc.base.as<float>(), *scale = hc.scale.as<float>();
  const bool side = comb_on_side(a.T);
  DI_ASSIGN_OR_RETURN(const dc::HcNormPack pk, hc_norm_pack(a.T, norm));
  DI_CUDA_TRY(dc::hc_pre(a.X, a.T, c_.hidden, hc.fn.as<float>(), base, scale, eps, hc_eps, iters, a.pre, a.post, a.comb,
                         a.xin, a.hcws, stream_, side, &pk, a.hc_partials));
  a.hc_partials = false;
  if (!side) return Status::ok();
  DI_TRY(fork(1, kCombLane));
  DI_CUDA_TRY(dc::hc_pre_comb(a.T, c_.hidden, base, scale, eps, hc_eps, iters, a.comb, a.hcws, side_[kCombLane]));
  return Status::ok();
}

Result<dc::HcNormPack> Forward::hc_norm_pack(int64_t T, const SubNorm& norm) {
  // The norm in hc_pre's launch: its packed forms where norm_pack would write them, else y alone
  // (norm_pack_row without forms is rms_norm's arithmetic).
  DI_ASSIGN_OR_RETURN(const bool packs, pack_buffers(T, c_.hidden, norm.n_out, norm.fp8, norm.bf16, norm.slots, norm.p));
  dc::HcNormPack pk;
  pk.weight = norm.w, pk.eps = static_cast<float>(c_.rms_eps), pk.y = norm.y;
  if (packs) {
    pk.q = const_cast<uint8_t*>(norm.p.q8), pk.scales = const_cast<float*>(norm.p.qs), pk.scales_t = norm.p.qs_t;
    pk.y16 = const_cast<uint16_t*>(norm.p.x16);
  }
  pk.qe = norm.qe, pk.qes = norm.qes;
  return pk;
}

Status Forward::join_comb(const Acts& a) { return comb_on_side(a.T) ? join(1, kCombLane) : Status::ok(); }

std::optional<dc::HcNext> Forward::hc_next(const GpuHc* next, Acts& a) const {
  if (!next || !tuning_.hc_post_partial || !dc::hc_post_partial_fits(a.T, c_.hidden)) return std::nullopt;
  a.hc_partials = true;
  return dc::HcNext{next->fn.as<float>(), a.hcws};
}

Status Forward::attention(const GpuLayer& L, size_t l, std::span<const SeqRun> runs, const std::vector<SeqIdx>& idx,
                          const DecodeBatch& dec, Acts& a) {
  const int64_t T = a.T, d = c_.hidden, H = c_.num_heads, D = c_.head_dim, R = c_.rope_dim;
  const float eps = static_cast<float>(c_.rms_eps);
  // hc_pre, then the attention norm: xn's forms for wq_a, wkv (FP8) and the compressors' and
  // indexer's bf16 projections; qan's for wq_b and the indexer's wq_b.
  const bool xn16 = (L.has_compressor && !L.cmp.wkvg.fp8) || (L.has_indexer && !L.weights_proj.fp8);
  DI_TRY(hc_pre_split(L.hc_attn, a,
                      SubNorm{L.attn_norm.as<float>(), a.xn, L.wq_a.n, L.wq_a.fp8, xn16, {kPackQ8, kPackQs, kPack16}, a.xnp}));
  // Independent paths on their own streams, joined before attention. Those that take xn alone
  // wait for hc_pre only (the fork below), not for the q path's wq_a and q_norm:
  //   lane 0  K=V row: wkv, kv_norm, RoPE (decode rows also into their rings)
  //   lane 1  decode rows' KV compressor
  //   lane 3  decode rows' indexer-key compressor; lane 4 their indexer head weights
  // and, forked after q_norm:
  //   lane 2  indexer queries (wq_b on the normed q-LoRA, RoPE, no norm)
  //   main    q: wq_a, q_norm, wq_b, per-head RMS (unweighted), RoPE on the last R dims
  // (Issued in the profile's part order: a lane's work depends on its fork, not on what the main
  // stream was given before the lane's launches.)
  DI_TRY(fork(kXnLanes));
  DI_TRY(linear(a.xn, T, L.wq_a, a.qa, -1, &a.xnp));
  DI_TRY(norm_pack(a.qa, T, c_.q_lora_rank, L.q_norm.as<float>(), a.qan, L.wq_b.n, L.wq_b.fp8, false,
                   {kQanQ8, kQanQs, kQan16}, a.qanp));
  DI_TRY(mark(part::kAttnPre));
  DI_TRY(linear(a.xn, T, L.wkv, a.kv, 0, &a.xnp));
  // kv_norm, RoPE, bf16, and the decode rows into their rings (position p at slot p % W): one pass.
  DI_CUDA_TRY(dc::kv_norm_rope_bf16(a.kv, T, D, L.kv_norm.as<float>(), eps, D - R, static_cast<int>(R / 2), a.pos,
                                    L.inv_freq.as<float>(), a.kv16, dec.n > 0 ? dec.layers[l].rings : nullptr,
                                    dec.n, c_.window, st(0)));
  DI_TRY(mark(part::kAttnKv));
  if (dec.n > 0) DI_TRY(decode_compress(L, l, dec, a, 1));
  DI_TRY(mark(part::kAttnCompressor));
  if (L.has_indexer) {
    const int64_t Hi = c_.index_n_heads, Di = c_.index_head_dim;
    if (dec.n > 0) DI_TRY(decode_index(L, l, dec, a, 3, 4));
    DI_TRY(fork(1, 2));  // after q_norm
    DI_TRY(linear(a.qan, T, L.idx_wq_b, a.qidx, 2, &a.qanp));
    DI_CUDA_TRY(dc::rope_rows(a.qidx, T * Hi, Di, Di - R, static_cast<int>(R / 2), a.pos, static_cast<int>(Hi),
                            L.inv_freq.as<float>(), st(2)));
    // With reference rounding the keys went through Hadamard + FP4 (the compressor's round_mode 2):
    // the queries too, as the reference does (else the scores would pair rotated keys with plain q).
    if (c_.numerics.reference_rounding) DI_CUDA_TRY(dc::hadamard_fp4_rows(a.qidx, T * Hi, Di, st(2)));
  }
  DI_TRY(mark(part::kAttnIndexer));
  // wq_b on cuBLASLt writes bf16 (T x 32768 fp32 is more bytes than the weight at 256 rows), the
  // values the tail would round to bf16 anyway after its norm; elsewhere fp32.
  bool qb16 = false;
  DI_TRY(linear(a.qan, T, L.wq_b, a.qb, -1, &a.qanp, &qb16));
  // per-head RMS (unweighted), RoPE on the last R dims, bf16: one pass
  const int pairs = static_cast<int>(R / 2), hi = static_cast<int>(H);
  if (qb16) {
    DI_CUDA_TRY(dc::head_norm_rope_bf16_in(reinterpret_cast<const uint16_t*>(a.qb), T * H, D, eps, D - R, pairs, a.pos,
                                           hi, L.inv_freq.as<float>(), a.q16, stream_));
  } else {
    DI_CUDA_TRY(dc::head_norm_rope_bf16(a.qb, T * H, D, eps, D - R, pairs, a.pos, hi, L.inv_freq.as<float>(), a.q16,
                                        stream_));
  }
  DI_TRY(join(kXnLanes));
  DI_TRY(mark(part::kAttnQ));
  // Grouped output: group g's heads -> o_lora_rank (wo_a rows of g), then wo_b. A decode-only
  // batch's attention output comes quantised for the grouped wo_a from the attention's merge.
  const int64_t G = c_.o_groups, gk = H * D / G, OR = c_.o_lora_rank;
  const bool ao_quantised = dec.n == T && grouped_applies(T, L.wo_a, G);
  if (dec.n > 0) DI_TRY(attention_decode(L, l, dec, a, ao_quantised));
  for (size_t s = static_cast<size_t>(dec.n); s < runs.size(); ++s)
    DI_TRY(attention_seq(L, runs[s].state->layer(l), idx[s], a));
  DI_TRY(mark(part::kAttnCore));
  DI_ASSIGN_OR_RETURN(const bool grouped, linear_grouped(a.ao, T, L.wo_a, G, a.oa2, ao_quantised));
  bool direct = false;  // past linear_grouped: wo_a's groups and wo_b's input with no transposed copies
  Packed wo_b_in;
  float* oa = nullptr;  // the groups' outputs [G, T, OR]
  if (!grouped) {
    DI_ASSIGN_OR_RETURN(oa, buf<float>(kOa, T * G * OR));
    DI_ASSIGN_OR_RETURN(direct, grouped_out_lt(a.ao, T, L, G, oa, wo_b_in));
  }
  if (!grouped && !direct) {
    // One GEMM per group on transposed copies. The G group GEMMs are independent and each small
    // (o_lora_rank rows: a few dozen CTAs): spread over the main stream and the side lanes (each
    // with its own workspaces), joined before wo_b.
    DI_ASSIGN_OR_RETURN(uint16_t* operm, buf<uint16_t>(kOperm, T * H * D));
    DI_CUDA_TRY(dc::swap01(a.ao, T, G, gk, 2, operm, stream_));
    DI_TRY(fork(kWoLanes));
    for (int64_t g = 0; g < G; ++g) {
      const int lane = static_cast<int>(g % (kWoLanes + 1)) - 1;
      DI_TRY(linear(operm + g * T * gk, true, T, L.wo_a, g * OR, OR, oa + g * T * OR, lane));
    }
    DI_TRY(join(kWoLanes));
    DI_CUDA_TRY(dc::swap01(oa, G, T, OR, 4, a.oa2, stream_));
  }
  DI_TRY(mark(part::kAttnWoA));
  bool wo_b_done = false;
  if (direct) {
    DI_ASSIGN_OR_RETURN(wo_b_done, linear_lt_packed(wo_b_in, T, L.wo_b, 0, L.wo_b.n, a.f, -1));
    if (!wo_b_done) DI_CUDA_TRY(dc::swap01(oa, G, T, OR, 4, a.oa2, stream_));  // no plan: wo_b's own path
  }
  if (!wo_b_done) DI_TRY(linear(a.oa2, T, L.wo_b, a.f));
  DI_TRY(join_comb(a));
  const std::optional<dc::HcNext> next = hc_next(&L.hc_ffn, a);  // the MoE's hc_pre partials
  DI_CUDA_TRY(dc::hc_post(a.X, T, d, a.post, a.comb, a.f, stream_, next ? &*next : nullptr));
  return mark(part::kAttnPost);
}

bool Forward::decode_only(std::span<const SeqRun> runs, const Acts& a) {
  return a.Nd == static_cast<int64_t>(runs.size()) && a.head_rows == a.Nd;
}

// Final mHC collapse, norm and head over each run's logits rows (the last token, or every token
// of an all_logits run): the decode rows in one GEMM, each prefill chunk in its own (its rows
// see one GEMM shape whatever else is in the batch).
Status Forward::head(std::span<const SeqRun> runs, const std::vector<SeqIdx>& idx, Acts& a) {
  const int64_t d = c_.hidden, n = c_.hc_mult, V = c_.vocab_size;
  // A decode-only batch's logits rows are X's first rows (decode rows 0..Nd-1 are logits rows
  // 0..Nd-1): the head reads X itself, and the last post may have made its hc_pre partials.
  const bool rows_are_x = decode_only(runs, a);
  float* Xr = a.X;
  if (!rows_are_x) {
    DI_ASSIGN_OR_RETURN(Xr, buf<float>(kXr, a.head_rows * n * d));
  }
  DI_ASSIGN_OR_RETURN(float* hin, buf<float>(kHin, a.head_rows * d));
  DI_ASSIGN_OR_RETURN(float* hn, buf<float>(kHn, a.head_rows * d));
  if (a.Nd > 0 && !rows_are_x)
    DI_CUDA_TRY(dc::copy_device_to_device(Xr, a.X, static_cast<size_t>(a.Nd * n * d) * 4, stream_));
  for (size_t s = static_cast<size_t>(a.Nd); s < runs.size(); ++s) {
    const SeqIdx& si = idx[s];
    const int64_t r = runs[s].all_logits ? si.n : 1, first = si.o + si.n - r;
    DI_CUDA_TRY(dc::copy_device_to_device(Xr + a.head_off[s] * n * d, a.X + first * n * d,
                                          static_cast<size_t>(r * n * d) * 4, stream_));
  }
  // The final norm (and the head's bf16 rows, or FP8 ones for an FP8 head) in hc_pre's launch.
  Packed hnp;
  DI_ASSIGN_OR_RETURN(const dc::HcNormPack pk,
                      hc_norm_pack(a.head_rows, SubNorm{w_.norm.as<float>(), hn, V, w_.head.fp8, !w_.head.fp8,
                                                        {kPackQ8, kPackQs, kPack16}, hnp}));
  DI_CUDA_TRY(dc::hc_pre(Xr, a.head_rows, d, w_.hc_head.fn.as<float>(), w_.hc_head.base.as<float>(),
                         w_.hc_head.scale.as<float>(), static_cast<float>(c_.rms_eps), static_cast<float>(c_.hc_eps),
                         static_cast<int>(c_.hc_sinkhorn_iters), a.pre, a.post, a.comb, hin, a.hcws, stream_, false,
                         &pk, a.hc_partials));
  a.hc_partials = false;
  if (a.Nd > 0) DI_TRY(linear(hn, a.Nd, w_.head, a.logits, -1, &hnp));
  for (size_t s = static_cast<size_t>(a.Nd); s < runs.size(); ++s) {
    const int64_t r = (s + 1 < runs.size() ? a.head_off[s + 1] : a.head_rows) - a.head_off[s];
    const Packed sp = hnp.rows_from(a.head_off[s], d);
    DI_TRY(linear(hn + a.head_off[s] * d, r, w_.head, a.logits + a.head_off[s] * V, -1, &sp));
  }
  return Status::ok();
}

// Everything a forward launches, from the uploaded inputs to the logits on the device: no host
// synchronisation and, for a decode-only batch, nothing that depends on more than (Nd, context
// bucket), so it can be captured as a graph.
Status Forward::body(std::span<const SeqRun> runs, const std::vector<SeqIdx>& idx, const DecodeBatch& dec, Acts& a) {
  const int64_t d = c_.hidden, n = c_.hc_mult;
  DI_TRY(mark({}));  // the profile's start
  DI_CUDA_TRY(dc::embed_rows(w_.embed.as<uint16_t>(), c_.vocab_size, d, a.ids, a.T, a.e, nullptr, stream_));
  DI_CUDA_TRY(dc::expand_streams(a.e, a.T, d, static_cast<int>(n), a.X, stream_));
  DI_TRY(mark(part::kEmbedding));
  for (size_t l = 0; l < w_.layers.size(); ++l) {
    DI_TRY(moe_hash_early(w_.layers[l], a).with_context("layer " + std::to_string(l) + " hash route"));
    DI_TRY(attention(w_.layers[l], l, runs, idx, dec, a).with_context("layer " + std::to_string(l) + " attention"));
    const GpuHc* next_hc = l + 1 < w_.layers.size() ? &w_.layers[l + 1].hc_attn
                           : decode_only(runs, a)   ? &w_.hc_head  // the head reads X's rows as they are
                                                    : nullptr;
    DI_TRY(moe(w_.layers[l], next_hc, a).with_context("layer " + std::to_string(l) + " moe"));
  }
  DI_TRY(head(runs, idx, a));
  return mark(part::kHead);
}

Status Forward::mark(std::string_view part) {
  if (!tuning_.profile) return Status::ok();
  DI_CUDA_TRY(dc::synchronize());
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (!part.empty()) add_part(part, now - last_mark_s_);
  last_mark_s_ = now;
  return Status::ok();
}

void Forward::add_part(std::string_view part, double s) {
  auto& parts = times_.parts_s;
  auto it = std::find_if(parts.begin(), parts.end(), [&](const auto& p) { return p.first == part; });
  if (it == parts.end()) it = parts.insert(parts.end(), {std::string(part), 0.0});
  it->second += s;
}

Status Forward::alloc_acts(Acts& a) {
  const int64_t T = a.T, d = c_.hidden, H = c_.num_heads, D = c_.head_dim;
  const int64_t n = c_.hc_mult, G = c_.o_groups, OR = c_.o_lora_rank, I = c_.moe_inter;
  DI_ASSIGN_OR_RETURN(a.e, buf<float>(kE, T * d));
  DI_ASSIGN_OR_RETURN(a.X, buf<float>(kX, T * n * d));
  DI_ASSIGN_OR_RETURN(a.pre, buf<float>(kPre, std::max(T, a.head_rows) * n));
  DI_ASSIGN_OR_RETURN(a.post, buf<float>(kPost, std::max(T, a.head_rows) * n));
  DI_ASSIGN_OR_RETURN(a.comb, buf<float>(kComb, std::max(T, a.head_rows) * n * n));
  DI_ASSIGN_OR_RETURN(a.hcws, scratch_.get(kHcWs, std::max<size_t>(dc::hc_pre_workspace_bytes(T, d), 16)));
  DI_ASSIGN_OR_RETURN(a.xin, buf<float>(kXin, T * d));
  DI_ASSIGN_OR_RETURN(a.xn, buf<float>(kXn, T * d));
  DI_ASSIGN_OR_RETURN(a.qa, buf<float>(kQa, T * c_.q_lora_rank));
  DI_ASSIGN_OR_RETURN(a.qan, buf<float>(kQan, T * c_.q_lora_rank));
  DI_ASSIGN_OR_RETURN(a.qb, buf<float>(kQb, T * H * D));
  DI_ASSIGN_OR_RETURN(a.q16, buf<uint16_t>(kQ16, T * H * D));
  DI_ASSIGN_OR_RETURN(a.kv, buf<float>(kKv, T * D));
  DI_ASSIGN_OR_RETURN(a.kv16, buf<uint16_t>(kKv16, T * D));
  DI_ASSIGN_OR_RETURN(a.qidx, buf<float>(kQidx, T * std::max<int64_t>(c_.index_n_heads * c_.index_head_dim, 1)));
  DI_ASSIGN_OR_RETURN(a.ao, buf<uint16_t>(kAo, T * H * D));
  DI_ASSIGN_OR_RETURN(a.oa2, buf<float>(kOa2, T * G * OR));
  DI_ASSIGN_OR_RETURN(a.f, buf<float>(kF, T * d));
  DI_ASSIGN_OR_RETURN(a.h, buf<float>(kH, T * d));
  DI_ASSIGN_OR_RETURN(a.sgu, buf<float>(kSgu, T * 2 * I));
  DI_ASSIGN_OR_RETURN(a.sa, buf<float>(kSa, T * I));
  DI_ASSIGN_OR_RETURN(a.sy, buf<float>(kSy, T * d));
  // Set here, not in head(): a replayed graph runs no host code.
  DI_ASSIGN_OR_RETURN(a.logits, buf<float>(kLogits, a.head_rows * c_.vocab_size));
  return Status::ok();
}

Forward::~Forward() {
  if (stream_) dc::stream_synchronize(stream_);  // steps launched and never collected
  for (StepSlot& s : slots_) dc::event_destroy(s.fwd_begin), dc::event_destroy(s.fwd_end), dc::event_destroy(s.done);
  drop_graphs();
  for (int i = 0; i < kWoLanes; ++i) dc::stream_destroy(side_[i]), dc::event_destroy(join_ev_[i]);
  dc::event_destroy(fork_ev_);
  if (stream_) dc::stream_destroy(stream_);
}

void Forward::set_graphs(bool on) {
  graphs_on_ = on;
  if (!on) drop_graphs();
}

// The shapes seen stay seen: a workspace that moved was grown by an eager run (grow-only), so a
// shape run before still fits and is captured the next time it comes. (Forgetting them made every
// first decode step's growth cost a second eager step, and a capture inside the timed steps.)
void Forward::drop_graphs() {
  for (auto& [key, exec] : graphs_) dc::graph_destroy(exec);
  graphs_.clear();
}

Status Forward::ensure_stream() {
  if (stream_) return Status::ok();
  stream_ = dc::stream_create();
  if (!stream_) return device_error("stream_create");
  for (int i = 0; i < kWoLanes; ++i) {
    side_[i] = dc::stream_create();
    join_ev_[i] = dc::event_create();
    if (!side_[i] || !join_ev_[i]) return device_error("stream_create / event_create");
  }
  fork_ev_ = dc::event_create();
  if (!fork_ev_) return device_error("event_create");
  return Status::ok();
}

int64_t Forward::decode_bucket(int64_t n) {
  for (int64_t b : {1, 2, 4, 8, 16, 24, 32, 48, 64})
    if (n <= b) return b;
  if (n <= 256) return (n + 31) / 32 * 32;
  return (n + 63) / 64 * 64;
}

std::vector<size_t> Forward::processing_order(std::span<const SeqRun> batch) {
  std::vector<size_t> order;  // the decoding sequences (one token) first, as rows 0..Nd-1
  for (size_t s = 0; s < batch.size(); ++s)
    if (batch[s].tokens.size() == 1) order.push_back(s);
  for (size_t s = 0; s < batch.size(); ++s)
    if (batch[s].tokens.size() != 1) order.push_back(s);
  return order;
}

namespace {
using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

// One forward launched on the stream (not waited for): its activations (the logits on the
// device), the processing order and the host time it took.
struct Forward::Launched {
  Acts a;
  std::vector<size_t> order;
  std::vector<SeqRun> runs;
  bool replayed = false;
  int slot = 0;
  Clock::time_point t_begin, t_launch;
};

// A sampled step launched and not yet collected.
struct Forward::Pending {
  Launched L;
  size_t rows = 0;  // the caller's batch entries (the pad rows after them are dropped)
};

Forward::Forward(const v4::V4Config& c, const GpuWeights& w) : c_(c), w_(w) {}

int Forward::pending() const { return static_cast<int>(pending_.size()); }

Status Forward::ensure_slots() {
  DI_TRY(ensure_stream());
  for (StepSlot& s : slots_) {
    if (s.done) continue;
    s.fwd_begin = dc::timed_event_create();
    s.fwd_end = dc::timed_event_create();
    s.done = dc::timed_event_create();
    if (!s.fwd_begin || !s.fwd_end || !s.done) return device_error("timed_event_create");
  }
  return Status::ok();
}

Status Forward::launch(std::span<const SeqRun> batch, Launched& L, int slot,
                       std::span<const std::pair<size_t, int32_t>> feed, const int32_t* prev_tokens) {
  DI_TRY(ensure_slots());
  L.slot = slot;
  StepSlot& S = slots_[slot];
  L.t_begin = Clock::now();
  DI_TRY(mark({}));
  const int64_t W = c_.window;
  L.order = processing_order(batch);
  Acts& a = L.a;
  for (size_t s = 0; s < batch.size(); ++s) a.Nd += batch[s].tokens.size() == 1 ? 1 : 0;
  std::vector<SeqRun>& runs = L.runs;
  for (size_t i : L.order) runs.push_back(batch[i]);
  for (const SeqRun& r : runs) {
    a.head_off.push_back(a.head_rows);
    a.head_rows += r.all_logits ? static_cast<int64_t>(r.tokens.size()) : 1;
    a.T += static_cast<int64_t>(r.tokens.size());
    a.max_n = std::max<int64_t>(a.max_n, static_cast<int64_t>(r.tokens.size()));
  }

  // Every input in one block: ids, positions, each prefill chunk's index arrays, the decode part.
  HostPack pack;
  const size_t ids_off = pack.add<int32_t>(static_cast<size_t>(a.T));
  const size_t pos_off = pack.add<int32_t>(static_cast<size_t>(a.T));
  {
    int64_t row = 0;
    for (const SeqRun& r : runs)
      for (size_t i = 0; i < r.tokens.size(); ++i, ++row) {
        pack.at<int32_t>(ids_off)[row] = r.tokens[i];
        pack.at<int32_t>(pos_off)[row] = static_cast<int32_t>(r.state->length() + static_cast<int64_t>(i));
      }
  }
  struct Off {
    size_t nwin, nvis, hca_n, swa_idx, zeros, count, pos0, zero32, row0, zero64;
  };
  std::vector<Off> offs(runs.size());
  std::vector<SeqIdx> idx(runs.size());
  int64_t o = a.Nd;
  for (size_t s = static_cast<size_t>(a.Nd); s < runs.size(); ++s) {
    SeqIdx& si = idx[s];
    Off& f = offs[s];
    si.o = o, si.n = static_cast<int64_t>(runs[s].tokens.size()), si.p0 = runs[s].state->length();
    si.hca_stride = std::max<int64_t>((si.p0 + si.n) / 128, 1);
    const size_t n = static_cast<size_t>(si.n);
    auto nwin = [&](int64_t i) { return std::min<int64_t>(si.p0 + i + 1, W); };
    f.nwin = pack.fill<int32_t>(n, [&](int64_t i) { return static_cast<int32_t>(nwin(i)); });
    f.nvis = pack.fill<int32_t>(n, [&](int64_t i) { return static_cast<int32_t>((si.p0 + i + 1) / 4); });
    f.hca_n = pack.fill<int32_t>(n, [&](int64_t i) { return static_cast<int32_t>((si.p0 + i + 1) / 128); });
    f.swa_idx = pack.fill<int32_t>(n, [](int64_t) { return -1; });
    f.zeros = pack.fill<int32_t>(n, [](int64_t) { return 0; });
    f.count = pack.fill<int32_t>(1, [&](int64_t) { return static_cast<int32_t>(si.n); });
    f.pos0 = pack.fill<int32_t>(1, [&](int64_t) { return static_cast<int32_t>(si.p0); });
    f.zero32 = pack.fill<int32_t>(1, [](int64_t) { return 0; });
    f.row0 = pack.fill<int64_t>(n, [&](int64_t i) { return (W - 1) + i - (nwin(i) - 1); });
    f.zero64 = pack.fill<int64_t>(n, [](int64_t) { return int64_t{0}; });
    o += si.n;
  }
  DecodeInputs din;
  if (a.Nd > 0) DI_TRY(din.plan(std::span<const SeqRun>(runs).first(static_cast<size_t>(a.Nd)), c_, pack));
  // The fed entries' (ids row, previous step's device token row) pairs, last: the offsets above
  // (which a decode graph has captured) do not depend on them.
  size_t feed_off = 0;
  if (!feed.empty()) {
    std::vector<size_t> row_of(batch.size());  // the batch entry's first ids row
    {
      int64_t row = 0;
      for (size_t i = 0; i < L.order.size(); ++i) {
        row_of[L.order[i]] = static_cast<size_t>(row);
        row += static_cast<int64_t>(batch[L.order[i]].tokens.size());
      }
    }
    feed_off = pack.fill<int32_t>(feed.size() * 2, [&](int64_t k) {
      const auto& f = feed[static_cast<size_t>(k / 2)];
      return k % 2 == 0 ? static_cast<int32_t>(row_of[f.first]) : f.second;
    });
  }
  const auto t_packed = Clock::now();
  DI_ASSIGN_OR_RETURN(uint8_t* dev, buf<uint8_t>(kInputs, static_cast<int64_t>(pack.size())));
  // Through the slot's pinned copy, asynchronously on the stream (behind the step before, which
  // used the other slot's copy; the device buffer is rewritten only after that step read it).
  DI_ASSIGN_OR_RETURN(void* pinned, S.pack.get(pack.size()));
  std::memcpy(pinned, pack.data(), pack.size());
  DI_CUDA_TRY(dc::copy_to_device_async(dev, pinned, pack.size(), stream_));
  if (!feed.empty())
    DI_CUDA_TRY(dc::feed_tokens(reinterpret_cast<int32_t*>(dev + ids_off), prev_tokens,
                                reinterpret_cast<const int32_t*>(dev + feed_off), static_cast<int32_t>(feed.size()),
                                stream_));
  const auto t_uploaded = Clock::now();
  a.ids = reinterpret_cast<int32_t*>(dev + ids_off);
  a.pos = reinterpret_cast<int32_t*>(dev + pos_off);
  for (size_t s = static_cast<size_t>(a.Nd); s < runs.size(); ++s) {
    const Off& f = offs[s];
    SeqIdx& si = idx[s];
    auto i32 = [&](size_t off) { return reinterpret_cast<int32_t*>(dev + off); };
    auto i64 = [&](size_t off) { return reinterpret_cast<int64_t*>(dev + off); };
    si.nwin = i32(f.nwin), si.nvis = i32(f.nvis), si.hca_n = i32(f.hca_n);
    si.swa_idx = i32(f.swa_idx), si.zeros = i32(f.zeros), si.one_count = i32(f.count), si.one_pos0 = i32(f.pos0);
    si.zero32 = i32(f.zero32), si.row0 = i64(f.row0), si.zero64 = i64(f.zero64);
  }
  const DecodeBatch dec = a.Nd > 0 ? din.resolve(dev) : DecodeBatch{};
  DI_TRY(alloc_acts(a));

  // A decode-only batch replays its shape's graph (captured the second time the shape is seen).
  const bool graph = graphs_on_ && !tuning_.profile && a.Nd == static_cast<int64_t>(runs.size());
  if (scratch_.generation() != graph_generation_) {  // a workspace moved: the graphs point at freed memory
    times_.graph_drops += graphs_.empty() ? 0 : 1;
    drop_graphs();
    graph_generation_ = scratch_.generation();
  }
  const std::pair<int64_t, int64_t> key{a.Nd, dec.ctx};
  auto it = graph ? graphs_.find(key) : graphs_.end();
  if (it == graphs_.end() && graph && seen_[key] > 0 && !uncapturable_.count(key)) {
    if (graphs_.size() >= 64) drop_graphs();
    scratch_.set_frozen(true);
    Status st = dc::graph_begin_capture(stream_) ? body(runs, idx, dec, a) : device_error("graph_begin_capture");
    void* exec = dc::graph_end_capture(stream_);
    scratch_.set_frozen(false);
    if (st.is_ok() && exec) {
      it = graphs_.emplace(key, exec).first;
      ++graphs_captured_;
      ++times_.captures;
    } else {  // this shape runs eagerly from now on
      if (exec) dc::graph_destroy(exec);
      uncapturable_.insert(key);
      const std::string why = st.is_ok() ? dc::last_error() : std::string(st.message());
      DI_LOG(Warn, "CUDA graph capture of a %lld-sequence decode step failed (%s); running it eagerly",
             static_cast<long long>(a.Nd), why.c_str());
    }
  }
  L.t_launch = Clock::now();
  add_part("host: inputs packed, state room reserved", secs(L.t_begin, t_packed));
  add_part("host: inputs uploaded", secs(t_packed, t_uploaded));
  add_part("host: activations, graph lookup / capture", secs(t_uploaded, L.t_launch));
  L.replayed = it != graphs_.end();
  DI_CUDA_TRY(dc::event_record(S.fwd_begin, stream_));
  if (it != graphs_.end()) {
    DI_CUDA_TRY(dc::graph_launch(it->second, stream_));
    ++graph_replays_;
  } else {
    DI_TRY(body(runs, idx, dec, a));
    if (graph) ++seen_[key];
  }
  DI_CUDA_TRY(dc::event_record(S.fwd_end, stream_));
  // Launched: the next step is planned from the advanced lengths (positions, context bucket).
  for (const SeqRun& r : runs)
    if (r.state != pad_state_.get()) r.state->advance(static_cast<int64_t>(r.tokens.size()));
  return Status::ok();
}

// host_s: the host's preparation; device_s: the forward on the device (the slot's event pair);
// logits_s: the rest of the wait from the launch to the results on the host (sampling or the
// logits' copy, launch gaps; in an overlapped loop also the wait for the step before).
void Forward::finish(const Launched& L, Clock::time_point t_done) {
  const StepSlot& S = slots_[L.slot];
  float ms = 0;
  const double device = dc::event_elapsed_ms(S.fwd_begin, S.fwd_end, &ms) ? ms * 1e-3 : 0.0;
  ++times_.steps;
  times_.graph_steps += L.replayed ? 1 : 0;
  times_.host_s += secs(L.t_begin, L.t_launch);
  times_.device_s += device;
  times_.logits_s += std::max(0.0, secs(L.t_launch, t_done) - device);
}

Status Forward::launch_sampled(std::span<const SeqRun> batch, const HostSampling& s, std::span<const int32_t> feed) {
  for (const SeqRun& r : batch)
    if (r.all_logits) return Status::invalid_argument("device sampling takes the last logits row of each sequence only");
  if (s.params.size() != batch.size()) return Status::invalid_argument("device sampling needs one row per sequence");
  if (pending_.size() >= 2) return Status::internal("two sampled steps are already in flight; collect one first");
  if (!feed.empty() && feed.size() != batch.size())
    return Status::invalid_argument("feed needs one entry per batch entry (or none)");
  // The fed entries: (batch entry, the previous step's device token row).
  std::vector<std::pair<size_t, int32_t>> fed;
  const int prev = pending_.empty() ? -1 : pending_.back().L.slot;
  for (size_t i = 0; i < feed.size(); ++i) {
    if (feed[i] < 0) continue;
    if (prev < 0) return Status::invalid_argument("a fed entry but no sampled step in flight");
    if (batch[i].tokens.size() != 1) return Status::invalid_argument("a fed entry must have one token");
    if (static_cast<size_t>(feed[i]) >= sampler_.rows(prev))
      return Status::invalid_argument("feed row " + std::to_string(feed[i]) + " is outside the previous step");
    fed.emplace_back(i, sampler_.device_row(prev, static_cast<size_t>(feed[i])));
  }
  DI_TRY(ensure_slots());
  const int slot = next_slot_;
  if (!pending_.empty() && pending_.front().L.slot == slot) return Status::internal("step slots out of turn");
  Pending p;
  p.rows = batch.size();
  // A decode-only step that would replay a graph is padded to its bucket (pad_state_ above);
  // rows with a bias or penalty table keep their exact size (their tables are per row).
  std::vector<SeqRun> padded;
  HostSampling padded_s;
  const HostSampling* sp = &s;
  const int64_t nb = static_cast<int64_t>(batch.size());
  const bool decode_only = std::all_of(batch.begin(), batch.end(), [](const SeqRun& r) { return r.tokens.size() == 1; });
  if (decode_only && graphs_on_ && !tuning_.profile && s.bias.empty() && s.counts.empty() && decode_bucket(nb) > nb) {
    if (!pad_state_) {
      DI_ASSIGN_OR_RETURN(pad_state_, GpuSequenceState::create(c_));
    }
    static constexpr int32_t kPadToken[1] = {0};
    padded.assign(batch.begin(), batch.end());
    padded.resize(static_cast<size_t>(decode_bucket(nb)), SeqRun{pad_state_.get(), std::span<const int32_t>(kPadToken, 1), false});
    padded_s = s;
    cuda::GpuSampleParams greedy;
    greedy.temperature = 0.0f;
    padded_s.params.resize(padded.size(), greedy);
    padded_s.top.resize(padded.size(), 0);
    padded_s.logprobs.resize(padded.size(), false);
    batch = padded;
    sp = &padded_s;
  }
  DI_TRY(sampler_.prepare(slot, *sp, processing_order(batch), stream_));
  DI_TRY(launch(batch, p.L, slot, fed, prev >= 0 ? sampler_.device_tokens(prev) : nullptr));
  DI_TRY(sampler_.launch(slot, p.L.a.logits, stream_));  // rows in processing order: one per sequence
  DI_CUDA_TRY(dc::event_record(slots_[slot].done, stream_));
  next_slot_ = 1 - slot;
  pending_.push_back(std::move(p));
  return Status::ok();
}

Status Forward::collect_sampled(std::vector<SampleResult>& out) {
  if (pending_.empty()) return Status::internal("no sampled step in flight");
  Pending p = std::move(pending_.front());
  pending_.erase(pending_.begin());
  DI_CUDA_TRY(dc::event_synchronize(slots_[p.L.slot].done));
  const auto t_done = Clock::now();
  DI_TRY(sampler_.results(p.L.slot, out));
  out.resize(p.rows);  // the pad rows' tokens are dropped
  finish(p.L, t_done);
  return Status::ok();
}

Status Forward::run(std::span<const SeqRun> batch, std::vector<float>& logits, std::vector<int64_t>& row_offsets,
                    std::span<const float>* lent) {
  if (!pending_.empty()) return Status::internal("a sampled step is still in flight; collect it first");
  Launched L;
  const int slot = next_slot_;
  next_slot_ = 1 - slot;
  DI_TRY(launch(batch, L, slot));
  const Acts& a = L.a;
  const std::vector<size_t>& order = L.order;
  const std::vector<SeqRun>& runs = L.runs;
  DI_CUDA_TRY(dc::stream_synchronize(stream_));
  const auto t_done = Clock::now();
  // Logits back in the batch's order: one copy when the processing order is the batch's, else
  // one copy per run into its place (lent) or one copy and the rows regrouped on the host.
  const int64_t V = c_.vocab_size;
  row_offsets.assign(batch.size(), 0);
  int64_t at = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    row_offsets[s] = at;
    at += batch[s].all_logits ? static_cast<int64_t>(batch[s].tokens.size()) : 1;
  }
  const size_t count = static_cast<size_t>(a.head_rows * V);
  bool same_order = true;
  for (size_t i = 0; i < order.size(); ++i) same_order = same_order && order[i] == i;
  auto rows_of = [&](size_t i) { return (i + 1 < runs.size() ? a.head_off[i + 1] : a.head_rows) - a.head_off[i]; };
  if (lent) {  // straight into the pinned buffer (run by run when the order differs), lent to the caller
    DI_ASSIGN_OR_RETURN(void* p, pinned_logits_.get(count * 4));
    float* dst = static_cast<float*>(p);
    if (same_order) {
      DI_CUDA_TRY(dc::copy_to_host_async(dst, a.logits, count * 4, stream_));
    } else {
      for (size_t i = 0; i < runs.size(); ++i)
        DI_CUDA_TRY(dc::copy_to_host_async(dst + row_offsets[order[i]] * V, a.logits + a.head_off[i] * V,
                                           static_cast<size_t>(rows_of(i) * V) * 4, stream_));
    }
    DI_CUDA_TRY(dc::stream_synchronize(stream_));
    logits.clear();
    *lent = std::span<const float>(dst, count);
  } else if (same_order) {
    logits.resize(count);
    DI_CUDA_TRY(dc::copy_to_host(logits.data(), a.logits, count * 4));
  } else {
    logits.resize(count);
    std::vector<float> host(count);
    DI_CUDA_TRY(dc::copy_to_host(host.data(), a.logits, count * 4));
    for (size_t i = 0; i < runs.size(); ++i)
      std::memcpy(logits.data() + row_offsets[order[i]] * V, host.data() + a.head_off[i] * V,
                  static_cast<size_t>(rows_of(i) * V) * 4);
  }
  finish(L, t_done);
  return Status::ok();
}

}  // namespace deepinfer::v4gpu
