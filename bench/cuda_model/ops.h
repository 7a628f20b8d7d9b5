// The run context of the bench (streams, per-lane workspaces, the op-class marker, measured
// floors) and the two linear helpers decode and prefill share: an FP8 block-scaled dense linear
// (activation quantisation + GEMM; cuBLASLt at M >= 32, the split-K kernel below or when
// cuBLASLt has no algorithm) and a bf16 linear through cuBLASLt.
#pragma once

#include <set>
#include <tuple>

#include "weights.h"

namespace deepinfer::bench {

struct Ctx {
  Streams st;
  Marker marker;
  Arena arena;                          // workspaces sized for the largest shapes
  void* lt_ws[Streams::kSide + 1] = {};  // cuBLASLt workspace per lane (0 = main)
  void* sk_ws[Streams::kSide + 1] = {};  // split-K workspace per lane
  size_t sk_bytes = 0;
  double copy_Bps = 0, fp8_flops = 0;   // measured floors
  std::set<std::tuple<int64_t, int64_t, int64_t>> lt_missing;  // (M, N, K) cuBLASLt refused
  void init(int64_t max_m);
  void mark(const char* label) { marker.mark(label); }
  int lane_index(int lane) const { return st.serial ? 0 : lane + 1; }
};

/// y[M, N] fp32 = x[M, K] . W^T; x fp32 (or bf16 when x_bf16). q8 [M, K] and qs [M, K/128]
/// scratch. lane -1 = main stream, 0..7 = side streams.
void fp8_dense(Ctx& c, int lane, const void* x, bool x_bf16, int64_t M, const Fp8Lin& W, uint8_t* q8, float* qs,
               float* y);
/// y[M, N] (fp32) = x[M, K] bf16 . W^T (bf16) on the lane's stream. Should cuBLASLt have no
/// plan for M < kBf16MinRows, the call is retried with kBf16MinRows rows: x and y must have room
/// for that many rows (the extra rows' outputs are garbage).
constexpr int kBf16MinRows = 16;
void bf16_dense(Ctx& c, int lane, const uint16_t* x, int64_t M, const Bf16Lin& W, float* y);

}  // namespace deepinfer::bench
