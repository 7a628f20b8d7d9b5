#include "prefill.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "backend/cuda/compress_ops.h"
#include "backend/cuda/model_ops.h"

namespace deepinfer::bench {
namespace {

constexpr int64_t kPad = 128;     // spare rows after the expert-sorted buffers (padded expert GEMMs)
constexpr int64_t kKeep = kWindow - 1;  // window rows carried from one chunk to the next

struct ChunkArrays {  // per-chunk per-query indices (device), built before timing
  int64_t p0 = 0, n = 0;
  int32_t *pos, *nwin, *nvis4, *hca_n, *hca_index, *swa_index, *zeros, *count, *pos0;
  int64_t *row0, *zero64;
};

struct LayerState {
  uint16_t* kvrows = nullptr;  // [127 + chunk, 512]: carried window rows, then this chunk's
  float *kv = nullptr, *gate = nullptr, *pkv = nullptr, *pgate = nullptr;
  float *ikv = nullptr, *igate = nullptr, *ipkv = nullptr, *ipgate = nullptr;
  uint16_t *entries = nullptr, *keys = nullptr;
};

struct Acts {
  int64_t Tc = 0, R = 0;
  float *e, *X, *pre, *post, *comb, *hcws, *xin, *xn, *qa, *qan, *qb, *kv, *kvn, *oa, *oa2, *f, *h;
  float *ckv, *cgate, *ikv, *igate, *qidx, *widx, *y13s, *sa, *sy, *logits_ws, *wts, *xp, *y13, *ap, *yp, *hn, *out;
  uint16_t *xn16, *q16, *ao, *operm, *hn16;
  uint8_t* q8;
  float* qs;
  int32_t *ids, *experts, *ex_scratch, *slot_pos, *offsets, *index, *n_index, *zero32;
  int64_t* zero64;
  void *sort_ws, *idx_ws, *attn_ws;
  int32_t* host_offsets;  // pinned [E + 1]
};

struct Prefill {
  Ctx& c;
  Model& m;
  int64_t T;
  Acts a;
  std::vector<ChunkArrays> chunks;
  std::vector<LayerState> ls;
  std::map<std::pair<int64_t, int64_t>, int64_t> m_pad;  // (rows, N) -> rows cuBLASLt accepts
  double attn_flops = 0, idx_flops = 0;

  cudaStream_t s() const { return c.st.main; }

  /// y[off .. off + rows) = x[off ..] . W^T for one expert's slice, padding the row count up to a
  /// size cuBLASLt has a plan for (pad rows read the next slice, their outputs are overwritten
  /// by the next expert or land in the kPad spare rows).
  void expert_gemm(const float* x, int64_t rows, const Fp8Lin& W, float* y) {
    const auto key = std::make_pair(rows, W.w.n);
    auto it = m_pad.find(key);
    std::vector<int64_t> tries;
    if (it != m_pad.end()) {
      tries.push_back(it->second);
    } else {
      for (int64_t q : {int64_t(1), int64_t(16), int64_t(32), int64_t(64), int64_t(128)})
        tries.push_back(std::max<int64_t>((rows + q - 1) / q * q, q == 1 ? 1 : q));
    }
    for (int64_t M : tries) {
      DI_OK(dc::quantize_act_fp8_t(x, false, M, W.w.k, a.q8, a.qs, s()));
      if (dc::fp8_linear_lt(a.q8, a.qs, M, W.lt(), y, false, c.lt_ws[0], s())) {
        m_pad[key] = M;
        return;
      }
    }
    fail("fp8_linear_lt (expert)", __FILE__, __LINE__,
         "no padded row count works for rows=" + std::to_string(rows) + ": " + dc::last_error());
  }

  void dense(const void* x, bool bf16, int64_t M, const Fp8Lin& W, float* y) {
    fp8_dense(c, -1, x, bf16, M, W, a.q8, a.qs, y);
  }

