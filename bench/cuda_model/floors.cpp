#include "floors.h"

#include <algorithm>

#include "backend/cuda/layer_ops.h"

namespace deepinfer::bench {
namespace {

/// Best (smallest) event time in ms of `reps` runs of body on s, after one warm-up run.
template <class F>
float best_ms(cudaStream_t s, int reps, F body) {
  body();
  DI_CK(cudaStreamSynchronize(s));
  cudaEvent_t e0, e1;
  DI_CK(cudaEventCreate(&e0));
  DI_CK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int r = 0; r < reps; ++r) {
    DI_CK(cudaEventRecord(e0, s));
    body();
    DI_CK(cudaEventRecord(e1, s));
    DI_CK(cudaEventSynchronize(e1));
    float t = 0;
    DI_CK(cudaEventElapsedTime(&t, e0, e1));
    best = std::min(best, t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return best;
}

}  // namespace

double measure_copy_bandwidth(cudaStream_t s, int reps) {
  const size_t n = size_t(2) << 30;
  Arena ar;
  void* x = ar.alloc(n);
  void* y = ar.alloc(n);
  DI_OK(dc::fill_random_bytes(x, n, 3, s));
  const float ms = best_ms(s, reps, [&] { DI_CK(cudaMemcpyAsync(y, x, n, cudaMemcpyDeviceToDevice, s)); });
  return 2.0 * double(n) / (ms * 1e-3);
}

double measure_fp8_rate(Ctx& c, int reps) {
  const int64_t n = 8192;
  cudaStream_t s = c.st.main;
  Arena ar;
  dc::Fp8Weight w;
  auto* wd = ar.take<uint8_t>(n * n);
  auto* ws = ar.take<uint8_t>((n / 128) * (n / 128));
  auto* wf = ar.take<float>((n / 128) * (n / 128));
  DI_OK(dc::fill_random(wd, n * n, dc::RandomKind::kE4M3, 1.f, 0.f, 11, s));
  DI_OK(dc::fill_random(ws, (n / 128) * (n / 128), dc::RandomKind::kE8M0, 120, 122, 12, s));
  w.data = wd, w.scale = ws, w.n = n, w.k = n;
  DI_OK(dc::fp8_scales_to_f32(w, wf, s));
  w.scale = wf, w.scale_is_f32 = true;
  auto* x = ar.take<uint16_t>(n * n);
  DI_OK(dc::fill_random(x, n * n, dc::RandomKind::kBf16, 1.f, 0.f, 13, s));
  auto* q = ar.take<uint8_t>(n * n);
  auto* qs = ar.take<float>(n * n / 128);
  auto* y = ar.take<uint16_t>(n * n);
  DI_OK(dc::quantize_act_fp8_t(x, true, n, n, q, qs, s));
  const float ms = best_ms(s, reps, [&] { DI_OK(dc::fp8_linear_lt(q, qs, n, w, y, true, c.lt_ws[0], s)); });
  return 2.0 * double(n) * n * n / (ms * 1e-3);
}

}  // namespace deepinfer::bench
