// One DeepSeek-V4-Flash DECODE LAYER on the GPU, captured as a CUDA graph and replayed (issue D).
// Random weights in the stored formats, generated on the GPU: FP8 E4M3 with E8M0 128x128 scales
// for the dense linears, MXFP4 (e2m1 + E8M0 per 32) for the 256 routed experts, bf16 router,
// fp32 mHC / norms. Real shapes: hidden 4096, 4 mHC streams, 64 heads x 512 (one shared KV head),
// q-LoRA 1024, o_groups 8 x 1024, 256 experts x 2048 top-6 + 1 shared (FP8), CSA-like
// attention over 128 window rows + 512 compressed rows (fixed index; no compressor / indexer).
// One layer = hc_pre, RMSNorm, wq_a, q_norm, wq_b, per-head q norm, wkv, kv_norm (written into
// the ring), attention, wo_a (8 groups), wo_b, hc_post, hc_pre, RMSNorm, routing, expert
// grouping + permutation (on the device), grouped MXFP4 w1|w3, SwiGLU, w2, shared expert,
// combine, hc_post. Not in the step: RoPE on q / the new KV row, the compressor and indexer,
// embedding, head, sampling.
// L distinct layers (own weights and KV state) run back to back in one graph so that nothing is
// served from the 60 MB L2 across layers; step time per layer = graph time / L. Floor = (dense
// weight bytes + bytes of the distinct experts the batch routes to + KV rows read + residual
// read/write) / measured device copy bandwidth. The 43-layer figure is an EXTRAPOLATION
// (43 x this CSA-like layer; no embedding/head).
// Usage: cuda_layer_bench OUT.json [git_rev]   (LAYERS=n to change L, default 8)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/layer_ops.h"
#include "cuda_util/op_timing.h"

namespace dc = deepinfer::cuda;

namespace db = deepinfer::bench;

