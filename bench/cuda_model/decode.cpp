#include "decode.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <set>

#include "backend/cuda/compress_ops.h"
#include "backend/cuda/model_ops.h"

namespace deepinfer::bench {
namespace {

struct Sizes {  // entries per sequence of each compressed cache
  int B = 0;
  int64_t C = 0, pos = 0, max4 = 0, max128 = 0, vis4 = 0, vis128 = 0;
  Sizes(int b, int64_t c) : B(b), C(c), pos(c + 3) {
    vis4 = (pos + 1) / 4, vis128 = (pos + 1) / 128;
    max4 = vis4 + 4, max128 = vis128 + 2;
  }
};

struct CmpState {
  float *kv = nullptr, *gate = nullptr, *pkv = nullptr, *pgate = nullptr;
  uint16_t* entries = nullptr;
};

struct LayerState {
  uint16_t* ring = nullptr;  // [B, 128, 512]
  CmpState cmp, icmp;        // icmp.entries = the indexer keys [B * max4, 128]
  int32_t *index = nullptr, *n_index = nullptr;  // CSA: indexer selection [B, 512]
  int32_t* experts = nullptr;                     // [B, 6] this layer's routing (kept to count)
};

struct Acts {
  int B = 0, G = 0;
  float *e, *X, *pre, *post, *comb, *hcws, *xin, *xn, *qa, *qan, *qb, *kv, *kvn, *oa, *oa2, *f;
  float *h, *logits_ws, *wts, *xp, *gp, *up, *ap, *yp, *y13, *sa, *sy;
  float *ckv, *cgate, *ikv, *igate, *qidx, *widx, *hfin, *hn, *out;
  uint16_t *xn16, *q16, *ao, *operm, *hn16;
  uint8_t* q8[Streams::kSide + 1];
  float* qs[Streams::kSide + 1];
  int32_t *ids, *pos, *iota, *ones, *ex_scratch, *slot_pos, *swa_index, *zeros, *hca_index, *hca_n, *nwin, *nvis;
  int64_t *base4, *base128;
  dc::Mxfp4Group *g13, *g2;
  void *attn_ws, *idx_ws;
};

constexpr int64_t kQ8Cols = int64_t(kOGroups) * kORank;  // widest K of a quantised activation

void rnd(void* p, int64_t n, dc::RandomKind k, float a, SeedSeq& seed, cudaStream_t s) {
  DI_OK(dc::fill_random(p, n, k, a, 0.f, seed(), s));
}

CmpState make_cmp(Arena& ar, const CompressorW& w, int B, int64_t max_entries, SeedSeq& seed, cudaStream_t s) {
  CmpState c;
  const int64_t n = int64_t(B) * w.ratio * w.cw();
  c.kv = ar.take<float>(n), c.gate = ar.take<float>(n);
  rnd(c.kv, n, dc::RandomKind::kF32, 1.f, seed, s);
  rnd(c.gate, n, dc::RandomKind::kF32, 1.f, seed, s);
  if (w.overlap) {
    const int64_t m = int64_t(B) * w.ratio * w.width;
    c.pkv = ar.take<float>(m), c.pgate = ar.take<float>(m);
    rnd(c.pkv, m, dc::RandomKind::kF32, 1.f, seed, s);
    rnd(c.pgate, m, dc::RandomKind::kF32, 1.f, seed, s);
  }
  c.entries = ar.take<uint16_t>(int64_t(B) * max_entries * w.width);
  rnd(c.entries, int64_t(B) * max_entries * w.width, dc::RandomKind::kBf16, 1.f, seed, s);
  return c;
}

template <class T>
std::vector<T> iota_times(int n, T step) {
  std::vector<T> v(n);
  for (int i = 0; i < n; ++i) v[i] = T(i) * step;
  return v;
}

Acts make_acts(Arena& ar, const Model& m, const Sizes& z, SeedSeq& seed, cudaStream_t s) {
  Acts a;
  const int B = z.B, E = m.spec.experts;
  a.B = B;
  a.G = dc::moe_max_groups(B, kTopK, E);
  const int64_t R = int64_t(B) * kTopK;
  auto f = [&](int64_t n) { return ar.take<float>(n); };
  auto h16 = [&](int64_t n) { return ar.take<uint16_t>(n); };
  a.e = f(int64_t(B) * kD), a.X = f(int64_t(B) * kHc * kD);
  a.pre = f(B * 4), a.post = f(B * 4), a.comb = f(B * 16);
  a.hcws = static_cast<float*>(ar.alloc(dc::hc_pre_workspace_bytes(B, kD)));
  a.xin = f(int64_t(B) * kD), a.xn = f(int64_t(B) * kD), a.qa = f(int64_t(B) * kQLora), a.qan = f(int64_t(B) * kQLora);
  a.qb = f(int64_t(B) * kHeads * kHeadDim), a.kv = f(int64_t(B) * kHeadDim), a.kvn = f(int64_t(B) * kHeadDim);
  a.oa = f(int64_t(B) * kOGroups * kORank), a.oa2 = f(int64_t(B) * kOGroups * kORank), a.f = f(int64_t(B) * kD);
  a.h = f(int64_t(B) * kD), a.logits_ws = f(int64_t(B) * E), a.wts = f(R);
  a.xp = f(R * kD), a.gp = f(R * kInter), a.up = f(R * kInter), a.ap = f(R * kInter), a.yp = f(R * kD);
  a.y13 = f(int64_t(B) * 2 * kInter), a.sa = f(int64_t(B) * kInter), a.sy = f(int64_t(B) * kD);
  const int64_t Bp = std::max(B, kBf16MinRows);  // rows of the bf16 GEMMs' operands (bf16_dense may pad)
  a.ckv = f(Bp * 2 * kHeadDim), a.cgate = f(Bp * 2 * kHeadDim);
  a.ikv = f(Bp * 2 * kIdxDim), a.igate = f(Bp * 2 * kIdxDim);
  a.qidx = f(int64_t(B) * kIdxHeads * kIdxDim), a.widx = f(Bp * kIdxHeads);
  a.hfin = f(int64_t(B) * kD), a.hn = f(int64_t(B) * kD), a.out = f(Bp * kVocab);
  a.xn16 = h16(Bp * kD), a.hn16 = h16(Bp * kD);
  a.q16 = h16(int64_t(B) * kHeads * kHeadDim), a.ao = h16(int64_t(B) * kHeads * kHeadDim);
  a.operm = h16(int64_t(B) * kHeads * kHeadDim);
  for (int i = 0; i <= Streams::kSide; ++i) a.q8[i] = ar.take<uint8_t>(B * kQ8Cols), a.qs[i] = f(B * kQ8Cols / 128);
  std::mt19937 rng(12345);
  std::vector<int32_t> ids(B);
  for (int& t : ids) t = int(rng() % kVocab);
  a.ids = ar.upload(ids);
  a.pos = ar.upload(std::vector<int32_t>(B, int32_t(z.pos)));
  a.iota = ar.upload(iota_times<int32_t>(B, 1));
  a.ones = ar.upload(std::vector<int32_t>(B, 1));
  a.zeros = ar.upload(std::vector<int32_t>(B, 0));
  a.swa_index = ar.upload(std::vector<int32_t>(B, -1));
  a.nwin = ar.upload(std::vector<int32_t>(B, int32_t(std::min<int64_t>(z.pos + 1, kWindow))));
  a.nvis = ar.upload(std::vector<int32_t>(B, int32_t(z.vis4)));
  a.base4 = ar.upload(iota_times<int64_t>(B, z.max4));
  a.base128 = ar.upload(iota_times<int64_t>(B, z.max128));
  std::vector<int32_t> hidx(size_t(B) * std::max<int64_t>(z.vis128, 1), -1);
  for (int b = 0; b < B; ++b)
    for (int64_t j = 0; j < z.vis128; ++j) hidx[size_t(b) * z.vis128 + j] = int32_t(b * z.max128 + j);
  a.hca_index = ar.upload(hidx);
  a.hca_n = ar.upload(std::vector<int32_t>(B, int32_t(z.vis128)));
  a.ex_scratch = ar.take<int32_t>(R), a.slot_pos = ar.take<int32_t>(R);
  a.g13 = ar.take<dc::Mxfp4Group>(2 * a.G), a.g2 = ar.take<dc::Mxfp4Group>(a.G);
  (void)seed, (void)s;
  return a;
}

dc::DecodeAttnArgs attn_args(const Acts& a, const Sizes& z, int ratio) {
  dc::DecodeAttnArgs t;
  t.q = a.q16, t.n_window = a.nwin, t.pos = a.pos, t.out = a.ao, t.batch = a.B, t.split_rows = 256;
  if (ratio == 0) {
    t.index = a.swa_index, t.n_index = a.zeros, t.index_stride = 1, t.max_rows = kWindow;
  } else if (ratio == 4) {
    t.n_index = nullptr, t.index_stride = kIdxTopK, t.max_rows = kWindow + kIdxTopK;
  } else {
    t.index = a.hca_index, t.n_index = a.hca_n, t.index_stride = std::max<int64_t>(z.vis128, 1);
    t.max_rows = int32_t(kWindow + z.vis128);
  }
  return t;
}

dc::IndexerArgs indexer_args(const Acts& a, const Sizes& z) {
  dc::IndexerArgs x;
  x.q = a.qidx, x.w = a.widx, x.key_base = a.base4, x.n_visible = a.nvis, x.out_base = a.base4;
  x.tokens = a.B, x.max_visible = int32_t(z.vis4), x.heads = kIdxHeads, x.head_dim = kIdxDim, x.top_k = kIdxTopK;
  x.index_stride = kIdxTopK;
  return x;
}

dc::CompressorStepArgs cmp_args(const Acts& a, const CompressorW& w, const CmpState& st, const float* kv,
                                const float* gate, const float* freq, const int64_t* base, int round_mode) {
  dc::CompressorStepArgs c;
  c.kv = kv, c.gate = gate, c.ape = w.ape, c.norm = w.norm, c.inv_freq = freq;
  c.slot = a.iota, c.tok_offset = a.iota, c.count = a.ones, c.pos0 = a.pos, c.entry_base = base;
  c.buf_kv = st.kv, c.buf_gate = st.gate, c.prev_kv = st.pkv, c.prev_gate = st.pgate, c.entries = st.entries;
  c.batch = a.B, c.max_count = 1, c.ratio = w.ratio, c.width = w.width, c.rope_dim = kRope, c.overlap = w.overlap;
  c.eps = kEps, c.round_mode = round_mode;
  return c;
}

struct Step {
  Ctx& c;
  Model& m;
  const Sizes& z;
  Acts& a;
  std::vector<LayerState>& ls;