  void attn_half(const LayerW& L, LayerState& S, const ChunkArrays& ch) {
    const int64_t n = ch.n;
    DI_OK(dc::hc_pre(a.X, n, kD, L.hc_attn.fn, L.hc_attn.base, L.hc_attn.scale, kEps, kEps, kSinkhorn, a.pre, a.post,
                     a.comb, a.xin, a.hcws, s()));
    c.mark("mhc");
    DI_OK(dc::rms_norm(a.xin, n, kD, L.attn_norm, kEps, a.xn, s()));
    DI_OK(dc::cast_f32_to_bf16(a.xn, n, kD, a.xn16, kD, s()));
    c.mark("norm");
    dense(a.xn, false, n, L.wq_a, a.qa);
    DI_OK(dc::rms_norm(a.qa, n, kQLora, L.q_norm, kEps, a.qan, s()));
    dense(a.qan, false, n, L.wq_b, a.qb);
    DI_OK(dc::rms_norm(a.qb, n * kHeads, kHeadDim, nullptr, kEps, a.qb, s()));
    DI_KOK(rope_rows(a.qb, n * kHeads, kHeadDim, kHeadDim - kRope, kRope / 2, ch.pos, kHeads, L.inv_freq, s()));
    DI_OK(dc::cast_f32_to_bf16(a.qb, n * kHeads, kHeadDim, a.q16, kHeadDim, s()));
    c.mark("q_path");
    dense(a.xn, false, n, L.wkv, a.kv);
    DI_OK(dc::rms_norm(a.kv, n, kHeadDim, L.kv_norm, kEps, a.kvn, s()));
    DI_KOK(rope_rows(a.kvn, n, kHeadDim, kHeadDim - kRope, kRope / 2, ch.pos, 1, L.inv_freq, s()));
    DI_OK(dc::cast_f32_to_bf16(a.kvn, n, kHeadDim, S.kvrows + kKeep * kHeadDim, kHeadDim, s()));
    c.mark("kv_path");
    if (L.ratio > 0) {
      bf16_dense(c, -1, a.xn16, n, L.cmp.wkv, a.ckv);
      bf16_dense(c, -1, a.xn16, n, L.cmp.wgate, a.cgate);
      DI_OK(dc::compressor_step(cmp_args(L.cmp, S.kv, S.gate, S.pkv, S.pgate, S.entries, a.ckv, a.cgate, L, ch, 1), s()));
      if (L.ratio == 4) {
        bf16_dense(c, -1, a.xn16, n, L.icmp.wkv, a.ikv);
        bf16_dense(c, -1, a.xn16, n, L.icmp.wgate, a.igate);
        DI_OK(dc::compressor_step(
            cmp_args(L.icmp, S.ikv, S.igate, S.ipkv, S.ipgate, S.keys, a.ikv, a.igate, L, ch, 2), s()));
      }
      c.mark("compressor");
    }
    dc::DecodeAttnArgs t;
    t.q = a.q16, t.window = S.kvrows, t.window_row0 = ch.row0, t.n_window = ch.nwin, t.sink = L.sink;
    t.pos = ch.pos, t.inv_freq = L.inv_freq, t.out = a.ao, t.batch = int32_t(n);
    t.entries = L.ratio > 0 ? S.entries : S.kvrows;
    if (L.ratio == 4) {
      fp8_dense(c, -1, a.qan, false, n, L.idx_wq_b, a.q8, a.qs, a.qidx);
      DI_KOK(rope_rows(a.qidx, n * kIdxHeads, kIdxDim, kIdxDim - kRope, kRope / 2, ch.pos, kIdxHeads, L.inv_freq, s()));
      bf16_dense(c, -1, a.xn16, n, L.weights_proj, a.widx);
      dc::IndexerArgs x = indexer_args(ch);
      x.keys = S.keys;
      DI_OK(dc::indexer_select(x, a.idx_ws, s()));
      c.mark("indexer");
      t.index = a.index, t.n_index = a.n_index, t.index_stride = kIdxTopK, t.max_rows = kWindow + kIdxTopK;
    } else if (L.ratio == 128) {
      t.index = ch.hca_index, t.n_index = ch.hca_n, t.index_stride = hca_stride();
      t.max_rows = int32_t(kWindow + hca_stride());
    } else {
      t.index = ch.swa_index, t.n_index = ch.zeros, t.index_stride = 1, t.max_rows = kWindow;
    }
    t.split_rows = int32_t((t.max_rows + 63) / 64 * 64);  // one split per query: no merge, no workspace
    DI_OK(dc::decode_attention(t, a.attn_ws, s()));
    c.mark("attention");
    const int64_t gk = int64_t(kHeads) * kHeadDim / kOGroups;
    DI_OK(dc::swap01(a.ao, n, kOGroups, gk, 2, a.operm, s()));
    for (int g = 0; g < kOGroups; ++g)
      dense(a.operm + int64_t(g) * n * gk, true, n, L.wo_a.rows(int64_t(g) * kORank, kORank), a.oa + int64_t(g) * n * kORank);
    DI_OK(dc::swap01(a.oa, kOGroups, n, kORank, 4, a.oa2, s()));
    dense(a.oa2, false, n, L.wo_b, a.f);
    c.mark("wo");
    DI_OK(dc::hc_post(a.X, n, kD, a.post, a.comb, a.f, s()));
    c.mark("mhc");
    if (n >= kKeep)  // carry the last 127 rows to the next chunk's window
      DI_CK(cudaMemcpyAsync(S.kvrows, S.kvrows + n * kHeadDim, kKeep * kHeadDim * 2, cudaMemcpyDeviceToDevice, s()));
  }