namespace {

constexpr int D = 4096, NHC = 4, QL = 1024, H = 64, HD = 512, OG = 8, OR = 1024, E = 256, I = 2048, TOPK = 6;
constexpr int WIN = 128, NCMP = 512, MAXB = 128;
constexpr float kEps = 1e-6f, kLimit = 10.f, kScaling = 1.5f;

cudaStream_t g_s;
uint64_t g_seed = 1;
double g_bw = 0;

void* dalloc(size_t n) { return db::dalloc(n, g_s, false); }
template <class T>
T* rnd(int64_t count, dc::RandomKind k, float a, float b = 0.f) {
  const size_t es = (k == dc::RandomKind::kBf16) ? 2 : (k == dc::RandomKind::kF32) ? 4 : 1;
  T* p = static_cast<T*>(dalloc(count * es));
  OK(dc::fill_random(p, count, k, a, b, g_seed++ * 0x51ed27u, g_s));
  return p;
}
template <class T>
T* upload(const std::vector<T>& v) {
  T* p = static_cast<T*>(dalloc(v.size() * sizeof(T)));
  CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

struct Fp8 {
  dc::Fp8Weight w;
  float* sf32 = nullptr;  // the same scales as fp32 (the cuBLASLt path)
  double bytes = 0;
};
Fp8 fp8(int64_t n, int64_t k) {
  Fp8 f;
  f.w.data = rnd<uint8_t>(n * k, dc::RandomKind::kE4M3, 1.f);
  f.w.scale = rnd<uint8_t>((n / 128) * (k / 128), dc::RandomKind::kE8M0, 120, 122);
  f.w.n = n, f.w.k = k;
  f.bytes = double(n) * k + double(n / 128) * (k / 128);
  f.sf32 = static_cast<float*>(dalloc((n / 128) * (k / 128) * 4));
  OK(dc::fp8_scales_to_f32(f.w, f.sf32, g_s));
  return f;
}
Fp8 rows_of(const Fp8& f, int64_t r0, int64_t n) {  // a row block of an FP8 weight
  Fp8 v = f;
  v.w.data = f.w.data + r0 * f.w.k;
  v.w.scale = static_cast<const uint8_t*>(f.w.scale) + (r0 / 128) * (f.w.k / 128);
  v.sf32 = f.sf32 + (r0 / 128) * (f.w.k / 128);
  v.w.n = n;
  return v;
}

// Dense FP8 linear: activation quantisation + GEMM, on stream s with lane's workspace. g_lt
// (batch >= 32 only: cuBLASLt has no algorithm at M = 1) takes the cuBLASLt block-scaled path.
bool g_lt = false;
constexpr int kLanes = 9;  // main + 8 side streams
cudaStream_t g_side[8];
cudaEvent_t g_fork, g_join[8];
void fork(int n) {
  CK(cudaEventRecord(g_fork, g_s));
  for (int i = 0; i < n; ++i) CK(cudaStreamWaitEvent(g_side[i], g_fork, 0));
}
void join(int n) {
  for (int i = 0; i < n; ++i) {
    CK(cudaEventRecord(g_join[i], g_side[i]));
    CK(cudaStreamWaitEvent(g_s, g_join[i], 0));
  }
}

struct Hc {
  float *fn, *base, *scale;
};
Hc hc() {
  return {rnd<float>(24 * NHC * D, dc::RandomKind::kF32, 0.01f), rnd<float>(24, dc::RandomKind::kF32, 0.5f),
          rnd<float>(3, dc::RandomKind::kF32, 1.f)};
}

struct Layer {
  Hc hc_attn, hc_ffn;
  float *attn_norm, *ffn_norm, *q_norm, *kv_norm, *sink, *bias;
  Fp8 wq_a, wq_b, wkv, wo_a, wo_b, sw13, sw2;
  uint16_t* gate;
  uint8_t* experts;  // 256 x (w1 | s1 | w3 | s3 | w2 | s2)
  dc::ExpertPtrs* ptrs;
  uint16_t *ring, *entries;  // [MAXB, 128, 512], [MAXB * 512, 512]
  double dense_bytes = 0;
};
constexpr size_t kW13 = size_t(I) * D / 2, kS13 = size_t(I) * D / 32, kW2 = size_t(D) * I / 2, kS2 = size_t(D) * I / 32;
constexpr size_t kExpertBytes = 2 * (kW13 + kS13) + kW2 + kS2;

Layer make_layer() {
  Layer L;
  L.hc_attn = hc();
  L.hc_ffn = hc();
  L.attn_norm = rnd<float>(D, dc::RandomKind::kF32, 1.f);
  L.ffn_norm = rnd<float>(D, dc::RandomKind::kF32, 1.f);
  L.q_norm = rnd<float>(QL, dc::RandomKind::kF32, 1.f);
  L.kv_norm = rnd<float>(HD, dc::RandomKind::kF32, 1.f);
  L.sink = rnd<float>(H, dc::RandomKind::kF32, 1.f);
  L.bias = rnd<float>(E, dc::RandomKind::kF32, 0.1f);
  L.wq_a = fp8(QL, D);
  L.wq_b = fp8(int64_t(H) * HD, QL);
  L.wkv = fp8(HD, D);
  L.wo_a = fp8(int64_t(OG) * OR, int64_t(H) * HD / OG);
  L.wo_b = fp8(D, int64_t(OG) * OR);
  L.sw13 = fp8(2 * I, D);
  L.sw2 = fp8(D, I);
  L.gate = rnd<uint16_t>(int64_t(E) * D, dc::RandomKind::kBf16, 0.03f);
  L.experts = static_cast<uint8_t*>(dalloc(kExpertBytes * E));
  std::vector<dc::ExpertPtrs> hp(E);
  for (int e = 0; e < E; ++e) {
    uint8_t* b = L.experts + kExpertBytes * e;
    OK(dc::fill_random(b, kW13, dc::RandomKind::kE2M1, 0, 0, g_seed++, g_s));
    OK(dc::fill_random(b + kW13, kS13, dc::RandomKind::kE8M0, 118, 120, g_seed++, g_s));
    OK(dc::fill_random(b + kW13 + kS13, kW13, dc::RandomKind::kE2M1, 0, 0, g_seed++, g_s));
    OK(dc::fill_random(b + 2 * kW13 + kS13, kS13, dc::RandomKind::kE8M0, 118, 120, g_seed++, g_s));
    uint8_t* c = b + 2 * (kW13 + kS13);
    OK(dc::fill_random(c, kW2, dc::RandomKind::kE2M1, 0, 0, g_seed++, g_s));
    OK(dc::fill_random(c + kW2, kS2, dc::RandomKind::kE8M0, 118, 120, g_seed++, g_s));
    hp[e] = {b, b + kW13, b + kW13 + kS13, b + 2 * kW13 + kS13, c, c + kW2};
  }
  L.ptrs = upload(hp);
  L.ring = rnd<uint16_t>(int64_t(MAXB) * WIN * HD, dc::RandomKind::kBf16, 1.f);
  L.entries = rnd<uint16_t>(int64_t(MAXB) * NCMP * HD, dc::RandomKind::kBf16, 1.f);
  for (const Fp8* f : {&L.wq_a, &L.wq_b, &L.wkv, &L.wo_a, &L.wo_b, &L.sw13, &L.sw2}) L.dense_bytes += f->bytes;
  L.dense_bytes += 2.0 * 24 * NHC * D * 4 + double(E) * D * 2;  // mHC fn x2, router
  return L;
}

// Per-batch activations (shared by the layers, which run in sequence).
struct Acts {
  int B, G;
  float *X0, *X, *pre, *post, *comb, *hcws, *xin, *xn, *qa, *qan, *qb, *kv, *kvn, *oa, *oa2, *f;
  float *h, *logits, *wts, *xp, *gp, *up, *ap, *yp, *y13, *sa, *sy;
  uint16_t *q16, *ao, *operm;
  uint8_t *q8a, *q8b, *q8c;
  float *qsa, *qsb, *qsc;
  void* lws[kLanes];
  void* sws[kLanes];
  int32_t *ex, *pos, *idx, *nw, *ni, *tpos;
  dc::Mxfp4Group *g13, *g2;
  void* aws;
  float* freq;
  dc::DecodeAttnArgs attn;
};

Acts make_acts(int B) {
  Acts a;
  a.B = B;
  a.G = dc::moe_max_groups(B, TOPK, E);
  const int64_t R = int64_t(B) * TOPK;
  auto f = [&](int64_t n) { return static_cast<float*>(dalloc(n * 4)); };
  a.X0 = rnd<float>(int64_t(B) * NHC * D, dc::RandomKind::kF32, 1.f);
  a.X = f(int64_t(B) * NHC * D);
  a.pre = f(B * 4), a.post = f(B * 4), a.comb = f(B * 16);
  a.hcws = static_cast<float*>(dalloc(dc::hc_pre_workspace_bytes(B, D)));
  a.xin = f(int64_t(B) * D), a.xn = f(int64_t(B) * D), a.qa = f(int64_t(B) * QL), a.qan = f(int64_t(B) * QL);
  a.qb = f(int64_t(B) * H * HD), a.kv = f(int64_t(B) * HD), a.kvn = f(int64_t(B) * HD);
  a.oa = f(int64_t(B) * OG * OR), a.oa2 = f(int64_t(B) * OG * OR), a.f = f(int64_t(B) * D);
  a.h = f(int64_t(B) * D), a.logits = f(int64_t(B) * E), a.wts = f(R);
  a.xp = f(R * D), a.gp = f(R * I), a.up = f(R * I), a.ap = f(R * I), a.yp = f(R * D);
  a.y13 = f(int64_t(B) * 2 * I), a.sa = f(int64_t(B) * I), a.sy = f(int64_t(B) * D);
  a.q16 = static_cast<uint16_t*>(dalloc(int64_t(B) * H * HD * 2));
  a.ao = static_cast<uint16_t*>(dalloc(int64_t(B) * H * HD * 2));
  a.operm = static_cast<uint16_t*>(dalloc(int64_t(B) * H * HD * 2));
  a.q8a = static_cast<uint8_t*>(dalloc(int64_t(B) * int64_t(OG) * OR));
  a.q8b = static_cast<uint8_t*>(dalloc(int64_t(B) * H * HD));
  a.q8c = static_cast<uint8_t*>(dalloc(int64_t(B) * D));
  a.qsa = f(int64_t(B) * H * HD / 128);
  a.qsb = f(int64_t(B) * H * HD / 128);
  a.qsc = f(int64_t(B) * D / 128);
  a.ex = static_cast<int32_t*>(dalloc(R * 4));
  a.pos = static_cast<int32_t*>(dalloc(R * 4));
  a.g13 = static_cast<dc::Mxfp4Group*>(dalloc(2 * a.G * sizeof(dc::Mxfp4Group)));
  a.g2 = static_cast<dc::Mxfp4Group*>(dalloc(a.G * sizeof(dc::Mxfp4Group)));
  std::vector<int32_t> idx(size_t(B) * NCMP);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < NCMP; ++j) idx[size_t(b) * NCMP + j] = b * NCMP + (j * 37) % NCMP;
  a.idx = upload(idx);
  a.nw = upload(std::vector<int32_t>(B, WIN));
  a.ni = upload(std::vector<int32_t>(B, NCMP));
  a.tpos = upload(std::vector<int32_t>(B, 4095));
  std::vector<float> fr(32);
  for (int i = 0; i < 32; ++i) fr[i] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / 64.0));
  a.freq = upload(fr);
  size_t ws = 0;
  const int64_t shapes[][2] = {{QL, D}, {int64_t(H) * HD, QL}, {HD, D}, {OR, D}, {D, int64_t(OG) * OR}, {2 * I, D}, {D, I}};
  for (auto& s : shapes) ws = std::max(ws, dc::fp8_linear_workspace_bytes(B, s[0], s[1]));
  for (int i = 0; i < kLanes; ++i) a.sws[i] = dalloc(ws), a.lws[i] = dalloc(dc::fp8_linear_lt_workspace_bytes());
  dc::DecodeAttnArgs& t = a.attn;
  t.q = a.q16, t.n_window = a.nw, t.index = a.idx, t.n_index = a.ni, t.index_stride = NCMP, t.pos = a.tpos;
  t.inv_freq = a.freq, t.out = a.ao, t.batch = B, t.max_rows = WIN + NCMP, t.split_rows = 256;
  a.aws = dalloc(dc::decode_attention_workspace_bytes(t));
  return a;
}