  cudaStream_t s(int lane) const { return c.st.lane(lane); }
  int li(int lane) const { return c.lane_index(lane); }

  void attn_half(const LayerW& L, LayerState& S) {
    const int B = a.B;
    DI_OK(dc::hc_pre(a.X, B, kD, L.hc_attn.fn, L.hc_attn.base, L.hc_attn.scale, kEps, kEps, kSinkhorn, a.pre, a.post,
                     a.comb, a.xin, a.hcws, s(-1)));
    c.mark("mhc");
    DI_OK(dc::rms_norm(a.xin, B, kD, L.attn_norm, kEps, a.xn, s(-1)));
    DI_OK(dc::cast_f32_to_bf16(a.xn, B, kD, a.xn16, kD, s(-1)));
    c.mark("norm");
    fp8_dense(c, -1, a.xn, false, B, L.wq_a, a.q8[li(-1)], a.qs[li(-1)], a.qa);
    DI_OK(dc::rms_norm(a.qa, B, kQLora, L.q_norm, kEps, a.qan, s(-1)));
    c.mark("q_path");
    c.st.fork(3);
    // side 0: the new KV row (wkv, kv_norm, RoPE) into ring slot pos % 128
    fp8_dense(c, 0, a.xn, false, B, L.wkv, a.q8[li(0)], a.qs[li(0)], a.kv);
    DI_OK(dc::rms_norm(a.kv, B, kHeadDim, L.kv_norm, kEps, a.kvn, s(0)));
    DI_KOK(rope_rows(a.kvn, B, kHeadDim, kHeadDim - kRope, kRope / 2, a.pos, 1, L.inv_freq, s(0)));
    DI_OK(dc::cast_f32_to_bf16(a.kvn, B, kHeadDim, S.ring + (z.pos % kWindow) * kHeadDim, int64_t(kWindow) * kHeadDim,
                               s(0)));
    c.mark("kv_path");
    // side 1: the compressors (KV entries; CSA also the indexer keys)
    if (L.ratio > 0) {
      bf16_dense(c, 1, a.xn16, B, L.cmp.wkv, a.ckv);
      bf16_dense(c, 1, a.xn16, B, L.cmp.wgate, a.cgate);
      const int64_t* base = L.ratio == 4 ? a.base4 : a.base128;
      DI_OK(dc::compressor_step(cmp_args(a, L.cmp, S.cmp, a.ckv, a.cgate, L.inv_freq, base, 1), s(1)));
      if (L.ratio == 4) {
        bf16_dense(c, 1, a.xn16, B, L.icmp.wkv, a.ikv);
        bf16_dense(c, 1, a.xn16, B, L.icmp.wgate, a.igate);
        DI_OK(dc::compressor_step(cmp_args(a, L.icmp, S.icmp, a.ikv, a.igate, L.inv_freq, a.base4, 2), s(1)));
      }
      c.mark("compressor");
    }
    // side 2: the indexer's queries and head weights
    if (L.ratio == 4) {
      fp8_dense(c, 2, a.qan, false, B, L.idx_wq_b, a.q8[li(2)], a.qs[li(2)], a.qidx);
      DI_KOK(rope_rows(a.qidx, int64_t(B) * kIdxHeads, kIdxDim, kIdxDim - kRope, kRope / 2, a.pos, kIdxHeads,
                       L.inv_freq, s(2)));
      bf16_dense(c, 2, a.xn16, B, L.weights_proj, a.widx);
      c.mark("indexer");
    }
    // main: q = wq_b(qr), per-head RMS norm, RoPE, bf16
    fp8_dense(c, -1, a.qan, false, B, L.wq_b, a.q8[li(-1)], a.qs[li(-1)], a.qb);
    DI_OK(dc::rms_norm(a.qb, int64_t(B) * kHeads, kHeadDim, nullptr, kEps, a.qb, s(-1)));
    DI_KOK(rope_rows(a.qb, int64_t(B) * kHeads, kHeadDim, kHeadDim - kRope, kRope / 2, a.pos, kHeads, L.inv_freq, s(-1)));
    DI_OK(dc::cast_f32_to_bf16(a.qb, int64_t(B) * kHeads, kHeadDim, a.q16, kHeadDim, s(-1)));
    c.mark("q_path");
    c.st.join(3);
    dc::DecodeAttnArgs t = attn_args(a, z, L.ratio);
    t.window = S.ring, t.sink = L.sink, t.inv_freq = L.inv_freq;
    t.entries = L.ratio > 0 ? S.cmp.entries : S.ring;
    if (L.ratio == 4) {
      dc::IndexerArgs x = indexer_args(a, z);
      x.keys = S.icmp.entries, x.index = S.index, x.n_index = S.n_index;
      DI_OK(dc::indexer_select(x, a.idx_ws, s(-1)));
      c.mark("indexer");
      t.index = S.index, t.n_index = S.n_index;
    }
    DI_OK(dc::decode_attention(t, a.attn_ws, s(-1)));
    c.mark("attention");
    // wo_a: 8 groups of 8 heads -> 1024 each (rows regrouped [B, 8, 4096] -> [8, B, 4096]), wo_b
    const int64_t gk = int64_t(kHeads) * kHeadDim / kOGroups;
    DI_OK(dc::swap01(a.ao, B, kOGroups, gk, 2, a.operm, s(-1)));
    c.st.fork(kOGroups);
    for (int g = 0; g < kOGroups; ++g)
      fp8_dense(c, g, a.operm + int64_t(g) * B * gk, true, B, L.wo_a.rows(int64_t(g) * kORank, kORank), a.q8[li(g)],
                a.qs[li(g)], a.oa + int64_t(g) * B * kORank);
    c.st.join(kOGroups);
    DI_OK(dc::swap01(a.oa, kOGroups, B, kORank, 4, a.oa2, s(-1)));
    fp8_dense(c, -1, a.oa2, false, B, L.wo_b, a.q8[li(-1)], a.qs[li(-1)], a.f);
    c.mark("wo");
    DI_OK(dc::hc_post(a.X, B, kD, a.post, a.comb, a.f, s(-1)));
    c.mark("mhc");
  }