  void moe_half(const LayerW& L, const ChunkArrays& ch) {
    const int64_t n = ch.n, R = n * kTopK;
    const int E = m.spec.experts;
    DI_OK(dc::hc_pre(a.X, n, kD, L.hc_ffn.fn, L.hc_ffn.base, L.hc_ffn.scale, kEps, kEps, kSinkhorn, a.pre, a.post,
                     a.comb, a.xin, a.hcws, s()));
    c.mark("mhc");
    DI_OK(dc::rms_norm(a.xin, n, kD, L.ffn_norm, kEps, a.h, s()));
    c.mark("norm");
    dense(a.h, false, n, L.sh13, a.y13s);
    DI_OK(dc::swiglu(a.y13s, a.y13s + kInter, 2 * kInter, n, kInter, kSwigluLimit, a.sa, s()));
    dense(a.sa, false, n, L.sh2, a.sy);
    c.mark("shared_expert");
    if (L.hash) {
      DI_OK(dc::moe_route(a.h, n, kD, L.gate, E, L.bias, kTopK, kRouteScale, a.logits_ws, a.ex_scratch, a.wts, s()));
      DI_KOK(hash_route(a.logits_ws, n, E, a.ids + ch.p0, L.tid2eid, kTopK, kRouteScale, a.experts, a.wts, s()));
    } else {
      DI_OK(dc::moe_route(a.h, n, kD, L.gate, E, L.bias, kTopK, kRouteScale, a.logits_ws, a.experts, a.wts, s()));
    }
    c.mark("router");
    DI_OK(dc::moe_sort_tokens(a.experts, n, kTopK, E, a.offsets, a.slot_pos, a.sort_ws, s()));
    DI_OK(dc::moe_permute(a.h, n, kTopK, kD, a.slot_pos, a.xp, s()));
    DI_CK(cudaMemcpyAsync(a.host_offsets, a.offsets, size_t(E + 1) * 4, cudaMemcpyDeviceToHost, s()));
    DI_CK(cudaStreamSynchronize(s()));
    c.mark("moe_permute");
    const int32_t* off = a.host_offsets;
    if (off[E] != R) fail("moe_sort_tokens", __FILE__, __LINE__, "offsets[E] = " + std::to_string(off[E]));
    for (int e = 0; e < E; ++e)
      if (off[e + 1] > off[e])
        expert_gemm(a.xp + int64_t(off[e]) * kD, off[e + 1] - off[e], L.fp8_experts[e].w13, a.y13 + int64_t(off[e]) * 2 * kInter);
    DI_OK(dc::swiglu(a.y13, a.y13 + kInter, 2 * kInter, R, kInter, kSwigluLimit, a.ap, s()));
    for (int e = 0; e < E; ++e)
      if (off[e + 1] > off[e])
        expert_gemm(a.ap + int64_t(off[e]) * kInter, off[e + 1] - off[e], L.fp8_experts[e].w2, a.yp + int64_t(off[e]) * kD);
    c.mark("experts");
    DI_OK(dc::moe_combine(a.yp, a.slot_pos, a.wts, a.sy, n, kTopK, kD, a.f, s()));
    c.mark("moe_combine");
    DI_OK(dc::hc_post(a.X, n, kD, a.post, a.comb, a.f, s()));
    c.mark("mhc");
  }