void dense(Acts& a, int lane, const void* x, bool bf16, int64_t M, int64_t K, uint8_t* q8, float* qs, const Fp8& W,
           float* y, cudaStream_t s) {
  if (g_lt && M >= 32) {
    OK(dc::quantize_act_fp8_t(x, bf16, M, K, q8, qs, s));
    dc::Fp8Weight wf = W.w;
    wf.scale = W.sf32, wf.scale_is_f32 = true;
    if (dc::fp8_linear_lt(q8, qs, M, wf, y, false, a.lws[lane], s)) return;
    std::fprintf(stderr, "cuBLASLt path failed (%s): split-K kernel for this call\n", dc::last_error().c_str());
    OK(dc::quantize_act_fp8(x, bf16, M, K, q8, qs, s));
    OK(dc::fp8_linear(q8, qs, M, W.w, y, a.sws[lane], s));
  } else {
    OK(dc::quantize_act_fp8(x, bf16, M, K, q8, qs, s));
    OK(dc::fp8_linear(q8, qs, M, W.w, y, a.sws[lane], s));
  }
}

void attn_half(Acts& a, const Layer& L) {
  const int B = a.B;
  OK(dc::hc_pre(a.X, B, D, L.hc_attn.fn, L.hc_attn.base, L.hc_attn.scale, kEps, kEps, 20, a.pre, a.post, a.comb, a.xin,
                a.hcws, g_s));
  OK(dc::rms_norm(a.xin, B, D, L.attn_norm, kEps, a.xn, g_s));
  fork(1);  // side: wkv, kv_norm, the new row into ring slot 7
  dense(a, 1, a.xn, false, B, D, a.q8c, a.qsc, L.wkv, a.kv, g_side[0]);
  OK(dc::rms_norm(a.kv, B, HD, L.kv_norm, kEps, a.kvn, g_side[0]));
  OK(dc::cast_f32_to_bf16(a.kvn, B, HD, L.ring + 7 * HD, int64_t(WIN) * HD, g_side[0]));
  dense(a, 0, a.xn, false, B, D, a.q8a, a.qsa, L.wq_a, a.qa, g_s);
  OK(dc::rms_norm(a.qa, B, QL, L.q_norm, kEps, a.qan, g_s));
  dense(a, 0, a.qan, false, B, QL, a.q8a, a.qsa, L.wq_b, a.qb, g_s);
  OK(dc::rms_norm(a.qb, int64_t(B) * H, HD, nullptr, kEps, a.qb, g_s));  // per-head q norm (in place)
  OK(dc::cast_f32_to_bf16(a.qb, int64_t(B) * H, HD, a.q16, HD, g_s));
  join(1);
  dc::DecodeAttnArgs t = a.attn;
  t.window = L.ring, t.entries = L.entries, t.sink = L.sink;
  OK(dc::decode_attention(t, a.aws, g_s));
  // wo_a: 8 groups of 8 heads (4096 dims) -> 1024 each, one side stream per group; rows
  // regrouped [B, 8, 4096] -> [8, B, 4096] first, and [8, B, 1024] -> [B, 8192] after
  OK(dc::swap01(a.ao, B, OG, int64_t(H) * HD / OG, 2, a.operm, g_s));
  const int64_t gk = int64_t(H) * HD / OG;
  fork(OG);
  for (int g = 0; g < OG; ++g)
    dense(a, 1 + g, a.operm + int64_t(g) * B * gk, true, B, gk, a.q8b + int64_t(g) * B * gk,
          a.qsb + int64_t(g) * B * (gk / 128), rows_of(L.wo_a, g * OR, OR), a.oa + int64_t(g) * B * OR, g_side[g]);
  join(OG);
  OK(dc::swap01(a.oa, OG, B, OR, 4, a.oa2, g_s));
  dense(a, 0, a.oa2, false, B, int64_t(OG) * OR, a.q8a, a.qsa, L.wo_b, a.f, g_s);
  OK(dc::hc_post(a.X, B, D, a.post, a.comb, a.f, g_s));
}