  void moe_half(const LayerW& L, LayerState& S) {
    const int B = a.B, E = m.spec.experts;
    const int64_t R = int64_t(B) * kTopK;
    const int mm = std::min(B, dc::moe_group_rows());
    DI_OK(dc::hc_pre(a.X, B, kD, L.hc_ffn.fn, L.hc_ffn.base, L.hc_ffn.scale, kEps, kEps, kSinkhorn, a.pre, a.post,
                     a.comb, a.xin, a.hcws, s(-1)));
    c.mark("mhc");
    DI_OK(dc::rms_norm(a.xin, B, kD, L.ffn_norm, kEps, a.h, s(-1)));
    c.mark("norm");
    c.st.fork(1);  // side 0: the shared expert (FP8, w1|w3 as one [4096, 4096] weight)
    fp8_dense(c, 0, a.h, false, B, L.sh13, a.q8[li(0)], a.qs[li(0)], a.y13);
    DI_OK(dc::swiglu(a.y13, a.y13 + kInter, 2 * kInter, B, kInter, kSwigluLimit, a.sa, s(0)));
    fp8_dense(c, 0, a.sa, false, B, L.sh2, a.q8[li(0)], a.qs[li(0)], a.sy);
    c.mark("shared_expert");
    if (L.hash) {  // the router still scores (its weights), tid2eid picks the experts
      DI_OK(dc::moe_route(a.h, B, kD, L.gate, E, L.bias, kTopK, kRouteScale, a.logits_ws, a.ex_scratch, a.wts, s(-1)));
      DI_KOK(hash_route(a.logits_ws, B, E, a.ids, L.tid2eid, kTopK, kRouteScale, S.experts, a.wts, s(-1)));
    } else {
      DI_OK(dc::moe_route(a.h, B, kD, L.gate, E, L.bias, kTopK, kRouteScale, a.logits_ws, S.experts, a.wts, s(-1)));
    }
    c.mark("router");
    DI_OK(dc::moe_build_groups(S.experts, B, kTopK, E, L.ptrs, a.xp, a.gp, a.up, a.ap, a.yp, kD, kInter, a.G,
                               a.slot_pos, a.g13, a.g2, s(-1)));
    DI_OK(dc::moe_permute(a.h, B, kTopK, kD, a.slot_pos, a.xp, s(-1)));
    c.mark("moe_permute");
    DI_OK(dc::mxfp4_linear_grouped(a.g13, 2 * a.G, mm, kInter, kD, dc::Mxfp4Layout::rows, s(-1)));
    DI_OK(dc::swiglu(a.gp, a.up, kInter, R, kInter, kSwigluLimit, a.ap, s(-1)));
    DI_OK(dc::mxfp4_linear_grouped(a.g2, a.G, mm, kD, kInter, dc::Mxfp4Layout::rows, s(-1)));
    c.mark("experts");
    c.st.join(1);
    DI_OK(dc::moe_combine(a.yp, a.slot_pos, a.wts, a.sy, B, kTopK, kD, a.f, s(-1)));
    c.mark("moe_combine");
    DI_OK(dc::hc_post(a.X, B, kD, a.post, a.comb, a.f, s(-1)));
    c.mark("mhc");
  }

