// CUDA ops benchmark (issue D): per op and shape, time, GB/s, TFLOP/s and the ratio to the floor
// max(bytes / copy bandwidth, FLOPs / tensor peak), with both ceilings measured in the same run
// (cudaMemcpy device-to-device; cuBLAS bf16 and cuBLASLt FP8 GEMMs at 8192^3), and a peer
// where one exists: cuBLAS bf16 GEMM (strided-batched for experts) on the dequantised weight.
// Weights rotate over enough copies to defeat the 60 MB L2; each op is timed as the median of
// 7 replays of a CUDA graph of R back-to-back calls (launch gaps excluded, kernel boundaries not).
// Usage: cuda_ops_bench OUT.json [git_rev [MODE]] (modes: see main)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/layer_ops.h"
#include "cuda_util/op_timing.h"

namespace dc = deepinfer::cuda;

namespace db = deepinfer::bench;

namespace {

cudaStream_t g_stream;
double g_bw = 0, g_bf16_peak = 0, g_fp8_peak = 0;  // bytes/s, FLOP/s

void* dalloc(size_t n) { return db::dalloc(n, g_stream); }
double time_graph(int reps, const std::function<void(int)>& body, bool use_graph = true) {
  return db::time_graph(g_stream, reps, body, use_graph);
}
using db::rotation;

struct Row {
  std::string op, shape;
  long long m = 0, groups = 0;
  double ms = 0, bytes = 0, flops = 0, peak = 0;
  std::string peer;
  double peer_ms = -1;
};
std::vector<Row> g_rows;

void report(Row r) {
  const double floor_s = std::max(r.bytes / g_bw, r.peak > 0 ? r.flops / r.peak : 0.0);
  std::printf("%-16s %-11s M=%-5lld G=%-4lld %9.2f us %7.0f GB/s %7.1f TF/s  floor %8.2f us  x%.2f", r.op.c_str(),
              r.shape.c_str(), r.m, r.groups, r.ms * 1e3, r.bytes / (r.ms * 1e-3) / 1e9,
              r.flops / (r.ms * 1e-3) / 1e12, floor_s * 1e6, r.ms * 1e-3 / floor_s);
  if (r.peer_ms > 0) std::printf("  peer %s %.2f us (x%.2f)", r.peer.c_str(), r.peer_ms * 1e3, r.peer_ms / r.ms);
  std::printf("\n");
  g_rows.push_back(std::move(r));
}

cublasHandle_t g_blas;
void* g_blas_ws;

// y[M,N] (bf16) = x[M,K] (bf16) W[N,K]^T (bf16), batched over `batch` weights/inputs.
void blas_bf16(const void* w, const void* x, void* y, int M, int N, int K, int batch) {
  const float one = 1.f, zero = 0.f;
  cublasStatus_t st;
  if (batch == 1)
    st = cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w, CUDA_R_16BF, K, x, CUDA_R_16BF, K, &zero, y,
                      CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  else
    st = cublasGemmStridedBatchedEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w, CUDA_R_16BF, K,
                                    (long long)N * K, x, CUDA_R_16BF, K, (long long)M * K, &zero, y, CUDA_R_16BF, N,
                                    (long long)M * N, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublas error %d\n", int(st));
    std::exit(1);
  }
}

