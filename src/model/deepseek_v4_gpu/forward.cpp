#include "model/deepseek_v4_gpu/forward.h"

#include <algorithm>

#include "backend/cuda/compress_ops.h"
#include "backend/cuda/layer_ops.h"
#include "backend/cuda/model_ops.h"
#include "model/deepseek_v4_gpu/kernels.h"

namespace deepinfer::v4gpu {

namespace dc = deepinfer::cuda;

namespace {

// Workspace slots (Scratch): one per buffer of a forward.
enum Slot : int {
  kIds, kPos, kI32Pack, kI64Pack, kE, kX, kPre, kPost, kComb, kHcWs, kXin, kXn, kQa, kQan, kQb, kQ16, kKv, kKv16,
  kKvRows, kCkv, kCgate, kIkv, kIgate, kQidx, kWidx, kIndex, kNIndex, kAo, kOperm, kOa, kOa2, kF, kH, kSg, kSu, kSa,
  kSy, kLogitsWs, kExperts, kExScratch, kWts, kSlotPos, kXp, kGp, kUp, kAp, kYp, kG13, kG2, kQ8, kQs, kFp8Ws, kLtWs,
  kX16, kYPad, kAttnWs, kIdxWs, kXr, kHin, kHn, kLogits,
};

constexpr int64_t kBf16MinRows = 16;   // cuBLASLt bf16 GEMMs run with at least this many rows
constexpr int64_t kMoeChunk = 1024;
constexpr int64_t kBiRows = 64;        // batch-invariant mode: every bf16 GEMM call has this many rows    // moe_build_groups takes T * k <= 8192

bool kernels_ok(bool ok, const char* what, Status& st) {
  if (!ok) st = Status::internal(std::string("CUDA: ") + what + " failed: " + kernels_error());
  return ok;
}
#define DI_KERNEL_TRY(call)                       \
  do {                                            \
    Status ks_;                                   \
    if (!kernels_ok((call), #call, ks_)) return ks_; \
  } while (0)

}  // namespace

/// Per-sequence index arrays (device), built once per forward, the same for every layer.
struct Forward::SeqIdx {
  int64_t o = 0, n = 0, p0 = 0;
  int64_t hca_stride = 1;
  int32_t *nwin, *nvis, *hca_n, *hca_idx, *swa_idx, *zeros, *one_count, *one_pos0, *zero32;
  int64_t *row0, *zero64;
};

struct Forward::Acts {
  int64_t T = 0, max_n = 0;
  int32_t *ids, *pos;
  float *e, *X, *pre, *post, *comb, *xin, *xn, *qa, *qan, *qb, *kv, *qidx, *oa, *oa2, *f, *h, *sg, *su, *sa, *sy;
  void* hcws;
  uint16_t *q16, *kv16, *ao, *operm;
};

Status Forward::linear(const void* x, bool x_bf16, int64_t M, const GpuLinear& W, int64_t r0, int64_t rows, float* y) {
  if (M <= 0) return Status::ok();
  const int64_t K = W.k;
  if (W.fp8) {
    const dc::Fp8Weight w = W.fp8_rows(r0, rows);
    DI_ASSIGN_OR_RETURN(uint8_t* q8, buf<uint8_t>(kQ8, M * K));
    DI_ASSIGN_OR_RETURN(float* qs, buf<float>(kQs, M * K / 128));
    DI_ASSIGN_OR_RETURN(void* ws, scratch_.get(kFp8Ws, std::max<size_t>(dc::fp8_linear_workspace_bytes(M, rows, K), 16)));
    DI_CUDA_TRY(dc::quantize_act_fp8(x, x_bf16, M, K, q8, qs));
    if (c_.numerics.batch_invariant) {  // one kernel at every M: a row's sum order never changes
      DI_CUDA_TRY(dc::fp8_linear_tiled(q8, qs, M, w, y));
    } else {
      DI_CUDA_TRY(dc::fp8_linear(q8, qs, M, w, y, ws));
    }
    return Status::ok();
  }
  return linear_bf16(x, x_bf16, M, W, r0, rows, y);
}

// bf16 GEMM (cuBLASLt) in calls of `call` rows: all M at once (at least kBf16MinRows, so small M
// always finds a plan), or in batch-invariant mode exactly kBiRows per call, so cuBLASLt sees one
// shape and picks one algorithm whatever M is. A short call is padded; pad rows' outputs dropped.
Status Forward::linear_bf16(const void* x, bool x_bf16, int64_t M, const GpuLinear& W, int64_t r0, int64_t rows,
                            float* y) {
  const int64_t K = W.k;
  const int64_t call = c_.numerics.batch_invariant ? kBiRows : std::max(M, kBf16MinRows);
  const uint16_t* wp = W.data.as<uint16_t>() + r0 * K;
  DI_ASSIGN_OR_RETURN(void* ws, scratch_.get(kLtWs, dc::fp8_linear_lt_workspace_bytes()));
  for (int64_t m0 = 0; m0 < M; m0 += call) {
    const int64_t m = std::min(call, M - m0);
    const uint16_t* xc = static_cast<const uint16_t*>(x) + m0 * K;  // used as is when bf16 and full
    if (!x_bf16 || m != call) {
      DI_ASSIGN_OR_RETURN(uint16_t* xb, buf<uint16_t>(kX16, call * K));
      if (x_bf16) {
        DI_CUDA_TRY(dc::copy_device_to_device(xb, xc, static_cast<size_t>(m * K) * 2));
      } else {
        DI_CUDA_TRY(dc::cast_f32_to_bf16(static_cast<const float*>(x) + m0 * K, m, K, xb, K));
      }
      xc = xb;
    }
    float* yc = y + m0 * rows;
    if (m != call) {
      DI_ASSIGN_OR_RETURN(yc, buf<float>(kYPad, call * rows));
    }
    DI_CUDA_TRY(dc::bf16_linear_lt(xc, call, wp, rows, K, yc, false, ws));
    if (m != call) DI_CUDA_TRY(dc::copy_device_to_device(y + m0 * rows, yc, static_cast<size_t>(m * rows) * 4));
  }
  return Status::ok();
}

namespace {

// Copies ring rows of positions [p_begin, p_end) to dst rows 0.. (slot = p % window: at most two runs).
Status ring_to_rows(const uint16_t* ring, int64_t window, int64_t D, int64_t p_begin, int64_t p_end, uint16_t* dst) {
  for (int64_t p = p_begin; p < p_end;) {
    const int64_t slot = p % window, run = std::min(p_end - p, window - slot);
    DI_CUDA_TRY(dc::copy_device_to_device(dst + (p - p_begin) * D, ring + slot * D, static_cast<size_t>(run * D) * 2));
    p += run;
  }
  return Status::ok();
}

// Writes rows of positions [p_begin, p_end) from src rows 0.. into the ring.
Status rows_to_ring(const uint16_t* src, int64_t window, int64_t D, int64_t p_begin, int64_t p_end, uint16_t* ring) {
  for (int64_t p = p_begin; p < p_end;) {
    const int64_t slot = p % window, run = std::min(p_end - p, window - slot);
    DI_CUDA_TRY(dc::copy_device_to_device(ring + slot * D, src + (p - p_begin) * D, static_cast<size_t>(run * D) * 2));
    p += run;
  }
  return Status::ok();
}

dc::CompressorStepArgs compressor_args(const GpuCompressor& w, GpuCompressorState& s, const float* kv,
                                       const float* gate, const float* inv_freq, int64_t rope_dim, float eps,
                                       int round_mode, int32_t* zero32, int32_t* count, int32_t* pos0, int64_t* zero64,
                                       int64_t n) {
  dc::CompressorStepArgs q;
  q.kv = kv, q.gate = gate, q.ape = w.ape.as<float>(), q.norm = w.norm.as<float>(), q.inv_freq = inv_freq;
  q.slot = zero32, q.tok_offset = zero32, q.count = count, q.pos0 = pos0, q.entry_base = zero64;
  q.buf_kv = s.buf_kv.as<float>(), q.buf_gate = s.buf_gate.as<float>();
  q.prev_kv = s.prev_kv.as<float>(), q.prev_gate = s.prev_gate.as<float>();
  q.entries = s.entries.as<uint16_t>();
  q.batch = 1, q.max_count = static_cast<int32_t>(n);
  q.ratio = static_cast<int32_t>(w.ratio), q.width = static_cast<int32_t>(w.width);
  q.rope_dim = static_cast<int32_t>(rope_dim);
  q.overlap = w.overlap, q.eps = eps, q.round_mode = round_mode;
  return q;
}

}  // namespace

Status Forward::attention_seq(const GpuLayer& L, GpuLayerState& S, const SeqIdx& si, Acts& a) {
  const int64_t D = c_.head_dim, W = c_.window, H = c_.num_heads, n = si.n, o = si.o, d = c_.hidden;
  const float eps = static_cast<float>(c_.rms_eps);
  const bool rr = c_.numerics.reference_rounding;
  // Window rows: the W - 1 positions before the chunk (from the ring), then the chunk's own.
  DI_ASSIGN_OR_RETURN(uint16_t* kvrows, buf<uint16_t>(kKvRows, (W - 1 + a.max_n) * D));
  const int64_t first = std::max<int64_t>(0, si.p0 - (W - 1));
  DI_TRY(ring_to_rows(S.ring.as<uint16_t>(), W, D, first, si.p0, kvrows + (first - (si.p0 - (W - 1))) * D));
  DI_CUDA_TRY(dc::copy_device_to_device(kvrows + (W - 1) * D, a.kv16 + o * D, static_cast<size_t>(n * D) * 2));

  const int64_t nr = std::max(n, kBf16MinRows);
  if (L.has_compressor) {
    DI_TRY(S.kv.reserve((si.p0 + n) / L.ratio + 1));
    DI_ASSIGN_OR_RETURN(float* ckv, buf<float>(kCkv, nr * L.cmp.cw()));
    DI_ASSIGN_OR_RETURN(float* cgate, buf<float>(kCgate, nr * L.cmp.cw()));
    DI_TRY(linear(a.xn + o * d, n, L.cmp.wkv, ckv));
    DI_TRY(linear(a.xn + o * d, n, L.cmp.wgate, cgate));
    DI_CUDA_TRY(dc::compressor_step(compressor_args(L.cmp, S.kv, ckv, cgate, L.inv_freq.as<float>(), c_.rope_dim, eps,
                                                    rr ? 1 : 0, si.zero32, si.one_count, si.one_pos0, si.zero64, n)));
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
    DI_TRY(linear(a.xn + o * d, n, L.icmp.wkv, ikv));
    DI_TRY(linear(a.xn + o * d, n, L.icmp.wgate, igate));
    DI_CUDA_TRY(dc::compressor_step(compressor_args(L.icmp, S.index, ikv, igate, L.inv_freq.as<float>(), c_.rope_dim,
                                                    eps, rr ? 2 : 0, si.zero32, si.one_count, si.one_pos0, si.zero64,
                                                    n)));
    DI_TRY(linear(a.xn + o * d, n, L.weights_proj, widx));
    dc::IndexerArgs x;
    x.q = a.qidx + o * Hi * Di, x.w = widx, x.keys = S.index.entries.as<uint16_t>();
    x.key_base = si.zero64, x.n_visible = si.nvis, x.out_base = si.zero64, x.index = index, x.n_index = n_index;
    x.tokens = static_cast<int32_t>(n);
    x.max_visible = static_cast<int32_t>(std::max<int64_t>((si.p0 + n) / L.ratio, 1));
    x.heads = static_cast<int32_t>(Hi), x.head_dim = static_cast<int32_t>(Di), x.top_k = static_cast<int32_t>(K);
    x.index_stride = K;
    DI_ASSIGN_OR_RETURN(void* iws, scratch_.get(kIdxWs, std::max<size_t>(dc::indexer_workspace_bytes(x), 16)));
    DI_CUDA_TRY(dc::indexer_select(x, iws));
    t.index = index, t.n_index = n_index, t.index_stride = K, t.max_rows = static_cast<int32_t>(W + K);
  } else if (L.has_compressor) {
    t.index = si.hca_idx, t.n_index = si.hca_n, t.index_stride = si.hca_stride;
    t.max_rows = static_cast<int32_t>(W + si.hca_stride);
  } else {
    t.index = si.swa_idx, t.n_index = si.zeros, t.index_stride = 1, t.max_rows = static_cast<int32_t>(W);
  }
  t.split_rows = (t.max_rows + 63) / 64 * 64;  // one split per query: no merge
  DI_ASSIGN_OR_RETURN(void* aws, scratch_.get(kAttnWs, std::max<size_t>(dc::decode_attention_workspace_bytes(t), 16)));
  DI_CUDA_TRY(dc::decode_attention(t, aws));
  // The ring keeps the last W rows (after every query of the chunk has read the old ones).
  const int64_t keep = std::min(n, W);
  DI_TRY(rows_to_ring(a.kv16 + (o + n - keep) * D, W, D, si.p0 + n - keep, si.p0 + n, S.ring.as<uint16_t>()));
  return Status::ok();
}

Status Forward::attention(const GpuLayer& L, size_t l, std::span<const SeqRun> batch, const std::vector<SeqIdx>& idx,
                          Acts& a) {
  const int64_t T = a.T, d = c_.hidden, H = c_.num_heads, D = c_.head_dim, R = c_.rope_dim;
  const float eps = static_cast<float>(c_.rms_eps);
  const float hc_eps = static_cast<float>(c_.hc_eps);
  DI_CUDA_TRY(dc::hc_pre(a.X, T, d, L.hc_attn.fn.as<float>(), L.hc_attn.base.as<float>(), L.hc_attn.scale.as<float>(),
                         eps, hc_eps, static_cast<int>(c_.hc_sinkhorn_iters), a.pre, a.post, a.comb, a.xin, a.hcws));
  DI_CUDA_TRY(dc::rms_norm(a.xin, T, d, L.attn_norm.as<float>(), eps, a.xn));
  // q: wq_a, q_norm, wq_b, per-head RMS (unweighted), RoPE on the last R dims.
  DI_TRY(linear(a.xn, T, L.wq_a, a.qa));
  DI_CUDA_TRY(dc::rms_norm(a.qa, T, c_.q_lora_rank, L.q_norm.as<float>(), eps, a.qan));
  DI_TRY(linear(a.qan, T, L.wq_b, a.qb));
  DI_CUDA_TRY(dc::rms_norm(a.qb, T * H, D, nullptr, eps, a.qb));
  DI_KERNEL_TRY(rope_rows(a.qb, T * H, D, D - R, static_cast<int>(R / 2), a.pos, static_cast<int>(H),
                          L.inv_freq.as<float>(), nullptr));
  DI_CUDA_TRY(dc::cast_f32_to_bf16(a.qb, T * H, D, a.q16, D));
  // K=V row: wkv, kv_norm, RoPE.
  DI_TRY(linear(a.xn, T, L.wkv, a.kv));
  DI_CUDA_TRY(dc::rms_norm(a.kv, T, D, L.kv_norm.as<float>(), eps, a.kv));
  DI_KERNEL_TRY(rope_rows(a.kv, T, D, D - R, static_cast<int>(R / 2), a.pos, 1, L.inv_freq.as<float>(), nullptr));
  DI_CUDA_TRY(dc::cast_f32_to_bf16(a.kv, T, D, a.kv16, D));
  if (L.has_indexer) {  // indexer queries: wq_b on the normed q-LoRA, RoPE (no norm)
    const int64_t Hi = c_.index_n_heads, Di = c_.index_head_dim;
    DI_TRY(linear(a.qan, T, L.idx_wq_b, a.qidx));
    DI_KERNEL_TRY(rope_rows(a.qidx, T * Hi, Di, Di - R, static_cast<int>(R / 2), a.pos, static_cast<int>(Hi),
                            L.inv_freq.as<float>(), nullptr));
  }
  for (size_t s = 0; s < batch.size(); ++s) DI_TRY(attention_seq(L, batch[s].state->layer(l), idx[s], a));
  // Grouped output: group g's heads -> o_lora_rank (wo_a rows of g), then wo_b.
  const int64_t G = c_.o_groups, gk = H * D / G, OR = c_.o_lora_rank;
  DI_CUDA_TRY(dc::swap01(a.ao, T, G, gk, 2, a.operm));
  for (int64_t g = 0; g < G; ++g) DI_TRY(linear(a.operm + g * T * gk, true, T, L.wo_a, g * OR, OR, a.oa + g * T * OR));
  DI_CUDA_TRY(dc::swap01(a.oa, G, T, OR, 4, a.oa2));
  DI_TRY(linear(a.oa2, T, L.wo_b, a.f));
  DI_CUDA_TRY(dc::hc_post(a.X, T, d, a.post, a.comb, a.f));
  return Status::ok();
}

Status Forward::moe(const GpuLayer& L, Acts& a) {
  const int64_t T = a.T, d = c_.hidden, I = c_.moe_inter, E = c_.n_routed_experts;
  const int k = static_cast<int>(c_.experts_per_tok);
  const float eps = static_cast<float>(c_.rms_eps), limit = static_cast<float>(c_.swiglu_limit);
  const float scaling = static_cast<float>(c_.routed_scaling);
  DI_CUDA_TRY(dc::hc_pre(a.X, T, d, L.hc_ffn.fn.as<float>(), L.hc_ffn.base.as<float>(), L.hc_ffn.scale.as<float>(), eps,
                         static_cast<float>(c_.hc_eps), static_cast<int>(c_.hc_sinkhorn_iters), a.pre, a.post, a.comb,
                         a.xin, a.hcws));
  DI_CUDA_TRY(dc::rms_norm(a.xin, T, d, L.ffn_norm.as<float>(), eps, a.h));
  // Shared expert (FP8): w1, w3, clamped SwiGLU, w2.
  DI_TRY(linear(a.h, T, L.sh_w1, a.sg));
  DI_TRY(linear(a.h, T, L.sh_w3, a.su));
  DI_CUDA_TRY(dc::swiglu(a.sg, a.su, I, T, I, limit, a.sa));
  DI_TRY(linear(a.sa, T, L.sh_w2, a.sy));
  // Routed experts (MXFP4), in chunks of rows (moe_build_groups' limit).
  const int64_t Tm = std::min(T, kMoeChunk), Rm = Tm * k;
  const int G = dc::moe_max_groups(Tm, k, E);
  DI_ASSIGN_OR_RETURN(float* lws, buf<float>(kLogitsWs, Tm * E));
  DI_ASSIGN_OR_RETURN(int32_t* experts, buf<int32_t>(kExperts, Rm));
  DI_ASSIGN_OR_RETURN(int32_t* ex_scratch, buf<int32_t>(kExScratch, Rm));
  DI_ASSIGN_OR_RETURN(float* wts, buf<float>(kWts, Rm));
  DI_ASSIGN_OR_RETURN(int32_t* slot_pos, buf<int32_t>(kSlotPos, Rm));
  DI_ASSIGN_OR_RETURN(float* xp, buf<float>(kXp, Rm * d));
  DI_ASSIGN_OR_RETURN(float* gp, buf<float>(kGp, Rm * I));
  DI_ASSIGN_OR_RETURN(float* up, buf<float>(kUp, Rm * I));
  DI_ASSIGN_OR_RETURN(float* ap, buf<float>(kAp, Rm * I));
  DI_ASSIGN_OR_RETURN(float* yp, buf<float>(kYp, Rm * d));
  DI_ASSIGN_OR_RETURN(dc::Mxfp4Group* g13, buf<dc::Mxfp4Group>(kG13, 2 * int64_t(G)));
  DI_ASSIGN_OR_RETURN(dc::Mxfp4Group* g2, buf<dc::Mxfp4Group>(kG2, G));
  const auto* ptrs = L.expert_ptrs.as<dc::ExpertPtrs>();
  for (int64_t t0 = 0; t0 < T; t0 += Tm) {
    const int64_t n = std::min(Tm, T - t0), R = n * k;
    const float* h = a.h + t0 * d;
    const int gn = dc::moe_max_groups(n, k, E);
    const int mm = static_cast<int>(std::min<int64_t>(n, dc::moe_group_rows()));
    if (L.hash) {  // the router still scores (the weights); tid2eid picks the experts
      DI_CUDA_TRY(dc::moe_route(h, n, d, L.gate.as<uint16_t>(), E, L.bias.as<float>(), k, scaling, lws, ex_scratch, wts));
      DI_KERNEL_TRY(hash_route(lws, n, E, a.ids + t0, L.tid2eid.as<int32_t>(), k, scaling, experts, wts, nullptr));
    } else {
      DI_CUDA_TRY(dc::moe_route(h, n, d, L.gate.as<uint16_t>(), E, L.bias.as<float>(), k, scaling, lws, experts, wts));
    }
    DI_CUDA_TRY(dc::moe_build_groups(experts, n, k, E, ptrs, xp, gp, up, ap, yp, d, I, gn, slot_pos, g13, g2));
    DI_CUDA_TRY(dc::moe_permute(h, n, k, d, slot_pos, xp));
    DI_CUDA_TRY(dc::mxfp4_linear_grouped(g13, 2 * gn, mm, I, d));
    DI_CUDA_TRY(dc::swiglu(gp, up, I, R, I, limit, ap));
    DI_CUDA_TRY(dc::mxfp4_linear_grouped(g2, gn, mm, d, I));
    DI_CUDA_TRY(dc::moe_combine(yp, slot_pos, wts, a.sy + t0 * d, n, k, d, a.f + t0 * d));
  }
  DI_CUDA_TRY(dc::hc_post(a.X, T, d, a.post, a.comb, a.f));
  return Status::ok();
}

Status Forward::head(std::span<const SeqRun> batch, const std::vector<SeqIdx>& idx, Acts& a, std::vector<float>& logits,
                     std::vector<int64_t>& row_offsets) {
  const int64_t d = c_.hidden, n = c_.hc_mult, V = c_.vocab_size;
  int64_t rows = 0;
  row_offsets.clear();
  for (size_t s = 0; s < batch.size(); ++s) {
    row_offsets.push_back(rows);
    rows += batch[s].all_logits ? idx[s].n : 1;
  }
  DI_ASSIGN_OR_RETURN(float* Xr, buf<float>(kXr, rows * n * d));
  DI_ASSIGN_OR_RETURN(float* hin, buf<float>(kHin, rows * d));
  DI_ASSIGN_OR_RETURN(float* hn, buf<float>(kHn, rows * d));
  DI_ASSIGN_OR_RETURN(float* out, buf<float>(kLogits, rows * V));
  for (size_t s = 0; s < batch.size(); ++s) {
    const SeqIdx& si = idx[s];
    const int64_t r = batch[s].all_logits ? si.n : 1, first = si.o + si.n - r;
    DI_CUDA_TRY(dc::copy_device_to_device(Xr + row_offsets[s] * n * d, a.X + first * n * d,
                                          static_cast<size_t>(r * n * d) * 4));
  }
  const float eps = static_cast<float>(c_.rms_eps);
  DI_CUDA_TRY(dc::hc_pre(Xr, rows, d, w_.hc_head.fn.as<float>(), w_.hc_head.base.as<float>(),
                         w_.hc_head.scale.as<float>(), eps, static_cast<float>(c_.hc_eps),
                         static_cast<int>(c_.hc_sinkhorn_iters), a.pre, a.post, a.comb, hin, a.hcws));
  DI_CUDA_TRY(dc::rms_norm(hin, rows, d, w_.norm.as<float>(), eps, hn));
  for (size_t s = 0; s < batch.size(); ++s) {  // per sequence: its rows' GEMM shape is its own
    const int64_t r = (s + 1 < batch.size() ? row_offsets[s + 1] : rows) - row_offsets[s];
    DI_TRY(linear(hn + row_offsets[s] * d, r, w_.head, out + row_offsets[s] * V));
  }
  logits.resize(static_cast<size_t>(rows * V));
  DI_CUDA_TRY(dc::copy_to_host(logits.data(), out, logits.size() * 4));
  return Status::ok();
}

Status Forward::run(std::span<const SeqRun> batch, std::vector<float>& logits, std::vector<int64_t>& row_offsets) {
  const int64_t d = c_.hidden, H = c_.num_heads, D = c_.head_dim, W = c_.window;
  Acts a;
  std::vector<int32_t> ids, pos;
  for (const SeqRun& r : batch) {
    a.max_n = std::max<int64_t>(a.max_n, static_cast<int64_t>(r.tokens.size()));
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      ids.push_back(r.tokens[i]);
      pos.push_back(static_cast<int32_t>(r.state->length() + static_cast<int64_t>(i)));
    }
  }
  const int64_t T = a.T = static_cast<int64_t>(ids.size());

  // Per-sequence index arrays, packed into one int32 and one int64 upload.
  std::vector<int32_t> p32;
  std::vector<int64_t> p64;
  struct Off {
    size_t nwin, nvis, hca_n, hca_idx, swa_idx, zeros, count, pos0, zero32, row0, zero64;
  };
  std::vector<Off> offs;
  std::vector<SeqIdx> idx(batch.size());
  int64_t o = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    SeqIdx& si = idx[s];
    si.o = o, si.n = static_cast<int64_t>(batch[s].tokens.size()), si.p0 = batch[s].state->length();
    si.hca_stride = std::max<int64_t>((si.p0 + si.n) / 128, 1);
    Off f;
    auto put32 = [&](size_t& at, int64_t count, auto value) {
      at = p32.size();
      for (int64_t i = 0; i < count; ++i) p32.push_back(static_cast<int32_t>(value(i)));
    };
    auto put64 = [&](size_t& at, int64_t count, auto value) {
      at = p64.size();
      for (int64_t i = 0; i < count; ++i) p64.push_back(value(i));
    };
    auto nwin = [&](int64_t i) { return std::min<int64_t>(si.p0 + i + 1, W); };
    put32(f.nwin, si.n, nwin);
    put32(f.nvis, si.n, [&](int64_t i) { return (si.p0 + i + 1) / 4; });
    put32(f.hca_n, si.n, [&](int64_t i) { return (si.p0 + i + 1) / 128; });
    put32(f.hca_idx, si.n * si.hca_stride, [&](int64_t i) {
      const int64_t t = i / si.hca_stride, j = i % si.hca_stride;
      return j < (si.p0 + t + 1) / 128 ? j : -1;
    });
    put32(f.swa_idx, si.n, [](int64_t) { return -1; });
    put32(f.zeros, si.n, [](int64_t) { return 0; });
    put32(f.count, 1, [&](int64_t) { return si.n; });
    put32(f.pos0, 1, [&](int64_t) { return si.p0; });
    put32(f.zero32, 1, [](int64_t) { return 0; });
    put64(f.row0, si.n, [&](int64_t i) { return (W - 1) + i - (nwin(i) - 1); });
    put64(f.zero64, si.n, [](int64_t) { return int64_t{0}; });
    offs.push_back(f);
    o += si.n;
  }
  DI_ASSIGN_OR_RETURN(int32_t* d32, buf<int32_t>(kI32Pack, static_cast<int64_t>(p32.size())));
  DI_ASSIGN_OR_RETURN(int64_t* d64, buf<int64_t>(kI64Pack, static_cast<int64_t>(p64.size())));
  DI_CUDA_TRY(dc::copy_to_device(d32, p32.data(), p32.size() * 4));
  DI_CUDA_TRY(dc::copy_to_device(d64, p64.data(), p64.size() * 8));
  for (size_t s = 0; s < batch.size(); ++s) {
    const Off& f = offs[s];
    SeqIdx& si = idx[s];
    si.nwin = d32 + f.nwin, si.nvis = d32 + f.nvis, si.hca_n = d32 + f.hca_n, si.hca_idx = d32 + f.hca_idx;
    si.swa_idx = d32 + f.swa_idx, si.zeros = d32 + f.zeros, si.one_count = d32 + f.count, si.one_pos0 = d32 + f.pos0;
    si.zero32 = d32 + f.zero32, si.row0 = d64 + f.row0, si.zero64 = d64 + f.zero64;
  }

