// Bench of the cuBLASLt block-scaled FP8 GEMM (prefill), the V4 decode attention kernel, and a
// decode op sequence launched eagerly vs replayed as a CUDA graph (issue D).
// Ceilings measured in the same run: device-to-device copy (bytes read + written) and a dense
// FP8 GEMM 8192^3 through cuBLASLt (tensor-wide scales). Inputs rotate over enough copies to
// exceed the 60 MB L2; times are medians of 7 replays of a CUDA graph of R back-to-back calls.
// Usage: [SKIP_LT=1] cuda_attn_lt_bench OUT.json [git_rev]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "cuda_util/op_timing.h"

namespace dc = deepinfer::cuda;
namespace db = deepinfer::bench;

namespace {

cudaStream_t g_stream;
double g_bw = 0, g_fp8_peak = 0;

void* dalloc(size_t n) { return db::dalloc(n, g_stream); }
template <class T>
T* upload(const std::vector<T>& v) {
  return db::upload(v, g_stream);
}
double time_graph(int reps, const std::function<void(int)>& body, bool use_graph = true) {
  return db::time_graph(g_stream, reps, body, use_graph);
}
using db::rotation;

struct Row {
  std::string op, shape, note;
  long long m = 0;
  double ms = 0, bytes = 0, flops = 0, peak = 0;
};
std::vector<Row> g_rows;

// A row's floor in seconds: its bytes at the copy rate or its FLOPs at its peak, whichever is
// longer; 0 when no ceilings were measured (NO_CEILINGS), and then its ratio prints as 0.
double floor_of(const Row& r) { return g_bw > 0 ? std::max(r.bytes / g_bw, r.peak > 0 ? r.flops / r.peak : 0.0) : 0.0; }

void report(Row r) {
  const double floor_s = floor_of(r);
  std::printf("%-18s %-12s M=%-5lld %10.2f us %7.0f GB/s %7.1f TF/s  floor %8.2f us  x%.2f  %s\n", r.op.c_str(),
              r.shape.c_str(), r.m, r.ms * 1e3, r.bytes / (r.ms * 1e-3) / 1e9, r.flops / (r.ms * 1e-3) / 1e12,
              floor_s * 1e6, floor_s > 0 ? r.ms * 1e-3 / floor_s : 0.0, r.note.c_str());
  g_rows.push_back(std::move(r));
}

void measure_ceilings() {
  g_bw = db::measure_copy_rate(g_stream);
  g_fp8_peak = db::measure_fp8_gemm_rate(g_stream);
  if (g_fp8_peak <= 0) {
    std::printf("dense FP8 cuBLASLt unavailable\n");
    std::exit(1);
  }
  std::printf("ceilings: copy %.0f GB/s, dense FP8 GEMM %.0f TF/s (8192^3, cuBLASLt, tensor-wide scales)\n",
              g_bw / 1e9, g_fp8_peak / 1e12);
}

// ---- FP8 block-scaled GEMM ----
void bench_lt(int N, int K, const std::vector<int>& ms_) {
  const std::string shape = std::to_string(N) + "x" + std::to_string(K);
  const size_t wbytes = size_t(N) * K + size_t(N / 128) * (K / 128) * 4;
  const int sets = rotation(wbytes, 16);
  std::vector<uint8_t*> w(sets);
  std::vector<float*> sc(sets);
  std::vector<uint8_t> hs(size_t(N / 128) * (K / 128));
  for (auto& e : hs) e = static_cast<uint8_t>(118 + rand() % 6);
  uint8_t* se8 = upload(hs);
  for (int i = 0; i < sets; ++i) {
    w[i] = static_cast<uint8_t*>(dalloc(size_t(N) * K));
    sc[i] = static_cast<float*>(dalloc(hs.size() * 4));
    OK(dc::fp8_scales_to_f32({w[i], se8, false, N, K}, sc[i], g_stream));
  }
  void* ws = dalloc(dc::fp8_linear_lt_workspace_bytes());
  for (int M : ms_) {
    std::vector<float> hx(size_t(M) * K);
    for (auto& v : hx) v = float(rand()) / RAND_MAX - 0.5f;
    float* x = upload(hx);
    uint8_t* q = static_cast<uint8_t*>(dalloc(size_t(M) * K));
    float* qs = static_cast<float*>(dalloc(size_t(M) * K / 128 * 4));
    float* qs_rm = static_cast<float*>(dalloc(size_t(M) * K / 128 * 4));
    void* y = dalloc(size_t(M) * N * 4);
    OK(dc::quantize_act_fp8_t(x, false, M, K, q, qs, g_stream));
    const int reps = std::max(sets, M >= 4096 ? 6 : 12);
    for (bool bf16 : {false, true}) {
      if (!dc::fp8_linear_lt(q, qs, M, {w[0], sc[0], true, N, K}, y, bf16, ws, g_stream)) {
        std::printf("fp8_lt %s M=%d %s: %s\n", shape.c_str(), M, bf16 ? "bf16" : "f32", dc::last_error().c_str());
        continue;
      }
      Row r;
      r.op = bf16 ? "fp8_lt_gemm/bf16" : "fp8_lt_gemm/f32";
      r.shape = shape;
      r.m = M;
      r.ms = time_graph(reps, [&](int i) { OK(dc::fp8_linear_lt(q, qs, M, {w[i % sets], sc[i % sets], true, N, K}, y, bf16, ws, g_stream)); });
      r.bytes = double(wbytes) + double(M) * K + double(M) * N * (bf16 ? 2 : 4);
      r.flops = 2.0 * M * N * double(K);
      r.peak = g_fp8_peak;
      r.note = "vs dense FP8 " + std::to_string(int(100 * (r.flops / (r.ms * 1e-3)) / g_fp8_peak)) + "%";
      report(r);
    }
    if (dc::fp8_linear_lt(q, qs, M, {w[0], sc[0], true, N, K}, y, true, ws, g_stream)) {
      Row r;  // activation quantisation (fp32 in) + GEMM (bf16 out): the whole linear
      r.op = "fp8_lt_linear/bf16";
      r.shape = shape;
      r.m = M;
      r.ms = time_graph(reps, [&](int i) {
        OK(dc::quantize_act_fp8_t(x, false, M, K, q, qs, g_stream));
        OK(dc::fp8_linear_lt(q, qs, M, {w[i % sets], sc[i % sets], true, N, K}, y, true, ws, g_stream));
      });
      r.bytes = double(wbytes) + double(M) * K * 6 + double(M) * N * 2;
      r.flops = 2.0 * M * N * double(K);
      r.peak = g_fp8_peak;
      report(r);
    }
    if (M == 4096) {  // the first slice's mma.sync tiled kernel, same shape, for comparison
      OK(dc::quantize_act_fp8(x, false, M, K, q, qs_rm, g_stream));
      Row r;
      r.op = "fp8_tiled_gemm/f32";
      r.shape = shape;
      r.m = M;
      r.ms = time_graph(reps, [&](int i) {
        OK(dc::fp8_linear_tiled(q, qs_rm, M, {w[i % sets], sc[i % sets], true, N, K}, static_cast<float*>(y), g_stream));
      });
      r.bytes = double(wbytes) + double(M) * K + double(M) * N * 4;
      r.flops = 2.0 * M * N * double(K);
      r.peak = g_fp8_peak;
      report(r);
    }
    for (void* p : {static_cast<void*>(x), static_cast<void*>(q), static_cast<void*>(qs), static_cast<void*>(qs_rm), y})
      CK(cudaFree(p));
  }
  for (int i = 0; i < sets; ++i) {
    CK(cudaFree(w[i]));
    CK(cudaFree(sc[i]));
  }
  CK(cudaFree(se8));
  CK(cudaFree(ws));
}

// ---- decode attention ----
struct AttnSet {
  uint16_t *q, *ring, *entries, *out;
  int32_t *idx, *nw, *ni, *pos;
};

void bench_attention(int B, int n_cmp, const std::vector<int>& splits, bool wgmma = false) {
  const int D = 512, H = 64;
  const size_t per = size_t(B) * ((128 + n_cmp) * D * 2 + H * D * 4 + n_cmp * 4);
  const int sets = rotation(per, 256);
  std::mt19937 rng(B);
  std::vector<AttnSet> s(sets);
  std::vector<float> hf(32);
  for (int i = 0; i < 32; ++i) hf[i] = static_cast<float>(1.0 / std::pow(160000.0, 2.0 * i / 64.0));
  float* freq = upload(hf);
  std::vector<float> hsink(H);
  for (auto& v : hsink) v = float(rng() % 1000) / 500.f - 1.f;
  float* sink = upload(hsink);
  std::vector<uint16_t> hv(size_t(std::max(128, n_cmp)) * D * B);
  for (auto& v : hv) v = static_cast<uint16_t>(0x3c00 + (rng() & 0x7ff) + ((rng() & 1) << 15));  // finite bf16 ~ +-[0.008, 1)
  for (auto& st : s) {
    st.q = upload(std::vector<uint16_t>(hv.begin(), hv.begin() + size_t(B) * H * D));  // B*64*512 <= hv.size()
    st.ring = upload(std::vector<uint16_t>(hv.begin(), hv.begin() + size_t(B) * 128 * D));
    st.entries = upload(std::vector<uint16_t>(hv.begin(), hv.begin() + size_t(std::max(n_cmp, 1)) * B * D));
    st.out = static_cast<uint16_t*>(dalloc(size_t(B) * H * D * 2));
    std::vector<int32_t> idx(size_t(B) * std::max(n_cmp, 1));
    for (int b = 0; b < B; ++b) {
      std::vector<int32_t> perm(n_cmp);
      std::iota(perm.begin(), perm.end(), b * n_cmp);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::copy(perm.begin(), perm.end(), idx.begin() + size_t(b) * n_cmp);
    }
    st.idx = upload(idx);
    st.nw = upload(std::vector<int32_t>(B, 128));
    st.ni = upload(std::vector<int32_t>(B, n_cmp));
    st.pos = upload(std::vector<int32_t>(B, 4095));
  }
  for (int split : splits) {
    dc::DecodeAttnArgs a;
    a.index_stride = std::max(n_cmp, 1);
    a.sink = sink;
    a.inv_freq = freq;
    a.batch = B;
    a.max_rows = 128 + n_cmp;
    a.split_rows = split;
    a.wgmma = wgmma;
    a.heads_per_block = wgmma ? 64 : 0;  // wgmma takes 64-head blocks at any launch size
    void* ws = dalloc(dc::decode_attention_workspace_bytes(a));
    auto fill = [&](dc::DecodeAttnArgs& x, const AttnSet& st) {
      x.q = st.q, x.window = st.ring, x.entries = st.entries, x.out = st.out;
      x.index = st.idx, x.n_window = st.nw, x.n_index = st.ni, x.pos = st.pos;
    };
    Row r;
    r.op = "decode_attention";
    r.shape = "128+" + std::to_string(n_cmp) + "/s" + std::to_string(split);
    r.m = B;
    r.ms = time_graph(std::max(sets, 20), [&](int i) {
      dc::DecodeAttnArgs x = a;
      fill(x, s[i % sets]);
      OK(dc::decode_attention(x, ws, g_stream));
    });
    r.bytes = double(B) * ((128.0 + n_cmp) * D * 2 + 2.0 * H * D * 2 + n_cmp * 4);  // K rows, q, out, index
    r.flops = 4.0 * B * H * D * (128.0 + n_cmp);
    r.note = "splits/seq " + std::to_string((128 + n_cmp + split - 1) / split) + (wgmma ? ", wgmma" : "");
    report(r);
    CK(cudaFree(ws));
  }
  for (auto& st : s)
    for (void* p : {static_cast<void*>(st.q), static_cast<void*>(st.ring), static_cast<void*>(st.entries),
                    static_cast<void*>(st.out), static_cast<void*>(st.idx), static_cast<void*>(st.nw),
                    static_cast<void*>(st.ni), static_cast<void*>(st.pos)})
      CK(cudaFree(p));
  CK(cudaFree(freq));
  CK(cudaFree(sink));
}

// ---- a decode op sequence: eager launches vs one CUDA graph ----
void bench_sequence(int B) {
  const int D = 512, H = 64;
  struct Lin { int n, k; uint8_t* w; uint8_t* s; };
  std::vector<Lin> lins = {{1024, 4096, nullptr, nullptr}, {32768, 1024, nullptr, nullptr}, {4096, 8192, nullptr, nullptr}};
  std::vector<uint8_t> hs(size_t(32768 / 128) * (8192 / 128), 120);
  for (auto& l : lins) l.w = static_cast<uint8_t*>(dalloc(size_t(l.n) * l.k)), l.s = upload(hs);
  float* x = static_cast<float*>(dalloc(size_t(B) * 4096 * 4));
  std::vector<float> hx(size_t(B) * 32768);
  for (auto& v : hx) v = float(rand()) / RAND_MAX - 0.5f;
  CK(cudaMemcpy(x, hx.data(), size_t(B) * 4096 * 4, cudaMemcpyHostToDevice));
  float* qr = static_cast<float*>(dalloc(size_t(B) * 1024 * 4));
  float* qn = static_cast<float*>(dalloc(size_t(B) * 1024 * 4));
  float* qf = static_cast<float*>(dalloc(size_t(B) * 32768 * 4));
  float* ob = upload(std::vector<float>(hx.begin(), hx.begin() + size_t(B) * 8192));
  float* yo = static_cast<float*>(dalloc(size_t(B) * 4096 * 4));
  uint8_t* q8 = static_cast<uint8_t*>(dalloc(size_t(B) * 8192));
  float* qs = static_cast<float*>(dalloc(size_t(B) * 64 * 4));
  void* ws = dalloc(std::max({dc::fp8_linear_workspace_bytes(B, 1024, 4096), dc::fp8_linear_workspace_bytes(B, 32768, 1024),
                              dc::fp8_linear_workspace_bytes(B, 4096, 8192)}));
  // attention inputs (random bf16 rows; q from a separate buffer: the fp32->bf16 q cast is not an op yet)
  std::vector<uint16_t> hb(size_t(B) * 640 * D);
  for (auto& v : hb) v = static_cast<uint16_t>(0x3c00 + (rand() & 0x7ff));
  uint16_t* rows = upload(hb);
  uint16_t* aq = upload(std::vector<uint16_t>(hb.begin(), hb.begin() + size_t(B) * H * D));
  uint16_t* ao = static_cast<uint16_t*>(dalloc(size_t(B) * H * D * 2));
  std::vector<int32_t> idx(size_t(B) * 512);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < 512; ++j) idx[size_t(b) * 512 + j] = b * 512 + j;
  int32_t* didx = upload(idx);
  int32_t* nw = upload(std::vector<int32_t>(B, 128));
  int32_t* ni = upload(std::vector<int32_t>(B, 512));
  int32_t* pos = upload(std::vector<int32_t>(B, 4095));
  float* sink = upload(std::vector<float>(64, 0.f));
  float* freq = upload(std::vector<float>(32, 0.01f));
  dc::DecodeAttnArgs a;
  a.q = aq, a.window = rows, a.n_window = nw, a.entries = rows + size_t(B) * 128 * D, a.index = didx, a.n_index = ni;
  a.index_stride = 512, a.sink = sink, a.pos = pos, a.inv_freq = freq, a.out = ao, a.batch = B, a.max_rows = 640;
  a.split_rows = 256;
  void* aws = dalloc(dc::decode_attention_workspace_bytes(a));
  auto step = [&](int) {
    OK(dc::quantize_act_fp8(x, false, B, 4096, q8, qs, g_stream));
    OK(dc::fp8_linear(q8, qs, B, {lins[0].w, lins[0].s, false, 1024, 4096}, qr, ws, g_stream));
    OK(dc::rms_norm(qr, B, 1024, nullptr, 1e-6f, qn, g_stream));
    OK(dc::quantize_act_fp8(qn, false, B, 1024, q8, qs, g_stream));
    OK(dc::fp8_linear(q8, qs, B, {lins[1].w, lins[1].s, false, 32768, 1024}, qf, ws, g_stream));
    OK(dc::decode_attention(a, aws, g_stream));
    OK(dc::quantize_act_fp8(ob, false, B, 8192, q8, qs, g_stream));
    OK(dc::fp8_linear(q8, qs, B, {lins[2].w, lins[2].s, false, 4096, 8192}, yo, ws, g_stream));
  };
  const double eager = time_graph(50, step, false);
  const double graph = time_graph(50, step, true);
  double bytes = 0;
  for (auto& l : lins) bytes += double(l.n) * l.k;
  bytes += double(B) * 640 * D * 2;
  for (int g = 0; g < 2; ++g) {
    Row r;
    r.op = g ? "decode_seq/graph" : "decode_seq/eager";
    r.shape = "8 ops";
    r.m = B;
    r.ms = g ? graph : eager;
    r.bytes = bytes;
    r.note = g ? "one graph launch per step" : "one launch per op";
    report(r);
  }
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
  std::fprintf(f, " \"ceilings\": {\"copy_GBps\": %.1f, \"fp8_dense_gemm_TFLOPs\": %.1f},\n", g_bw / 1e9, g_fp8_peak / 1e12);
  std::fprintf(f, " \"rows\": [\n");
  for (size_t i = 0; i < g_rows.size(); ++i) {
    const Row& r = g_rows[i];
    const double floor_s = floor_of(r);
    std::fprintf(f,
                 "  {\"op\": \"%s\", \"shape\": \"%s\", \"M\": %lld, \"time_us\": %.3f, \"bytes\": %.0f, \"GBps\": %.1f, "
                 "\"TFLOPs\": %.2f, \"floor_us\": %.3f, \"floor_ratio\": %.3f, \"note\": \"%s\"}%s\n",
                 r.op.c_str(), r.shape.c_str(), r.m, r.ms * 1e3, r.bytes, r.bytes / (r.ms * 1e-3) / 1e9,
                 r.flops / (r.ms * 1e-3) / 1e12, floor_s * 1e6, floor_s > 0 ? r.ms * 1e-3 / floor_s : 0.0, r.note.c_str(),
                 i + 1 < g_rows.size() ? "," : "");
  }
  std::fprintf(f, " ]}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (!dc::device_available()) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  const char* out = argc > 1 ? argv[1] : "cuda-attn-lt.json";
  const char* rev = argc > 2 ? argv[2] : "unknown";
  CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  // NO_CEILINGS=1: skip the copy and FP8 GEMM ceilings (e.g. under compute-sanitizer, where the
  // 8192^3 GEMM would take minutes); rows then have no floor.
  if (!std::getenv("NO_CEILINGS")) measure_ceilings();
  // ATTN_CASE=B:N_CMP:SPLIT: that one wgmma attention shape only (e.g. under Nsight Compute).
  if (const char* c = std::getenv("ATTN_CASE")) {
    int b = 0, n = 0, split = 0;
    if (std::sscanf(c, "%d:%d:%d", &b, &n, &split) != 3 || b <= 0 || n < 0 || split <= 0 || split % 64) {
      std::fprintf(stderr, "ATTN_CASE: want B:N_CMP:SPLIT (SPLIT a multiple of 64), got '%s'\n", c);
      return 2;
    }
    bench_attention(b, n, {split}, true);
    return 0;
  }
  const std::vector<int> ms = {512, 1024, 2048, 4096, 8192};
  if (!std::getenv("SKIP_LT")) {  // SKIP_LT=1: attention and the decode sequence only
    bench_lt(4096, 8192, ms);
    bench_lt(2048, 4096, ms);
  }
  // The default mode's large launches on the warpgroup-MMA kernel: the EP step's shape (batch 256,
  // context 512: 128 window + 128 compressed rows) and context 4k's (+ the indexer's 512).
  // And one block alone, then one per SM, each over 10 tiles (one split of 640 rows): a tile's
  // latency with the GPU idle and with every SM loading.
  for (bool wg : {false, true}) {
    bench_attention(256, 128, {256}, wg);
    bench_attention(128, 512, {256}, wg);
    bench_attention(1, 512, {1024}, wg);
    bench_attention(132, 512, {1024}, wg);
  }
  for (int B : {1, 32, 128}) bench_attention(B, 512, {128, 256, 512, 1024});
  for (int B : {1, 32}) bench_sequence(B);
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  write_json(out, rev, cmd);
  std::printf("wrote %s\n", out);
  return 0;
}