void moe_half(Acts& a, const Layer& L) {
  const int B = a.B;
  const int64_t R = int64_t(B) * TOPK;
  const int mm = std::min(B, dc::moe_group_rows());
  OK(dc::hc_pre(a.X, B, D, L.hc_ffn.fn, L.hc_ffn.base, L.hc_ffn.scale, kEps, kEps, 20, a.pre, a.post, a.comb, a.xin,
                a.hcws, g_s));
  OK(dc::rms_norm(a.xin, B, D, L.ffn_norm, kEps, a.h, g_s));
  fork(1);  // side: the shared expert (FP8; w1|w3 as one [4096, 4096] weight)
  dense(a, 1, a.h, false, B, D, a.q8c, a.qsc, L.sw13, a.y13, g_side[0]);
  OK(dc::swiglu(a.y13, a.y13 + I, 2 * I, B, I, kLimit, a.sa, g_side[0]));
  dense(a, 1, a.sa, false, B, I, a.q8c, a.qsc, L.sw2, a.sy, g_side[0]);
  OK(dc::moe_route(a.h, B, D, L.gate, E, L.bias, TOPK, kScaling, a.logits, a.ex, a.wts, g_s));
  OK(dc::moe_build_groups(a.ex, B, TOPK, E, L.ptrs, a.xp, a.gp, a.up, a.ap, a.yp, D, I, a.G, a.pos, a.g13, a.g2, g_s));
  OK(dc::moe_permute(a.h, B, TOPK, D, a.pos, a.xp, g_s));
  OK(dc::mxfp4_linear_grouped(a.g13, 2 * a.G, mm, I, D, dc::Mxfp4Layout::rows, g_s));
  OK(dc::swiglu(a.gp, a.up, I, R, I, kLimit, a.ap, g_s));
  OK(dc::mxfp4_linear_grouped(a.g2, a.G, mm, D, I, dc::Mxfp4Layout::rows, g_s));
  join(1);
  OK(dc::moe_combine(a.yp, a.pos, a.wts, a.sy, B, TOPK, D, a.f, g_s));
  OK(dc::hc_post(a.X, B, D, a.post, a.comb, a.f, g_s));
}