  // Activations for T rows.
  const int64_t n = c_.hc_mult, G = c_.o_groups, OR = c_.o_lora_rank, I = c_.moe_inter;
  DI_ASSIGN_OR_RETURN(a.ids, buf<int32_t>(kIds, T));
  DI_ASSIGN_OR_RETURN(a.pos, buf<int32_t>(kPos, T));
  DI_CUDA_TRY(dc::copy_to_device(a.ids, ids.data(), ids.size() * 4));
  DI_CUDA_TRY(dc::copy_to_device(a.pos, pos.data(), pos.size() * 4));
  DI_ASSIGN_OR_RETURN(a.e, buf<float>(kE, T * d));
  DI_ASSIGN_OR_RETURN(a.X, buf<float>(kX, T * n * d));
  DI_ASSIGN_OR_RETURN(a.pre, buf<float>(kPre, T * n));
  DI_ASSIGN_OR_RETURN(a.post, buf<float>(kPost, T * n));
  DI_ASSIGN_OR_RETURN(a.comb, buf<float>(kComb, T * n * n));
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
  DI_ASSIGN_OR_RETURN(a.operm, buf<uint16_t>(kOperm, T * H * D));
  DI_ASSIGN_OR_RETURN(a.oa, buf<float>(kOa, T * G * OR));
  DI_ASSIGN_OR_RETURN(a.oa2, buf<float>(kOa2, T * G * OR));
  DI_ASSIGN_OR_RETURN(a.f, buf<float>(kF, T * d));
  DI_ASSIGN_OR_RETURN(a.h, buf<float>(kH, T * d));
  DI_ASSIGN_OR_RETURN(a.sg, buf<float>(kSg, T * I));
  DI_ASSIGN_OR_RETURN(a.su, buf<float>(kSu, T * I));
  DI_ASSIGN_OR_RETURN(a.sa, buf<float>(kSa, T * I));
  DI_ASSIGN_OR_RETURN(a.sy, buf<float>(kSy, T * d));

  DI_CUDA_TRY(dc::embed_rows(w_.embed.as<uint16_t>(), c_.vocab_size, d, a.ids, T, a.e));
  DI_KERNEL_TRY(expand_streams(a.e, T, d, static_cast<int>(n), a.X, nullptr));
  for (size_t l = 0; l < w_.layers.size(); ++l) {
    DI_TRY(attention(w_.layers[l], l, batch, idx, a).with_context("layer " + std::to_string(l) + " attention"));
    DI_TRY(moe(w_.layers[l], a).with_context("layer " + std::to_string(l) + " moe"));
  }
  DI_TRY(head(batch, idx, a, logits, row_offsets));
  for (const SeqRun& r : batch) r.state->advance(static_cast<int64_t>(r.tokens.size()));
  return Status::ok();
}

}  // namespace deepinfer::v4gpu