  void run() {
    const int B = a.B;
    c.mark("begin");
    DI_OK(dc::embed_rows(m.embed, kVocab, kD, a.ids, B, a.e, nullptr, s(-1)));
    DI_KOK(expand_streams(a.e, B, kD, kHc, a.X, s(-1)));
    c.mark("embed");
    for (size_t l = 0; l < m.layers.size(); ++l) attn_half(m.layers[l], ls[l]), moe_half(m.layers[l], ls[l]);
    DI_OK(dc::hc_pre(a.X, B, kD, m.hc_head.fn, m.hc_head.base, m.hc_head.scale, kEps, kEps, kSinkhorn, a.pre, a.post,
                     a.comb, a.hfin, a.hcws, s(-1)));
    DI_OK(dc::rms_norm(a.hfin, B, kD, m.norm, kEps, a.hn, s(-1)));
    DI_OK(dc::cast_f32_to_bf16(a.hn, B, kD, a.hn16, kD, s(-1)));
    bf16_dense(c, -1, a.hn16, B, Bf16Lin{m.head, kVocab, kD}, a.out);
    c.mark("head");
  }
};

/// Captures body() as a graph; median (and min) of `reps` replays in ms.
std::pair<double, double> time_graph(cudaStream_t s, const std::function<void()>& body, int reps) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  DI_CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  DI_CK(cudaStreamEndCapture(s, &graph));
  cudaError_t ie = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  DI_CK(ie);
  std::vector<float> ms;
  cudaEvent_t e0, e1;
  DI_CK(cudaEventCreate(&e0));
  DI_CK(cudaEventCreate(&e1));
  DI_CK(cudaGraphLaunch(exec, s));  // warm-up
  DI_CK(cudaStreamSynchronize(s));
  for (int r = 0; r < reps; ++r) {
    DI_CK(cudaEventRecord(e0, s));
    DI_CK(cudaGraphLaunch(exec, s));
    DI_CK(cudaEventRecord(e1, s));
    DI_CK(cudaEventSynchronize(e1));
    float t = 0;
    DI_CK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[0]};
}

/// State bytes one step reads for layer l (window, selected / visible entries, indexer keys,
/// the open compressor windows).
double state_read_bytes(const LayerW& L, const Sizes& z) {
  double b = double(kWindow) * kHeadDim * 2;
  if (L.ratio == 4) {
    b += double(std::min<int64_t>(z.vis4, kIdxTopK)) * kHeadDim * 2 + double(z.vis4) * kIdxDim * 2;
    b += 4.0 * (L.cmp.ratio * L.cmp.cw() * 2 + L.icmp.ratio * L.icmp.cw() * 2);
  } else if (L.ratio == 128) {
    b += double(z.vis128) * kHeadDim * 2 + 4.0 * L.cmp.ratio * L.cmp.cw() * 2;
  }
  return b * z.B;
}

}  // namespace