  int64_t hca_stride() const { return std::max<int64_t>(T / 128, 1); }

  dc::CompressorStepArgs cmp_args(const CompressorW& w, float* kv, float* gate, float* pkv, float* pgate, uint16_t* ent,
                                  const float* x_kv, const float* x_gate, const LayerW& L, const ChunkArrays& ch,
                                  int round_mode) const {
    dc::CompressorStepArgs q;
    q.kv = x_kv, q.gate = x_gate, q.ape = w.ape, q.norm = w.norm, q.inv_freq = L.inv_freq;
    q.slot = a.zero32, q.tok_offset = a.zero32, q.count = ch.count, q.pos0 = ch.pos0, q.entry_base = a.zero64;
    q.buf_kv = kv, q.buf_gate = gate, q.prev_kv = pkv, q.prev_gate = pgate, q.entries = ent;
    q.batch = 1, q.max_count = int32_t(ch.n), q.ratio = w.ratio, q.width = w.width, q.rope_dim = kRope;
    q.overlap = w.overlap, q.eps = kEps, q.round_mode = round_mode;
    return q;
  }

  dc::IndexerArgs indexer_args(const ChunkArrays& ch) const {
    dc::IndexerArgs x;
    x.q = a.qidx, x.w = a.widx, x.key_base = ch.zero64, x.n_visible = ch.nvis4, x.out_base = ch.zero64;
    x.index = a.index, x.n_index = a.n_index, x.tokens = int32_t(ch.n);
    x.max_visible = int32_t(std::max<int64_t>((ch.p0 + ch.n) / 4, 1));
    x.heads = kIdxHeads, x.head_dim = kIdxDim, x.top_k = kIdxTopK, x.index_stride = kIdxTopK;
    return x;
  }