void measure_ceilings() {
  g_bw = db::measure_copy_rate(g_stream);
  // bf16 GEMM 8192^3 through cuBLAS.
  const int s = 8192;
  void* x = dalloc(size_t(s) * s * 2);
  void* w = dalloc(size_t(s) * s * 2);
  void* y = dalloc(size_t(s) * s * 2);
  // random bytes as bf16 include NaN/Inf patterns: mask to a sane range by a dequant-like fill
  std::vector<uint16_t> h(size_t(s) * 64);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(0x3c00 + (rand() & 0x3ff) + ((rand() & 1) << 15));
  for (int r = 0; r < s / 64; ++r) {
    CK(cudaMemcpy(static_cast<char*>(x) + size_t(r) * h.size() * 2, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(static_cast<char*>(w) + size_t(r) * h.size() * 2, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  }
  const double gms = time_graph(5, [&](int) { blas_bf16(w, x, y, s, s, s, 1); }, false);
  g_bf16_peak = 2.0 * s * s * double(s) / (gms * 1e-3);
  CK(cudaFree(x));
  CK(cudaFree(w));
  CK(cudaFree(y));
  g_fp8_peak = db::measure_fp8_gemm_rate(g_stream);
  if (g_fp8_peak <= 0) {
    std::printf("cuBLASLt FP8 GEMM unavailable; FP8 floor uses 2x the bf16 rate\n");
    g_fp8_peak = 2 * g_bf16_peak;
  }
  std::printf("ceilings: copy %.0f GB/s, bf16 GEMM %.0f TF/s, FP8 GEMM %.0f TF/s (8192^3)\n", g_bw / 1e9,
              g_bf16_peak / 1e12, g_fp8_peak / 1e12);
}

// `sets` copies of an FP8 weight of rows x K (random codes, every E8M0 scale 120), rotated past L2.
struct Fp8Sets {
  std::vector<uint8_t*> w, sc;
};
Fp8Sets fp8_weight_sets(int sets, int64_t rows, int K) {
  Fp8Sets s{std::vector<uint8_t*>(sets), std::vector<uint8_t*>(sets)};
  for (int i = 0; i < sets; ++i) {
    s.w[i] = static_cast<uint8_t*>(dalloc(size_t(rows) * K));
    std::vector<uint8_t> hs(size_t(rows / 128) * (K / 128), 120);
    s.sc[i] = static_cast<uint8_t*>(dalloc(hs.size()));
    CK(cudaMemcpy(s.sc[i], hs.data(), hs.size(), cudaMemcpyHostToDevice));
  }
  return s;
}
void free_sets(const Fp8Sets& s) {
  for (size_t i = 0; i < s.w.size(); ++i) {
    CK(cudaFree(s.w[i]));
    CK(cudaFree(s.sc[i]));
  }
}

// An already quantised activation of M x K for the GEMM-alone timings: every code 0x38 (1.0),
// every scale 1.
struct QuantAct {
  uint8_t* q;
  float* qs;
};
QuantAct fixed_quant_act(int M, int64_t K) {
  QuantAct a{static_cast<uint8_t*>(dalloc(size_t(M) * K)), static_cast<float*>(dalloc(size_t(M) * K / 128 * 4))};
  std::vector<float> ones(size_t(M) * K / 128, 1.f);
  CK(cudaMemcpy(a.qs, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(a.q, 0x38, size_t(M) * K));
  return a;
}

void bench_fp8(const char* name, int N, int K, const std::vector<int>& ms_) {
  const size_t wbytes = size_t(N) * K + size_t(N / 128) * (K / 128);
  const int sets = rotation(wbytes);
  const Fp8Sets ws8 = fp8_weight_sets(sets, N, K);
  const std::vector<uint8_t*>&w = ws8.w, &sc = ws8.sc;
  // random bytes include e4m3 NaN codes (0x7f/0xff); harmless for timing, but keep data finite:
  // overwrite one set's codes through dequant-free masking is not needed since NaN math is not slower.
  void* wbf = dalloc(size_t(N) * K * 2);  // peer weight (one copy; bf16 is 2x the bytes anyway)
  OK(dc::dequant_fp8_to_bf16({w[0], sc[0], false, N, K}, static_cast<uint16_t*>(wbf), g_stream));
  for (int M : ms_) {
    void* x = dalloc(size_t(M) * K * 4);
    std::vector<float> hx(size_t(M) * K);
    for (auto& v : hx) v = float(rand()) / RAND_MAX - 0.5f;
    CK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
    uint8_t* q = static_cast<uint8_t*>(dalloc(size_t(M) * K));
    float* qs = static_cast<float*>(dalloc(size_t(M) * K / 128 * 4));
    float* y = static_cast<float*>(dalloc(size_t(M) * N * 4));
    void* ws = dalloc(dc::fp8_linear_workspace_bytes(M, N, K));
    const double ms = time_graph(std::max(sets, 20), [&](int i) {
      OK(dc::quantize_act_fp8(x, false, M, K, q, qs, g_stream));
      OK(dc::fp8_linear(q, qs, M, {w[i % sets], sc[i % sets], false, N, K}, y, ws, g_stream));
    });
    OK(dc::quantize_act_fp8(x, false, M, K, q, qs, g_stream));
    Row r0;  // the GEMM alone (activation already quantised): separates the quantisation launch
    r0.op = M <= 64 ? "fp8_gemm/dec" : "fp8_gemm/tile";
    r0.shape = std::to_string(N) + "x" + std::to_string(K);
    r0.m = M;
    r0.groups = 1;
    r0.ms = time_graph(std::max(sets, 20), [&](int i) {
      OK(dc::fp8_linear(q, qs, M, {w[i % sets], sc[i % sets], false, N, K}, y, ws, g_stream));
    });
    r0.bytes = double(wbytes) + double(M) * K + double(M) * N * 4;
    r0.flops = 2.0 * M * N * double(K);
    r0.peak = g_fp8_peak;
    report(r0);
    Row r;
    r.op = M <= 64 ? "fp8_linear/dec" : "fp8_linear/tile";
    r.shape = std::to_string(N) + "x" + std::to_string(K);
    r.m = M;
    r.groups = 1;
    r.ms = ms;
    r.bytes = double(wbytes) + double(M) * K * (4 + 1 + 1) + double(M) * N * 4;  // W, x read, q write+read, y
    r.flops = 2.0 * M * N * double(K);
    r.peak = g_fp8_peak;
    // peer: cuBLAS bf16 GEMM on the dequantised weight, bf16 x and y
    void* xb = dalloc(size_t(M) * K * 2);
    void* yb = dalloc(size_t(M) * N * 2);
    r.peer = "cublas_bf16";
    r.peer_ms = time_graph(20, [&](int) { blas_bf16(wbf, xb, yb, M, N, K, 1); }, false);
    report(r);
    for (void* p : {x, static_cast<void*>(q), static_cast<void*>(qs), static_cast<void*>(y), ws, xb, yb}) CK(cudaFree(p));
  }
  free_sets(ws8);
  CK(cudaFree(wbf));
}

void bench_mxfp4(const char* name, int N, int K, int G, int m) {
  const size_t per = size_t(N) * K / 2 + size_t(N) * K / 32;
  const int sets = std::max(1, rotation(per * G) / 1);
  const int slots = sets * G;
  std::vector<uint8_t*> w(slots), s(slots);
  std::vector<uint8_t> hs(size_t(N) * K / 32);
  for (auto& e : hs) e = static_cast<uint8_t>(118 + rand() % 6);
  for (int i = 0; i < slots; ++i) {
    w[i] = static_cast<uint8_t*>(dalloc(size_t(N) * K / 2));
    s[i] = static_cast<uint8_t*>(dalloc(hs.size()));
    CK(cudaMemcpy(s[i], hs.data(), hs.size(), cudaMemcpyHostToDevice));
  }
  float* x = static_cast<float*>(dalloc(size_t(G) * m * K * 4));
  std::vector<float> hx(size_t(G) * m * K);
  for (auto& v : hx) v = float(rand()) / RAND_MAX - 0.5f;
  CK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  float* y = static_cast<float*>(dalloc(size_t(G) * m * N * 4));
  std::vector<dc::Mxfp4Group*> descs(sets);
  for (int st = 0; st < sets; ++st) {
    std::vector<dc::Mxfp4Group> h(G);
    for (int g = 0; g < G; ++g)
      h[g] = {w[st * G + g], s[st * G + g], x + size_t(g) * m * K, y + size_t(g) * m * N, m, 0};
    descs[st] = static_cast<dc::Mxfp4Group*>(dalloc(G * sizeof(dc::Mxfp4Group)));
    CK(cudaMemcpy(descs[st], h.data(), G * sizeof(dc::Mxfp4Group), cudaMemcpyHostToDevice));
  }
  Row r;
  r.op = "mxfp4_experts";
  r.shape = std::to_string(N) + "x" + std::to_string(K);
  r.m = m;
  r.groups = G;
  r.ms = time_graph(std::max(sets, 20), [&](int i) {
    OK(dc::mxfp4_linear_grouped(descs[i % sets], G, m, N, K, dc::Mxfp4Layout::rows, g_stream));
  });
  r.bytes = double(per) * G + double(G) * m * (K + N) * 4;
  r.flops = 2.0 * G * m * N * double(K);
  r.peak = g_bf16_peak;
  // peer: cuBLAS strided-batched bf16 GEMM over G dequantised experts (one weight set)
  if (size_t(G) * N * K * 2 <= (size_t(8) << 30)) {
    uint16_t* wb = static_cast<uint16_t*>(dalloc(size_t(G) * N * K * 2));
    for (int g = 0; g < G; ++g) OK(dc::dequant_mxfp4_to_bf16(w[g], s[g], N, K, wb + size_t(g) * N * K, g_stream));
    void* xb = dalloc(size_t(G) * m * K * 2);
    void* yb = dalloc(size_t(G) * m * N * 2);
    r.peer = "cublas_bf16_batched";
    r.peer_ms = time_graph(10, [&](int) { blas_bf16(wb, xb, yb, m, N, K, G); }, false);
    for (void* p : {static_cast<void*>(wb), xb, yb}) CK(cudaFree(p));
  }
  report(r);
  for (int i = 0; i < slots; ++i) {
    CK(cudaFree(w[i]));
    CK(cudaFree(s[i]));
  }
  for (auto* d : descs) CK(cudaFree(d));
  CK(cudaFree(x));
  CK(cudaFree(y));
}

// The routed experts of one MoE layer, E experts with m rows each (d 4096, I 2048): the narrow
// path (16-row groups: w1 and w3 grouped, SwiGLU, w2 grouped) against the wide one (64-row groups:
// w1/w3 with SwiGLU fused, w2). Bytes: every expert's three weights once, plus the rows.
void bench_moe_paths(int E, int m) {
  const int d = 4096, I = 2048;
  const size_t per = 3 * (size_t(I) * d / 2 + size_t(I) * d / 32);
  const int sets = rotation(per * E);
  std::vector<dc::ExpertPtrs> ex(size_t(sets) * E);
  std::vector<uint8_t> hs(size_t(I) * d / 32);
  for (auto& e : hs) e = static_cast<uint8_t>(118 + rand() % 6);
  std::vector<void*> owned;
  auto mat = [&](uint8_t*& w, uint8_t*& sc) {
    w = static_cast<uint8_t*>(dalloc(size_t(I) * d / 2));
    sc = static_cast<uint8_t*>(dalloc(hs.size()));
    CK(cudaMemcpy(sc, hs.data(), hs.size(), cudaMemcpyHostToDevice));
    owned.push_back(w), owned.push_back(sc);
  };
  for (auto& p : ex) {
    uint8_t *w, *sc;
    mat(w, sc), p.w1 = w, p.s1 = sc;
    mat(w, sc), p.w3 = w, p.s3 = sc;
    mat(w, sc), p.w2 = w, p.s2 = sc;
  }
  const size_t R = size_t(E) * m;
  auto fbuf = [&](size_t n) { void* p = dalloc(n); owned.push_back(p); return p; };
  float* x = static_cast<float*>(fbuf(R * d * 4));
  std::vector<float> hx(R * d);
  for (auto& v : hx) v = float(rand()) / RAND_MAX - 0.5f;
  CK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  float *gp = static_cast<float*>(fbuf(R * I * 4)), *up = static_cast<float*>(fbuf(R * I * 4));
  float *ap = static_cast<float*>(fbuf(R * I * 4)), *y = static_cast<float*>(fbuf(R * d * 4));
  auto* x16 = static_cast<uint16_t*>(fbuf(R * d * 2));
  auto* a16 = static_cast<uint16_t*>(fbuf(R * I * 2));
  std::vector<int32_t> ident(R);
  for (size_t i = 0; i < R; ++i) ident[i] = static_cast<int32_t>(i);
  auto* slots = static_cast<int32_t*>(fbuf(R * 4));
  CK(cudaMemcpy(slots, ident.data(), R * 4, cudaMemcpyHostToDevice));
  OK(dc::moe_permute_f16(x, int64_t(R), 1, d, slots, x16, g_stream));  // identity: x in fp16
  // Descriptors per weight set: (w1, w3) pairs and w2, groups of `gr` rows.
  auto groups = [&](int gr, std::vector<dc::Mxfp4Group*>& g13s, std::vector<dc::Mxfp4Group*>& g2s) {
    int n = 0;
    for (int st = 0; st < sets; ++st) {
      std::vector<dc::Mxfp4Group> h13, h2;
      for (int e = 0; e < E; ++e)
        for (int r0 = 0; r0 < m; r0 += gr) {
          const int mg = std::min(gr, m - r0);
          const size_t row = size_t(e) * m + r0;
          const dc::ExpertPtrs& p = ex[size_t(st) * E + e];
          h13.push_back({p.w1, p.s1, x + row * d, gp + row * I, mg, int32_t(row)});
          h13.push_back({p.w3, p.s3, x + row * d, up + row * I, mg, int32_t(row)});
          h2.push_back({p.w2, p.s2, ap + row * I, y + row * d, mg, int32_t(row)});
        }
      n = static_cast<int>(h2.size());
      g13s.push_back(static_cast<dc::Mxfp4Group*>(fbuf(h13.size() * sizeof(h13[0]))));
      g2s.push_back(static_cast<dc::Mxfp4Group*>(fbuf(h2.size() * sizeof(h2[0]))));
      CK(cudaMemcpy(g13s.back(), h13.data(), h13.size() * sizeof(h13[0]), cudaMemcpyHostToDevice));
      CK(cudaMemcpy(g2s.back(), h2.data(), h2.size() * sizeof(h2[0]), cudaMemcpyHostToDevice));
    }
    return n;
  };
  std::vector<dc::Mxfp4Group *> n13, n2, w13, w2;
  const int nn = groups(16, n13, n2), nw = groups(64, w13, w2);
  const int mm = std::min(m, 16), mw = std::min(m, 64);
  Row r;
  r.shape = "E" + std::to_string(E) + " d4096 I2048";
  r.m = m;
  r.bytes = double(per) * E + double(R) * d * 4 * 2;
  r.flops = 2.0 * 3 * R * double(I) * d;
  r.peak = g_bf16_peak;
  r.op = "moe_narrow16";
  r.groups = nn;
  r.ms = time_graph(std::max(sets, 20), [&](int i) {
    OK(dc::mxfp4_linear_grouped(n13[i % sets], 2 * nn, mm, I, d, dc::Mxfp4Layout::rows, g_stream));
    OK(dc::swiglu(gp, up, I, int64_t(R), I, 10.f, ap, g_stream));
    OK(dc::mxfp4_linear_grouped(n2[i % sets], nn, mm, d, I, dc::Mxfp4Layout::rows, g_stream));
  });
  const double narrow_ms = r.ms;
  report(r);
  r.op = "moe_wide64";
  r.groups = nw;
  r.ms = time_graph(std::max(sets, 20), [&](int i) {
    OK(dc::mxfp4_experts_w13_swiglu(w13[i % sets], nw, mw, x16, I, d, 10.f, a16, dc::Mxfp4Layout::rows, g_stream));
    OK(dc::mxfp4_experts_w2(w2[i % sets], nw, mw, a16, d, I, dc::Mxfp4Layout::rows, g_stream));
  });
  r.peer = "moe_narrow16";
  r.peer_ms = narrow_ms;
  report(r);
  const double wide_ms = r.ms;
  // wgmma with the model's group size (128 rows from 96 per expert, else 64); scales 118..123
  // are foldable, so its fast kernel.
  std::vector<dc::Mxfp4Group *> q13, q2;
  const int gq = m >= 96 ? 128 : 64;
  const int nq = groups(gq, q13, q2), mq = std::min(m, gq);
  r.groups = nq;
  using Groups = std::vector<dc::Mxfp4Group*>;
  // The f16 wgmma kernels on groups (g13s, g2s), launched for max_m rows, weights in `layout`.
  auto wgmma_ms = [&](const Groups& g13s, const Groups& g2s, int max_m, dc::Mxfp4Layout layout) {
    return time_graph(std::max(sets, 20), [&](int i) {
      OK(dc::mxfp4_experts_w13_swiglu_wgmma(g13s[i % sets], nq, max_m, x16, I, d, 10.f, a16, dc::Mxfp4Scales::foldable,
                                            layout, g_stream));
      OK(dc::mxfp4_experts_w2_wgmma(g2s[i % sets], nq, max_m, a16, d, I, dc::Mxfp4Scales::foldable, layout, g_stream));
    });
  };
  auto report_vs = [&](const char* op, double ms, const char* peer, double peer_ms) {
    r.op = op, r.ms = ms, r.peer = peer, r.peer_ms = peer_ms;
    report(r);
  };
  const double wg_ms = wgmma_ms(q13, q2, mq, dc::Mxfp4Layout::rows);
  report_vs("moe_wgmma", wg_ms, "moe_wide64", wide_ms);
  {  // FP8 (e4m3 rows, e2m1 folded into e4m3 tables), the same groups (128 rows: the one-block
    // kernel); the w2 rows' quantisation is timed, x's is not (as moe_permute_f16 for the others)
    auto* x8 = static_cast<uint8_t*>(fbuf(R * d)), *a8 = static_cast<uint8_t*>(fbuf(R * I));
    float *xs = static_cast<float*>(fbuf(R * d / 128 * 4)), *as = static_cast<float*>(fbuf(R * I / 128 * 4));
    OK(dc::moe_rows_fp8(x, int64_t(R), 1, d, nullptr, x8, xs, int64_t(R), g_stream));
    auto fp8_ms = [&](const Groups& g13s, const Groups& g2s, dc::Mxfp4Layout layout) {
      return time_graph(std::max(sets, 20), [&](int i) {
        OK(dc::mxfp4_experts_w13_swiglu_fp8(g13s[i % sets], nq, mq, x8, xs, int64_t(R), I, d, 10.f, ap, layout,
                                            g_stream));
        OK(dc::moe_rows_fp8(ap, int64_t(R), 1, I, nullptr, a8, as, int64_t(R), g_stream));
        OK(dc::mxfp4_experts_w2_fp8(g2s[i % sets], nq, mq, a8, as, int64_t(R), d, I, layout, g_stream));
      });
    };
    const double f8_ms = fp8_ms(q13, q2, dc::Mxfp4Layout::rows);
    report_vs("moe_fp8", f8_ms, "moe_wgmma", wg_ms);
    // The same with the weights in 64-row tiles (mxfp4_tile64): whole 4 KB runs per block and chunk.
    std::vector<dc::ExpertPtrs> tx(ex.size());
    auto tile = [&](const uint8_t* w, const uint8_t* sc, int64_t N, int64_t K, const uint8_t*& wt, const uint8_t*& st) {
      uint8_t *a, *b;
      mat(a, b);  // the same sizes (N * K = I * d)
      OK(dc::mxfp4_tile64(w, sc, N, K, a, b, g_stream));
      wt = a, st = b;
    };
    for (size_t j = 0; j < ex.size(); ++j) {
      tile(ex[j].w1, ex[j].s1, I, d, tx[j].w1, tx[j].s1);
      tile(ex[j].w3, ex[j].s3, I, d, tx[j].w3, tx[j].s3);
      tile(ex[j].w2, ex[j].s2, d, I, tx[j].w2, tx[j].s2);
    }
    std::swap(ex, tx);
    Groups t13, t2;
    groups(gq, t13, t2);
    std::swap(ex, tx);
    report_vs("moe_fp8_tiled", fp8_ms(t13, t2, dc::Mxfp4Layout::tiles64), "moe_fp8", f8_ms);
    // f16 on the same tiles
    report_vs("moe_wgmma_tiled", wgmma_ms(t13, t2, mq, dc::Mxfp4Layout::tiles64), "moe_wgmma", wg_ms);
    // The same 64-row groups in the 128-row launch: one block per SM, a deeper ring.
    if (gq == 64) report_vs("moe_wgmma_ring128", wgmma_ms(q13, q2, 128, dc::Mxfp4Layout::rows), "moe_wgmma", wg_ms);
  }
  for (void* p : owned) CK(cudaFree(p));
}

void bench_rms(int n, int d) {
  const int sets = rotation(size_t(n) * d * 8);
  std::vector<float*> x(sets), y(sets);
  for (int i = 0; i < sets; ++i) {
    x[i] = static_cast<float*>(dalloc(size_t(n) * d * 4));
    y[i] = static_cast<float*>(dalloc(size_t(n) * d * 4));
    OK(dc::rms_norm(y[i], 0, d, nullptr, 1e-6f, y[i], g_stream));
  }
  std::vector<float> hx(size_t(n) * d, 0.5f);
  for (int i = 0; i < sets; ++i) CK(cudaMemcpy(x[i], hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  float* w = static_cast<float*>(dalloc(size_t(d) * 4));
  CK(cudaMemcpy(w, hx.data(), size_t(d) * 4, cudaMemcpyHostToDevice));
  Row r;
  r.op = "rms_norm";
  r.shape = "d" + std::to_string(d);
  r.m = n;
  r.groups = 1;
  r.ms = time_graph(std::max(sets, 20), [&](int i) { OK(dc::rms_norm(x[i % sets], n, d, w, 1e-6f, y[i % sets], g_stream)); });
  r.bytes = 2.0 * n * d * 4 + d * 4;
  r.flops = 3.0 * n * d;
  report(r);
  for (int i = 0; i < sets; ++i) {
    CK(cudaFree(x[i]));
    CK(cudaFree(y[i]));
  }
  CK(cudaFree(w));
}

// The router (moe_route: logits, sqrt-softplus top-k, weights) at T tokens x E experts, d 4096,
// top 6, then the expert groups of its picks and the rows' FP8 copies in their slots: the EP step's
// is 256 x 32.
void bench_route(int T, int E) {
  constexpr int d = 4096, k = 6;
  float* h = static_cast<float*>(dalloc(size_t(T) * d * 4));
  OK(dc::fill_random(h, int64_t(T) * d, dc::RandomKind::kF32, 1.f, 0.f, 7, g_stream));
  auto* gate = static_cast<uint16_t*>(dalloc(size_t(E) * d * 2));
  OK(dc::fill_random(gate, int64_t(E) * d, dc::RandomKind::kBf16, 0.05f, 0.f, 8, g_stream));
  float* bias = static_cast<float*>(dalloc(size_t(E) * 4));
  OK(dc::fill_random(bias, E, dc::RandomKind::kF32, 0.01f, 0.f, 9, g_stream));
  float* logits = static_cast<float*>(dalloc(size_t(T) * E * 4));
  auto* experts = static_cast<int32_t*>(dalloc(size_t(T) * k * 4));
  float* weights = static_cast<float*>(dalloc(size_t(T) * k * 4));
  OK(dc::moe_route(h, T, d, gate, E, bias, k, 1.f, logits, experts, weights, g_stream));  // limits set before capture
  Row r;
  r.op = "moe_route";
  r.shape = "E" + std::to_string(E) + " d" + std::to_string(d);
  r.m = T;
  r.groups = 1;
  r.ms = time_graph(20, [&](int) { OK(dc::moe_route(h, T, d, gate, E, bias, k, 1.f, logits, experts, weights, g_stream)); });
  r.bytes = double(T) * d * 4 + double(E) * d * 2 + double(T) * E * 4;
  r.flops = 2.0 * T * E * double(d);
  report(r);
  // The expert groups of those picks (moe_build_groups, 64-row groups as the EP step's wide
  // kernels take them; null weights: the pointers are only copied into the group entries).
  const int gr = 64, mg = dc::moe_max_groups(T, k, E, gr);
  auto* ptrs = static_cast<dc::ExpertPtrs*>(dalloc(size_t(E) * sizeof(dc::ExpertPtrs)));
  CK(cudaMemset(ptrs, 0, size_t(E) * sizeof(dc::ExpertPtrs)));
  auto* pos = static_cast<int32_t*>(dalloc(size_t(T) * k * 4));
  auto* g13 = static_cast<dc::Mxfp4Group*>(dalloc(2 * size_t(mg) * sizeof(dc::Mxfp4Group)));
  auto* g2 = static_cast<dc::Mxfp4Group*>(dalloc(size_t(mg) * sizeof(dc::Mxfp4Group)));
  Row g;
  g.op = "moe_build_groups";
  g.shape = "E" + std::to_string(E) + " k" + std::to_string(k);
  g.m = T;
  g.groups = mg;
  g.ms = time_graph(20, [&](int) {
    OK(dc::moe_build_groups(experts, T, k, E, ptrs, nullptr, nullptr, nullptr, nullptr, nullptr, d, 2048, mg, pos, g13,
                            g2, g_stream, gr));
  });
  g.bytes = double(T) * k * 8 + 3.0 * mg * sizeof(dc::Mxfp4Group);
  report(g);
  // The tokens' rows to their k slots as e4m3 with per-128 scales (moe_rows_fp8: the FP8 experts'
  // input, after the groups in the EP step).
  auto* x8 = static_cast<uint8_t*>(dalloc(size_t(T) * k * d));
  float* xs = static_cast<float*>(dalloc(size_t(T) * k * d / 128 * 4));
  Row q;
  q.op = "moe_rows_fp8";
  q.shape = "k" + std::to_string(k) + " d" + std::to_string(d);
  q.m = T;
  q.groups = 1;
  q.ms = time_graph(20, [&](int) { OK(dc::moe_rows_fp8(h, T, k, d, pos, x8, xs, int64_t(T) * k, g_stream)); });
  q.bytes = double(T) * d * 4 + double(T) * k * (d + d / 128 * 4);
  report(q);
  for (void* p : {static_cast<void*>(h), static_cast<void*>(gate), static_cast<void*>(bias), static_cast<void*>(logits),
                  static_cast<void*>(experts), static_cast<void*>(weights), static_cast<void*>(ptrs),
                  static_cast<void*>(pos), static_cast<void*>(g13), static_cast<void*>(g2), static_cast<void*>(x8),
                  static_cast<void*>(xs)})
    CK(cudaFree(p));
}

void write_json(const char* path, const char* rev, const std::string& cmd) {
  FILE* f = std::fopen(path, "w");
  if (!f) return;
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::fprintf(f, "{\"machine\": \"%s, %d SMs, %.0f GiB\", \"git_rev\": \"%s\", \"command\": \"%s\", \"date\": \"%s\",\n",
               p.name, p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, rev, cmd.c_str(), date);
  std::fprintf(f, " \"ceilings\": {\"copy_GBps\": %.1f, \"bf16_gemm_TFLOPs\": %.1f, \"fp8_gemm_TFLOPs\": %.1f},\n",
               g_bw / 1e9, g_bf16_peak / 1e12, g_fp8_peak / 1e12);
  std::fprintf(f, " \"rows\": [\n");
  for (size_t i = 0; i < g_rows.size(); ++i) {
    const Row& r = g_rows[i];
    const double floor_s = std::max(r.bytes / g_bw, r.peak > 0 ? r.flops / r.peak : 0.0);
    std::fprintf(f,
                 "  {\"op\": \"%s\", \"shape\": \"%s\", \"M\": %lld, \"groups\": %lld, \"time_us\": %.3f, "
                 "\"bytes\": %.0f, \"GBps\": %.1f, \"TFLOPs\": %.2f, \"floor_us\": %.3f, \"floor_ratio\": %.3f",
                 r.op.c_str(), r.shape.c_str(), r.m, r.groups, r.ms * 1e3, r.bytes, r.bytes / (r.ms * 1e-3) / 1e9,
                 r.flops / (r.ms * 1e-3) / 1e12, floor_s * 1e6, r.ms * 1e-3 / floor_s);
    if (r.peer_ms > 0) std::fprintf(f, ", \"peer\": {\"name\": \"%s\", \"time_us\": %.3f}", r.peer.c_str(), r.peer_ms * 1e3);
    std::fprintf(f, "}%s\n", i + 1 < g_rows.size() ? "," : "");
  }
  std::fprintf(f, " ]}\n");
  std::fclose(f);
}

}  // namespace

// V4's grouped wo_a (G groups of N rows over K columns each) in one launch of the decode path.
void bench_fp8_grouped(int G, int N, int K, const std::vector<int>& ms_) {
  const size_t wbytes = size_t(G) * N * K + size_t(G) * (N / 128) * (K / 128);
  const int sets = rotation(wbytes);
  const Fp8Sets ws8 = fp8_weight_sets(sets, int64_t(G) * N, K);
  const std::vector<uint8_t*>&w = ws8.w, &sc = ws8.sc;
  for (int M : ms_) {
    const auto [q, qs] = fixed_quant_act(M, int64_t(G) * K);
    float* y = static_cast<float*>(dalloc(size_t(M) * G * N * 4));
    Row r;
    r.op = "fp8_gemm/dec-grouped";
    r.shape = std::to_string(G) + "x" + std::to_string(N) + "x" + std::to_string(K);
    r.m = M;
    r.groups = G;
    r.ms = time_graph(std::max(sets, 20), [&](int i) {
      OK(dc::fp8_linear_grouped_skinny(q, qs, M, {w[i % sets], sc[i % sets], false, int64_t(G) * N, K}, G, y,
                                       g_stream));
    });
    r.bytes = double(wbytes) + double(M) * G * K + double(M) * G * N * 4;
    r.flops = 2.0 * M * G * N * double(K);
    r.peak = g_fp8_peak;
    report(r);
    for (void* p : {static_cast<void*>(q), static_cast<void*>(qs), static_cast<void*>(y)}) CK(cudaFree(p));
  }
  free_sets(ws8);
}

// The FP8 decode paths side by side (activation already quantised): the mma.sync GEMV (M <= 64),
// the wgmma kernel (past kFp8WgmmaMaxRows rows: calls of that many) and cuBLASLt (G = 1 only; the
// model runs G > 1 through cuBLASLt as G calls on G streams, not timed here).
void bench_fp8_paths(const char* name, int G, int N, int K, const std::vector<int>& ms_) {
  const int64_t GN = int64_t(G) * N;
  const size_t wbytes = size_t(GN) * K + size_t(GN / 128) * (K / 128);
  const int sets = rotation(wbytes);
  const Fp8Sets ws8 = fp8_weight_sets(sets, GN, K);
  const std::vector<uint8_t*>&w = ws8.w, &sc = ws8.sc;
  std::vector<float*> scf(sets);
  for (int i = 0; i < sets; ++i) {
    scf[i] = static_cast<float*>(dalloc(size_t(GN / 128) * (K / 128) * 4));
    OK(dc::fp8_scales_to_f32({w[i], sc[i], false, GN, K}, scf[i], g_stream));
  }
  void* lws = dalloc(dc::fp8_linear_lt_workspace_bytes());
  for (int M : ms_) {
    const auto [q, qs] = fixed_quant_act(M, int64_t(G) * K);
    float* y = static_cast<float*>(dalloc(size_t(M) * GN * 4));
    auto row = [&](const char* op, const std::function<void(int)>& body) {
      Row r;
      r.op = op;
      r.shape = (G > 1 ? std::to_string(G) + "x" : std::string()) + std::to_string(N) + "x" + std::to_string(K);
      r.m = M;
      r.groups = G;
      r.ms = time_graph(std::max(sets, 20), body);
      r.bytes = double(wbytes) + double(M) * G * K + double(M) * GN * 4;
      r.flops = 2.0 * M * GN * double(K);
      r.peak = g_fp8_peak;
      report(r);
    };
    std::printf("[%s]\n", name);
    if (M <= 64)
      row("fp8/gemv", [&](int i) {
        const dc::Fp8Weight wt{w[i % sets], sc[i % sets], false, GN, K};
        OK(G > 1 ? dc::fp8_linear_grouped_skinny(q, qs, M, wt, G, y, g_stream)
                 : dc::fp8_linear_skinny(q, qs, M, wt, y, nullptr, g_stream));
      });
    row(M <= dc::kFp8WgmmaMaxRows ? "fp8/wgmma" : "fp8/wgmma-x128", [&](int i) {  // > 128 rows: calls of 128
      const dc::Fp8Weight wt{w[i % sets], sc[i % sets], false, GN, K};
      for (int m0 = 0; m0 < M; m0 += dc::kFp8WgmmaMaxRows) {
        const int m = std::min<int>(M - m0, dc::kFp8WgmmaMaxRows);
        OK(G > 1 ? dc::fp8_linear_grouped_wgmma(q + size_t(m0) * G * K, qs + size_t(m0) * G * K / 128, m, wt, G,
                                                y + size_t(m0) * GN, g_stream)
                 : dc::fp8_linear_wgmma(q + size_t(m0) * K, qs + size_t(m0) * K / 128, m, wt, y + size_t(m0) * GN,
                                        g_stream));
      }
    });
    if (G == 1) {
      row("fp8/cublaslt", [&](int i) {
        OK(dc::fp8_linear_lt(q, qs, M, {w[i % sets], scf[i % sets], true, GN, K}, y, false, lws, g_stream));
      });
      // The timed plan (the model's up to 512 rows): chosen here, outside the graph capture.
      OK(dc::fp8_linear_lt(q, qs, M, {w[0], scf[0], true, GN, K}, y, false, lws, g_stream, true));
      row("fp8/cublaslt-timed", [&](int i) {
        OK(dc::fp8_linear_lt(q, qs, M, {w[i % sets], scf[i % sets], true, GN, K}, y, false, lws, g_stream, true));
      });
      std::printf("  cublaslt plans: first %s; timed %s\n", dc::fp8_linear_lt_algo(M, GN, K, false, false).c_str(),
                  dc::fp8_linear_lt_algo(M, GN, K, false, true).c_str());
    }
    for (void* p : {static_cast<void*>(q), static_cast<void*>(qs), static_cast<void*>(y)}) CK(cudaFree(p));
  }
  free_sets(ws8);
  for (float* p : scf) CK(cudaFree(p));
  CK(cudaFree(lws));
}

// One kernel reading `mb` MB, as the decode step's weight-streaming kernels do: every probe
// configuration (cuda_ops.h read_probe) against the copy ceiling, the buffer rotated past L2.
void bench_read_probes(int mb) {
  const size_t bytes = size_t(mb) << 20;
  const int sets = rotation(bytes);
  std::vector<void*> buf(sets);
  for (auto& b : buf) b = dalloc(bytes);
  auto* sink = static_cast<uint32_t*>(dalloc(4));
  const int sms = 132;
  auto run = [&](dc::ReadProbe mode, int blocks, int depth, int chunk, const std::string& name) {
    Row r;
    r.op = name;
    r.shape = std::to_string(mb) + "MB";
    r.m = blocks;
    r.groups = depth;
    r.ms = time_graph(std::max(sets, 20),
                      [&](int i) { OK(dc::read_probe(mode, buf[i % sets], int64_t(bytes), blocks, depth, chunk, sink, g_stream)); });
    r.bytes = double(bytes);
    report(r);
  };
  for (int bps : {2, 4, 8})
    for (int depth : {2, 4, 8}) run(dc::ReadProbe::kLdg, bps * sms, depth, 0, "read/ldg");
  for (int bps : {1, 2})
    for (auto [chunk, depth] : std::vector<std::pair<int, int>>{{8192, 8}, {16384, 6}, {16384, 12}, {32768, 3}, {32768, 6}})
      if (chunk * depth * bps <= 200 * 1024) run(dc::ReadProbe::kBulk, bps * sms, depth, chunk, "read/bulk" + std::to_string(chunk / 1024) + "k");
  for (int row : {1024, 4096})
    for (int bps : {2, 4, 8})
      for (int depth : {2, 4, 8}) run(dc::ReadProbe::kRows, bps * sms, depth, row, "read/rows" + std::to_string(row));
  for (void* b : buf) CK(cudaFree(b));
  CK(cudaFree(sink));
}

int main(int argc, char** argv) {
  if (!dc::device_available()) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  const char* out = argc > 1 ? argv[1] : "cuda-ops.json";
  const char* rev = argc > 2 ? argv[2] : "unknown";
  CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetStream(g_blas, g_stream);
  g_blas_ws = dalloc(size_t(64) << 20);
  cublasSetWorkspace(g_blas, g_blas_ws, size_t(64) << 20);
  measure_ceilings();
  // argv[3] "moe": the routed-expert paths only; "moe:E:m": one of them (E experts, m rows each);
  // "fp8dec": the FP8 decode path (M <= 16) at the V4 shapes, and the grouped wo_a; "fp8mid": the
  // GEMV, wgmma and cuBLASLt FP8 paths at 8-256 rows; "fp8paths:N:K:G:M": one shape of those;
  // "route:T:E": the router at T tokens x E experts;
  // "stream": read probes; "fp8one:N:K", "mxdec": one decode GEMV shape, the narrow experts at batch 1
  const std::string only = argc > 3 ? argv[3] : "";
  const std::vector<int> dec = {1, 8, 32, 64};
  int one_e = 0, one_m = 0;
  if (std::sscanf(only.c_str(), "moe:%d:%d", &one_e, &one_m) == 2) {
    bench_moe_paths(one_e, one_m);
    write_json(out, rev, "cuda_ops_bench " + only);
    return 0;
  }
  if (only == "stream") {  // read-bandwidth probes at the decode kernels' sizes
    for (int mb : {8, 32}) bench_read_probes(mb);
    write_json(out, rev, "cuda_ops_bench " + only);
    return 0;
  }
  int one_n = 0, one_k = 0;
  if (std::sscanf(only.c_str(), "fp8one:%d:%d", &one_n, &one_k) == 2) {  // one decode GEMV shape, M = 1, 8
    bench_fp8("one", one_n, one_k, {1, 8});
    write_json(out, rev, "cuda_ops_bench " + only);
    return 0;
  }
  int r_t = 0, r_e = 0;
  if (std::sscanf(only.c_str(), "route:%d:%d", &r_t, &r_e) == 2) {  // the router at one shape
    bench_route(r_t, r_e);
    write_json(out, rev, "cuda_ops_bench " + only);
    return 0;
  }
  int p_n = 0, p_k = 0, p_g = 0, p_m = 0;
  if (std::sscanf(only.c_str(), "fp8paths:%d:%d:%d:%d", &p_n, &p_k, &p_g, &p_m) == 4) {  // one shape, every path
    bench_fp8_paths("one", p_g, p_n, p_k, {p_m});
    write_json(out, rev, "cuda_ops_bench " + only);
    return 0;
  }
  if (only == "fp8mid") {  // the FP8 decode paths at 8-256 rows
    const std::vector<int> mid = {8, 16, 32, 48, 64, 128, 256};
    for (auto [name, N, K] : std::vector<std::tuple<const char*, int, int>>{
             {"wq_a", 1024, 4096}, {"wkv", 512, 4096}, {"wo_b", 4096, 8192}, {"wq_b", 32768, 1024},
             {"shared.w1", 2048, 4096}, {"shared.w2", 4096, 2048}})
      bench_fp8_paths(name, 1, N, K, mid);
    bench_fp8_paths("wo_a", 8, 1024, 4096, mid);
    write_json(out, rev, "cuda_ops_bench " + only);
    return 0;
  }
  if (only == "mxdec") {  // the narrow MXFP4 kernel at batch 1: w1 + w3 of 6 experts, then w2
    bench_mxfp4("expert.w13", 2048, 4096, 12, 1);
    bench_mxfp4("expert.w2", 4096, 2048, 6, 1);
    write_json(out, rev, "cuda_ops_bench " + only);
    return 0;
  }
  if (only == "fp8dec") {  // the FP8 decode path alone
    const std::vector<int> small = {1, 8, 16};
    for (auto [name, N, K] : std::vector<std::tuple<const char*, int, int>>{
             {"wq_a", 1024, 4096}, {"wkv", 512, 4096}, {"wo_b", 4096, 8192}, {"wq_b", 32768, 1024},
             {"shared.w1", 2048, 4096}, {"shared.w2", 4096, 2048}})
      bench_fp8(name, N, K, small);
    bench_fp8_grouped(8, 1024, 4096, small);
    write_json(out, rev, "cuda_ops_bench " + only);
    return 0;
  }
  if (only != "moe") {
    bench_fp8("wq_a", 1024, 4096, dec);
    bench_fp8("wkv", 512, 4096, dec);
    bench_fp8("wo_b", 4096, 8192, {1, 8, 32, 64, 512, 4096});
    bench_fp8("wq_b", 32768, 1024, {1, 8, 32, 64, 512, 4096});
    bench_fp8("shared.w1", 2048, 4096, {1, 8, 32, 64, 512, 4096});
    bench_fp8("shared.w2", 4096, 2048, dec);
    for (auto [G, m] : std::vector<std::pair<int, int>>{{1, 1}, {6, 1}, {44, 1}, {136, 2}, {200, 2}, {8, 16}}) {
      bench_mxfp4("expert.w1", 2048, 4096, G, m);
      bench_mxfp4("expert.w2", 4096, 2048, G, m);
    }
  }
  // EP slice (32 experts) at batch 64 / 256 and a 1k-token prefill chunk; full model at batch 256 / 1k.
  for (auto [E, m] : std::vector<std::pair<int, int>>{{32, 6}, {32, 12}, {32, 24}, {32, 48}, {32, 192}, {256, 3}, {256, 6}, {256, 12}, {256, 24}, {256, 192}})
    bench_moe_paths(E, m);
  if (only != "moe")
    for (int n : {1, 64, 4096}) bench_rms(n, 4096);
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  write_json(out, rev, cmd);
  std::printf("wrote %s\n", out);
  return 0;
}