double decode_config_bytes(const Model& m, int B, int64_t C) {
  const Sizes z(B, C);
  double b = 0;
  for (const LayerW& L : m.layers) {
    b += double(B) * kWindow * kHeadDim * 2;
    if (L.ratio == 4)
      b += double(B) * z.max4 * (kHeadDim + kIdxDim) * 2 + 4.0 * B * 4 * (1024 + 512 + 256 + 128) * 2;
    if (L.ratio == 128) b += double(B) * z.max128 * kHeadDim * 2 + 4.0 * B * 128 * 512 * 2;
  }
  const double R = double(B) * kTopK;
  b += double(B) * (kHeads * kHeadDim * (4 + 2 * 3) + kVocab * 4 + 40 * kD * 4 + 9 * kQ8Cols * 1.1);
  b += R * (2 * kD + 3 * kInter) * 4 + double(B) * z.vis4 * 4 * 2 + 64e6;
  return b;
}

void run_decode(Ctx& c, Model& m, int B, int64_t C, bool profile, ResultRow& row) {
  const Sizes z(B, C);
  Arena ar;
  SeedSeq seed;
  seed.next = 1000 + uint64_t(B) * 7 + uint64_t(C);
  cudaStream_t s = c.st.main;
  Acts a = make_acts(ar, m, z, seed, s);
  std::vector<LayerState> ls(m.layers.size());
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const LayerW& L = m.layers[l];
    LayerState& S = ls[l];
    S.ring = ar.take<uint16_t>(int64_t(B) * kWindow * kHeadDim);
    rnd(S.ring, int64_t(B) * kWindow * kHeadDim, dc::RandomKind::kBf16, 1.f, seed, s);
    if (L.ratio > 0) S.cmp = make_cmp(ar, L.cmp, B, L.ratio == 4 ? z.max4 : z.max128, seed, s);
    if (L.ratio == 4) {
      S.icmp = make_cmp(ar, L.icmp, B, z.max4, seed, s);
      S.index = ar.take<int32_t>(int64_t(B) * kIdxTopK), S.n_index = ar.take<int32_t>(B);
    }
    S.experts = ar.take<int32_t>(int64_t(B) * kTopK);
  }
  size_t aws = 0;
  for (int r : {0, 4, 128}) aws = std::max(aws, dc::decode_attention_workspace_bytes(attn_args(a, z, r)));
  a.attn_ws = ar.alloc(aws);
  a.idx_ws = ar.alloc(dc::indexer_workspace_bytes(indexer_args(a, z)));
  DI_CK(cudaStreamSynchronize(s));
  Step step{c, m, z, a, ls};
  step.run();  // eager run first: plans are created outside the capture
  DI_CK(cudaStreamSynchronize(s));
  const auto [med, best] = time_graph(s, [&] { step.run(); }, 9);
  // distinct experts per MoE layer, from this step's routing
  double expert_bytes = 0, distinct_sum = 0, state = 0;
  for (size_t l = 0; l < m.layers.size(); ++l) {
    std::vector<int32_t> ex(size_t(B) * kTopK);
    DI_CK(cudaMemcpy(ex.data(), ls[l].experts, ex.size() * 4, cudaMemcpyDeviceToHost));
    const double d = double(std::set<int32_t>(ex.begin(), ex.end()).size());
    distinct_sum += d;
    expert_bytes += d * mxfp4_expert_bytes();
    state += state_read_bytes(m.layers[l], z);
  }
  std::vector<float> logit(kVocab);
  DI_CK(cudaMemcpy(logit.data(), a.out, logit.size() * 4, cudaMemcpyDeviceToHost));
  const bool finite = std::all_of(logit.begin(), logit.end(), [](float v) { return std::isfinite(v); });
  const double bytes = m.dense_bytes + expert_bytes + state + m.head_bytes;
  row.step_ms = med;
  row.tokens_per_s = B / (med * 1e-3);
  row.floor_ms = bytes / c.copy_Bps * 1e3;
  row.extra["step_ms_min"] = best;
  row.extra["bytes"] = bytes;
  row.extra["dense_bytes"] = m.dense_bytes + m.head_bytes;
  row.extra["expert_bytes"] = expert_bytes;
  row.extra["state_bytes"] = state;
  row.extra["distinct_experts_per_layer"] = distinct_sum / double(m.layers.size());
  row.extra["position"] = double(z.pos);
  row.extra["finite_logits"] = finite ? 1 : 0;
  std::printf("decode %-20s B=%-4d C=%-6lld step %8.3f ms (min %.3f)  floor %7.3f ms  x%.2f  %9.0f tok/s  "
              "distinct %.1f/layer%s\n",
              m.spec.name.c_str(), B, (long long)C, med, best, row.floor_ms, med / row.floor_ms, row.tokens_per_s,
              distinct_sum / double(m.layers.size()), finite ? "" : "  NON-FINITE logits");
  if (profile) {
    c.st.serial = true;
    c.marker.enable(s, true);
    try {
      const auto [pm, pb] = time_graph(s, [&] { step.run(); }, 1);
      c.marker.disable();
      c.st.serial = false;
      std::printf("  op classes (serial capture, events in the graph; total %.3f ms vs %.3f forked):\n", pm, med);
      double sum = 0;
      for (auto& [k, v] : c.marker.totals()) sum += v;
      for (auto& [k, v] : c.marker.totals()) {
        std::printf("    %-14s %8.3f ms  %5.1f%%\n", k.c_str(), v, 100 * v / sum);
        row.extra["profile_ms." + k] = v;
      }
      (void)pb;
    } catch (const std::exception& e) {  // the timing above stands; only the profile is lost
      c.marker.disable();
      c.st.serial = false;
      std::printf("  profile failed: %s\n", e.what());
    }
  }
  DI_CK(cudaDeviceSynchronize());
}

}  // namespace deepinfer::bench