  void run() {
    c.mark("begin");
    for (const ChunkArrays& ch : chunks) {
      DI_OK(dc::embed_rows(m.embed, kVocab, kD, a.ids + ch.p0, ch.n, a.e, nullptr, s()));
      DI_KOK(expand_streams(a.e, ch.n, kD, kHc, a.X, s()));
      c.mark("embed");
      for (size_t l = 0; l < m.layers.size(); ++l) attn_half(m.layers[l], ls[l], ch), moe_half(m.layers[l], ch);
    }
    const ChunkArrays& last = chunks.back();
    const float* xl = a.X + (last.n - 1) * kHc * kD;
    DI_OK(dc::hc_pre(xl, 1, kD, m.hc_head.fn, m.hc_head.base, m.hc_head.scale, kEps, kEps, kSinkhorn, a.pre, a.post,
                     a.comb, a.xin, a.hcws, s()));
    DI_OK(dc::rms_norm(a.xin, 1, kD, m.norm, kEps, a.hn, s()));
    DI_OK(dc::cast_f32_to_bf16(a.hn, 1, kD, a.hn16, kD, s()));
    bf16_dense(c, -1, a.hn16, 1, Bf16Lin{m.head, kVocab, kD}, a.out);
    c.mark("head");
  }
};

int64_t chunk_of(int64_t T) { return std::min(T, kPrefillChunk); }

void make_state(Prefill& P, Arena& ar) {
  const int64_t T = P.T, Tc = chunk_of(T), R = Tc * kTopK, E = P.m.spec.experts;
  SeedSeq seed;
  auto f = [&](int64_t n) { return ar.take<float>(n); };
  auto h16 = [&](int64_t n) { return ar.take<uint16_t>(n); };
  Acts& a = P.a;
  a.Tc = Tc, a.R = R;
  a.e = f(Tc * kD), a.X = f(Tc * kHc * kD), a.pre = f(Tc * 4), a.post = f(Tc * 4), a.comb = f(Tc * 16);
  a.hcws = static_cast<float*>(ar.alloc(dc::hc_pre_workspace_bytes(Tc, kD)));
  a.xin = f(Tc * kD), a.xn = f(Tc * kD), a.qa = f(Tc * kQLora), a.qan = f(Tc * kQLora);
  a.qb = f(Tc * kHeads * kHeadDim), a.kv = f(Tc * kHeadDim), a.kvn = f(Tc * kHeadDim);
  a.oa = f(Tc * kOGroups * kORank), a.oa2 = f(Tc * kOGroups * kORank), a.f = f(Tc * kD), a.h = f(Tc * kD);
  a.ckv = f(Tc * 2 * kHeadDim), a.cgate = f(Tc * 2 * kHeadDim), a.ikv = f(Tc * 2 * kIdxDim), a.igate = f(Tc * 2 * kIdxDim);
  a.qidx = f(Tc * kIdxHeads * kIdxDim), a.widx = f(Tc * kIdxHeads);
  a.y13s = f(Tc * 2 * kInter), a.sa = f(Tc * kInter), a.sy = f(Tc * kD);
  a.logits_ws = f(Tc * E), a.wts = f(R);
  a.xp = f((R + kPad) * kD), a.y13 = f((R + kPad) * 2 * kInter), a.ap = f((R + kPad) * kInter), a.yp = f((R + kPad) * kD);
  a.hn = f(kD), a.out = f(int64_t(kBf16MinRows) * kVocab);
  a.xn16 = h16(std::max<int64_t>(Tc, kBf16MinRows) * kD), a.q16 = h16(Tc * kHeads * kHeadDim), a.ao = h16(Tc * kHeads * kHeadDim);
  a.operm = h16(Tc * kHeads * kHeadDim), a.hn16 = h16(int64_t(kBf16MinRows) * kD);
  const int64_t q8_rows = std::max(Tc * 2, Tc + kPad);  // dense: K <= 8192 at Tc rows; experts: K <= 4096
  a.q8 = ar.take<uint8_t>(q8_rows * 4096), a.qs = f(q8_rows * 4096 / 128);
  std::mt19937 rng(777);
  std::vector<int32_t> ids(T);
  for (auto& t : ids) t = int32_t(rng() % kVocab);
  a.ids = ar.upload(ids);
  a.experts = ar.take<int32_t>(R), a.ex_scratch = ar.take<int32_t>(R), a.slot_pos = ar.take<int32_t>(R);
  a.offsets = ar.take<int32_t>(E + 1);
  a.index = ar.take<int32_t>(Tc * kIdxTopK), a.n_index = ar.take<int32_t>(Tc);
  a.zero32 = ar.upload(std::vector<int32_t>(1, 0)), a.zero64 = ar.upload(std::vector<int64_t>(1, 0));
  a.sort_ws = ar.alloc(dc::moe_sort_tokens_workspace_bytes(Tc, kTopK, E));
  DI_CK(cudaMallocHost(&a.host_offsets, size_t(E + 1) * 4));
  // per-chunk query arrays, and the attended-row FLOPs of the floor
  for (int64_t p0 = 0; p0 < T; p0 += Tc) {
    ChunkArrays ch;
    ch.p0 = p0, ch.n = std::min(Tc, T - p0);
    std::vector<int32_t> pos(ch.n), nwin(ch.n), nvis(ch.n), hn(ch.n);
    std::vector<int64_t> row0(ch.n);
    const int64_t hs = P.hca_stride();
    std::vector<int32_t> hidx(size_t(ch.n) * hs, -1);
    for (int64_t t = 0; t < ch.n; ++t) {
      const int64_t p = p0 + t;
      pos[t] = int32_t(p), nwin[t] = int32_t(std::min<int64_t>(p + 1, kWindow));
      row0[t] = kKeep + t - (nwin[t] - 1);
      nvis[t] = int32_t((p + 1) / 4), hn[t] = int32_t((p + 1) / 128);
      for (int32_t j = 0; j < hn[t]; ++j) hidx[size_t(t) * hs + j] = j;
      for (const LayerW& L : P.m.layers) {
        const double rows = nwin[t] + (L.ratio == 4 ? std::min<int64_t>(nvis[t], kIdxTopK) : L.ratio == 128 ? hn[t] : 0);
        P.attn_flops += 4.0 * kHeads * rows * kHeadDim;
        if (L.ratio == 4) P.idx_flops += 2.0 * kIdxHeads * kIdxDim * nvis[t];
      }
    }
    ch.pos = ar.upload(pos), ch.nwin = ar.upload(nwin), ch.nvis4 = ar.upload(nvis), ch.hca_n = ar.upload(hn);
    ch.hca_index = ar.upload(hidx), ch.row0 = ar.upload(row0);
    ch.swa_index = ar.upload(std::vector<int32_t>(ch.n, -1)), ch.zeros = ar.upload(std::vector<int32_t>(ch.n, 0));
    ch.count = ar.upload(std::vector<int32_t>(1, int32_t(ch.n))), ch.pos0 = ar.upload(std::vector<int32_t>(1, int32_t(p0)));
    ch.zero64 = ar.upload(std::vector<int64_t>(ch.n, 0));
    P.chunks.push_back(ch);
  }
  // attention / indexer workspaces for the largest chunk
  size_t aws = 0;
  for (const ChunkArrays& ch : P.chunks) {
    dc::DecodeAttnArgs t;
    t.batch = int32_t(ch.n), t.split_rows = 256, t.max_rows = int32_t(kWindow + std::max<int64_t>(kIdxTopK, P.hca_stride()));
    t.index_stride = std::max<int64_t>(kIdxTopK, P.hca_stride());
    t.split_rows = int32_t((t.max_rows + 63) / 64 * 64);
    aws = std::max(aws, dc::decode_attention_workspace_bytes(t));
  }
  a.attn_ws = ar.alloc(aws);
  size_t iws = 0;
  for (const ChunkArrays& ch : P.chunks) iws = std::max(iws, dc::indexer_workspace_bytes(P.indexer_args(ch)));
  a.idx_ws = ar.alloc(iws);
  cudaStream_t s = P.s();
  for (const LayerW& L : P.m.layers) {
    LayerState S;
    S.kvrows = h16((kKeep + Tc) * kHeadDim);
    if (L.ratio > 0) {
      const int64_t n = int64_t(L.cmp.ratio) * L.cmp.cw(), hw = int64_t(L.cmp.ratio) * L.cmp.width;
      S.kv = f(n), S.gate = f(n);
      if (L.cmp.overlap) S.pkv = f(hw), S.pgate = f(hw);
      S.entries = h16((T / L.ratio + 2) * kHeadDim);
      DI_OK(dc::fill_random(S.entries, (T / L.ratio + 2) * kHeadDim, dc::RandomKind::kBf16, 1.f, 0.f, seed(), s));
    }
    if (L.ratio == 4) {
      const int64_t n = int64_t(L.icmp.ratio) * L.icmp.cw(), hw = int64_t(L.icmp.ratio) * L.icmp.width;
      S.ikv = f(n), S.igate = f(n), S.ipkv = f(hw), S.ipgate = f(hw);
      S.keys = h16((T / 4 + 2) * kIdxDim);
      DI_OK(dc::fill_random(S.keys, (T / 4 + 2) * kIdxDim, dc::RandomKind::kBf16, 1.f, 0.f, seed(), s));
    }
    P.ls.push_back(S);
  }
  DI_CK(cudaStreamSynchronize(s));
}

double gemm_flops_per_token(const LayerW& L, int experts_per_token, int n_experts) {
  const double d = kD;
  double f = d * kQLora + double(kQLora) * kHeads * kHeadDim + d * kHeadDim;
  f += double(kOGroups) * kORank * (kHeads * kHeadDim / kOGroups) + double(kOGroups) * kORank * d;
  f += (1.0 + experts_per_token) * 3.0 * d * kInter;  // shared + routed experts
  f += d * n_experts;  // router
  if (L.ratio > 0) f += 2.0 * L.cmp.cw() * d;
  if (L.ratio == 4) f += 2.0 * L.icmp.cw() * d + double(kQLora) * kIdxHeads * kIdxDim + d * kIdxHeads;
  return 2 * f;
}

}  // namespace

double prefill_config_bytes(const Model& m, int64_t T) {
  const double Tc = double(chunk_of(T)), R = Tc * kTopK;
  double b = Tc * (kHc * kD * 4 + 12.0 * kD * 4 + kHeads * kHeadDim * (4 + 2 * 3) + kOGroups * kORank * 8.0 +
                   kIdxHeads * kIdxDim * 4 + 2 * 4096 * 1.1 + kIdxTopK * 4 + m.spec.experts * 4);
  b += (R + kPad) * (2 * kD + 3 * kInter) * 4 + Tc * 128 * 4.0 * 2;
  b += double(m.layers.size()) * ((kKeep + Tc) * kHeadDim * 2 + T * (kHeadDim * 2 / 4.0 + kIdxDim * 2 / 4.0));
  b += Tc * (T / 4.0) * 4;  // indexer scores of the last chunk
  return b + 256e6;
}

void run_prefill(Ctx& c, Model& m, int64_t T, bool profile, ResultRow& row) {
  Arena ar;
  Prefill P{c, m, T, {}, {}, {}, {}};
  make_state(P, ar);
  struct HostFree {
    int32_t* p;
    ~HostFree() { cudaFreeHost(p); }
  } hf{P.a.host_offsets};
  P.run();  // warm-up: plans, padded expert row counts
  DI_CK(cudaStreamSynchronize(P.s()));
  cudaEvent_t e0, e1;
  DI_CK(cudaEventCreate(&e0));
  DI_CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  const int reps = T >= 16384 ? 2 : 3;
  for (int r = 0; r < reps; ++r) {
    DI_CK(cudaEventRecord(e0, P.s()));
    P.run();
    DI_CK(cudaEventRecord(e1, P.s()));
    DI_CK(cudaEventSynchronize(e1));
    float t = 0;
    DI_CK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  double gemm = 0;
  for (const LayerW& L : m.layers) gemm += gemm_flops_per_token(L, kTopK, m.spec.experts) * double(T);
  gemm += 2.0 * kD * kVocab;  // head, last token
  const double flops = gemm + P.attn_flops + P.idx_flops;
  std::vector<float> logit(kVocab);
  DI_CK(cudaMemcpy(logit.data(), P.a.out, logit.size() * 4, cudaMemcpyDeviceToHost));
  const bool finite = std::all_of(logit.begin(), logit.end(), [](float v) { return std::isfinite(v); });
  row.step_ms = ms[0];
  row.tokens_per_s = double(T) / (ms[0] * 1e-3);
  row.floor_ms = flops / c.fp8_flops * 1e3;
  row.extra["flops"] = flops;
  row.extra["gemm_flops"] = gemm;
  row.extra["attention_flops"] = P.attn_flops;
  row.extra["indexer_flops"] = P.idx_flops;
  row.extra["achieved_tflops"] = flops / (ms[0] * 1e-3) / 1e12;
  row.extra["chunk"] = double(chunk_of(T));
  row.extra["finite_logits"] = finite ? 1 : 0;
  std::printf("prefill %-20s T=%-6lld %9.2f ms  %9.0f tok/s  floor %8.2f ms  x%.2f  %.0f TFLOP/s (%.0f%% of FP8 rate)%s\n",
              m.spec.name.c_str(), (long long)T, ms[0], row.tokens_per_s, row.floor_ms, ms[0] / row.floor_ms,
              flops / (ms[0] * 1e-3) / 1e12, 100 * row.floor_ms / ms[0], finite ? "" : "  NON-FINITE logits");
  if (profile) {
    c.marker.enable(P.s(), false);
    try {
      P.run();
      DI_CK(cudaStreamSynchronize(P.s()));
    } catch (const std::exception& e) {  // the timing above stands; only the profile is lost
      c.marker.disable();
      std::printf("  profile failed: %s\n", e.what());
      return;
    }
    c.marker.disable();
    double sum = 0;
    for (auto& [k, v] : c.marker.totals()) sum += v;
    std::printf("  op classes (events between op classes, eager, one run: %.2f ms):\n", sum);
    for (auto& [k, v] : c.marker.totals()) {
      std::printf("    %-14s %9.3f ms  %5.1f%%\n", k.c_str(), v, 100 * v / sum);
      row.extra["profile_ms." + k] = v;
    }
  }
  DI_CK(cudaDeviceSynchronize());
}

}  // namespace deepinfer::bench
