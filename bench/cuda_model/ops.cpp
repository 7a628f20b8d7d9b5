#include "ops.h"

#include "backend/cuda/model_ops.h"

namespace deepinfer::bench {

void Ctx::init(int64_t max_m) {
  st.create();
  const int64_t shapes[][2] = {{kQLora, kD}, {int64_t(kHeads) * kHeadDim, kQLora}, {kHeadDim, kD},
                               {kORank, int64_t(kHeads) * kHeadDim / kOGroups}, {kD, int64_t(kOGroups) * kORank},
                               {2 * kInter, kD}, {kD, kInter}, {int64_t(kIdxHeads) * kIdxDim, kQLora}};
  for (auto& s : shapes)
    for (int64_t m = 1; m <= max_m; m = m < 64 ? m + 1 : m * 2) sk_bytes = std::max(sk_bytes, dc::fp8_linear_workspace_bytes(m, s[0], s[1]));
  for (int i = 0; i <= Streams::kSide; ++i) {
    lt_ws[i] = arena.alloc(dc::fp8_linear_lt_workspace_bytes());
    sk_ws[i] = arena.alloc(sk_bytes);
  }
}

void fp8_dense(Ctx& c, int lane, const void* x, bool x_bf16, int64_t M, const Fp8Lin& W, uint8_t* q8, float* qs,
               float* y) {
  cudaStream_t s = c.st.lane(lane);
  const int li = c.lane_index(lane);
  const auto key = std::make_tuple(M, W.w.n, W.w.k);
  if (M >= 32 && !c.lt_missing.count(key)) {
    DI_OK(dc::quantize_act_fp8_t(x, x_bf16, M, W.w.k, q8, qs, s));
    if (dc::fp8_linear_lt(q8, qs, M, W.lt(), y, false, c.lt_ws[li], s)) return;
    std::fprintf(stderr, "note: cuBLASLt FP8 has no plan for M=%lld N=%lld K=%lld (%s): split-K kernel\n",
                 (long long)M, (long long)W.w.n, (long long)W.w.k, dc::last_error().c_str());
    c.lt_missing.insert(key);
  }
  DI_OK(dc::quantize_act_fp8(x, x_bf16, M, W.w.k, q8, qs, s));
  DI_OK(dc::fp8_linear(q8, qs, M, W.w, y, c.sk_ws[li], s));
}

void bf16_dense(Ctx& c, int lane, const uint16_t* x, int64_t M, const Bf16Lin& W, float* y) {
  void* ws = c.lt_ws[c.lane_index(lane)];
  const auto key = std::make_tuple(-M, W.n, W.k);  // negative M: the bf16 entries of lt_missing
  if (M < kBf16MinRows && c.lt_missing.count(key)) M = kBf16MinRows;
  if (dc::bf16_linear_lt(x, M, W.w, W.n, W.k, y, false, ws, c.st.lane(lane))) return;
  if (M >= kBf16MinRows) fail("bf16_linear_lt", __FILE__, __LINE__, dc::last_error());
  std::fprintf(stderr, "note: cuBLASLt bf16 has no plan for M=%lld N=%lld K=%lld (%s): padded to %d rows\n",
               (long long)M, (long long)W.n, (long long)W.k, dc::last_error().c_str(), kBf16MinRows);
  c.lt_missing.insert(key);
  DI_OK(dc::bf16_linear_lt(x, kBf16MinRows, W.w, W.n, W.k, y, false, ws, c.st.lane(lane)));
}

}  // namespace deepinfer::bench