// Median ms of 9 replays of a graph of one `body`.
double time_graph(const std::function<void()>& body) { return db::time_graph(g_s, 1, [&](int) { body(); }, true, 9); }

struct Row {
  int B;
  double layer_ms, attn_ms, moe_ms, floor_ms, distinct, bytes, splitk_ms, lt_ms;
  bool finite, lt;
};

}  // namespace

int main(int argc, char** argv) {
  if (!dc::device_available()) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  const char* out = argc > 1 ? argv[1] : "cuda-layer.json";
  const char* rev = argc > 2 ? argv[2] : "unknown";
  const int NL = std::getenv("LAYERS") ? std::atoi(std::getenv("LAYERS")) : 8;
  CK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
  for (int i = 0; i < 8; ++i) {
    CK(cudaStreamCreateWithFlags(&g_side[i], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&g_join[i], cudaEventDisableTiming));
  }
  CK(cudaEventCreateWithFlags(&g_fork, cudaEventDisableTiming));
  g_bw = db::measure_copy_rate(g_s);
  std::printf("copy bandwidth %.1f GB/s; %d layers, expert %.2f MB\n", g_bw / 1e9, NL, kExpertBytes / 1e6);
  std::vector<Layer> layers;
  for (int l = 0; l < NL; ++l) layers.push_back(make_layer());
  CK(cudaStreamSynchronize(g_s));
  std::printf("dense bytes per layer %.1f MB; weights generated\n", layers[0].dense_bytes / 1e6);
  std::vector<Row> rows;
  for (int B : {1, 8, 32, 64, 128}) {
    Acts a = make_acts(B);
    CK(cudaStreamSynchronize(g_s));
    const size_t xbytes = size_t(B) * NHC * D * 4;
    auto full = [&] {
      CK(cudaMemcpyAsync(a.X, a.X0, xbytes, cudaMemcpyDeviceToDevice, g_s));
      for (auto& L : layers) attn_half(a, L), moe_half(a, L);
    };
    auto attn = [&] {
      CK(cudaMemcpyAsync(a.X, a.X0, xbytes, cudaMemcpyDeviceToDevice, g_s));
      for (auto& L : layers) attn_half(a, L);
    };
    auto moe = [&] {
      CK(cudaMemcpyAsync(a.X, a.X0, xbytes, cudaMemcpyDeviceToDevice, g_s));
      for (auto& L : layers) moe_half(a, L);
    };
    // distinct experts per layer (eager run, routing read back after each layer)
    double distinct = 0;
    CK(cudaMemcpyAsync(a.X, a.X0, xbytes, cudaMemcpyDeviceToDevice, g_s));
    for (auto& L : layers) {
      attn_half(a, L);
      moe_half(a, L);
      std::vector<int32_t> ex(size_t(B) * TOPK);
      CK(cudaStreamSynchronize(g_s));
      CK(cudaMemcpy(ex.data(), a.ex, ex.size() * 4, cudaMemcpyDeviceToHost));
      distinct += std::set<int32_t>(ex.begin(), ex.end()).size();
    }
    distinct /= NL;
    std::vector<float> hx(size_t(B) * NHC * D);
    CK(cudaMemcpy(hx.data(), a.X, hx.size() * 4, cudaMemcpyDeviceToHost));
    bool finite = true;
    double sum = 0;
    for (float v : hx) finite &= std::isfinite(v), sum += std::fabs(v);
    g_lt = false;
    const double full_splitk = time_graph(full);
    double full_lt = 0;
    if (B >= 32) {
      g_lt = true;
      full_lt = time_graph(full);
      g_lt = full_lt < full_splitk;
    }
    const double full_ms = g_lt ? full_lt : full_splitk, attn_ms = time_graph(attn), moe_ms = time_graph(moe);
    Row r;
    r.B = B;
    r.splitk_ms = full_splitk / NL, r.lt_ms = full_lt / NL, r.lt = g_lt;
    r.layer_ms = full_ms / NL, r.attn_ms = attn_ms / NL, r.moe_ms = moe_ms / NL;
    r.distinct = distinct;
    const double state = double(B) * (WIN + NCMP) * HD * 2 + 4.0 * xbytes;  // KV rows + X read/write at 2 sites
    r.bytes = layers[0].dense_bytes + distinct * kExpertBytes + state;
    r.floor_ms = r.bytes / g_bw * 1e3;
    r.finite = finite;
    rows.push_back(r);
    std::printf("B=%-4d dense path %s (split-K %.1f us, cuBLASLt %.1f us per layer)\n", B, r.lt ? "cuBLASLt" : "split-K",
                r.splitk_ms * 1e3, r.lt_ms * 1e3);
    std::printf("B=%-4d layer %8.1f us (attn %7.1f + moe %7.1f)  floor %7.1f us  x%.2f  distinct experts %.1f  "
                "43-layer extrapolation %6.2f ms = %8.0f tok/s  |X| mean %.3g%s\n",
                B, r.layer_ms * 1e3, r.attn_ms * 1e3, r.moe_ms * 1e3, r.floor_ms * 1e3, r.layer_ms / r.floor_ms,
                distinct, 43 * r.layer_ms, B / (43 * r.layer_ms * 1e-3), sum / hx.size(), finite ? "" : "  NON-FINITE");
    CK(cudaDeviceSynchronize());
    // activations are leaked per batch on purpose (a few hundred MB; the process ends here)
  }
  FILE* f = std::fopen(out, "w");
  if (f) {
    cudaDeviceProp p{};
    CK(cudaGetDeviceProperties(&p, 0));
    char date[64];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::string cmd;
    for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
    std::fprintf(f,
                 "{\"machine\": \"%s, %d SMs, %.0f GiB\", \"git_rev\": \"%s\", \"command\": \"%s\", \"date\": \"%s\",\n"
                 " \"copy_GBps\": %.1f, \"layers_in_graph\": %d,\n"
                 " \"layer\": \"V4-Flash decode layer: hidden 4096, mHC 4, 64x512 heads, q-LoRA 1024, o_groups 8x1024, "
                 "256 MXFP4 experts x 2048 top-6 + FP8 shared, CSA-like attention 128 window + 512 compressed rows; "
                 "no RoPE / compressor / indexer\",\n \"rows\": [\n",
                 p.name, p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, rev, cmd.c_str(), date, g_bw / 1e9, NL);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(f,
                   "  {\"model\": \"v4-flash-layer\", \"phase\": \"decode\", \"batch\": %d, \"attended_rows\": %d, "
                   "\"step_ms\": %.4f, \"attn_ms\": %.4f, \"moe_ms\": %.4f, \"floor_ms\": %.4f, \"floor_ratio\": %.3f, "
                   "\"bytes\": %.0f, \"distinct_experts\": %.1f, \"finite\": %s, "
                   "\"dense_path\": \"%s\", \"step_ms_splitk\": %.4f, \"step_ms_cublaslt\": %.4f, "
                   "\"extrapolated_43_layers\": {\"note\": \"EXTRAPOLATION: 43 x this layer step, no embedding/head\", "
                   "\"step_ms\": %.3f, \"floor_ms\": %.3f, \"tokens_per_s\": %.1f}}%s\n",
                   r.B, WIN + NCMP, r.layer_ms, r.attn_ms, r.moe_ms, r.floor_ms, r.layer_ms / r.floor_ms, r.bytes,
                   r.distinct, r.finite ? "true" : "false", r.lt ? "cuBLASLt" : "split-K", r.splitk_ms, r.lt_ms,
                   43 * r.layer_ms,
                   43 * r.floor_ms, r.B / (43 * r.layer_ms * 1e-3), i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, " ]}\n");
    std::fclose(f);
    std::printf("wrote %s\n", out);
  }
  return 0;
}
