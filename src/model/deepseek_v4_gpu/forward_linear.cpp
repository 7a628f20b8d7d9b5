// Forward's linear layers: FP8 block-scaled (the mma.sync GEMV, the wgmma decode linear, cuBLASLt
// or the tiled kernel, by rows and mode) and bf16 (cuBLASLt), on the main stream or a side lane.
#include <algorithm>
#include <limits>
#include <tuple>

#include "backend/cuda/model_ops.h"
#include "model/deepseek_v4_gpu/forward.h"
#include "model/deepseek_v4_gpu/forward_slots.h"

namespace deepinfer::v4gpu {

namespace dc = deepinfer::cuda;
using namespace fwd;

Forward::Packed Forward::Packed::rows_from(int64_t o, int64_t K) const {
  Packed r;
  r.rows = rows - o;
  if (q8 && !qs_t) r.q8 = q8 + o * K, r.qs = qs + o * (K / 128);
  if (x16 && x16_rows > o) r.x16 = x16 + o * K, r.x16_rows = x16_rows - o;
  return r;
}

bool Forward::fp8_on_lt(int64_t M, int64_t N, int64_t K, bool y_bf16) const {
  return !fp8_wgmma_for(M, N) && !c_.numerics.batch_invariant && M >= kLtMinRows &&
         !lt_missing_.count(std::make_tuple(M, N, K, y_bf16));
}

Status Forward::norm_pack(const float* x, int64_t T, int64_t K, const float* w, float* y, int64_t n_out, bool fp8,
                          bool bf16, const int (&slots)[3], Packed& p) {
  const float eps = static_cast<float>(c_.rms_eps);
  DI_ASSIGN_OR_RETURN(const bool packs, pack_buffers(T, K, n_out, fp8, bf16, slots, p));
  if (!packs) {
    DI_CUDA_TRY(dc::rms_norm(x, T, K, w, eps, y, stream_));
    return Status::ok();
  }
  DI_CUDA_TRY(dc::rms_norm_pack(x, T, K, w, eps, y, const_cast<uint8_t*>(p.q8), const_cast<float*>(p.qs), p.qs_t,
                                const_cast<uint16_t*>(p.x16), stream_));
  return Status::ok();
}

Result<bool> Forward::pack_buffers(int64_t T, int64_t K, int64_t n_out, bool fp8, bool bf16, const int (&slots)[3],
                                   Packed& p) {
  p = {};
  p.rows = T;
  if (!tuning_.act_pack || K % 128 || (!fp8 && !bf16)) return false;
  uint8_t* q8 = nullptr;
  float* qs = nullptr;
  uint16_t* x16 = nullptr;
  if (fp8) {
    DI_ASSIGN_OR_RETURN(q8, buf<uint8_t>(slots[0], T * K));
    DI_ASSIGN_OR_RETURN(qs, buf<float>(slots[1], T * K / 128));
    p.q8 = q8, p.qs = qs, p.qs_t = fp8_on_lt(T, n_out, K);
  }
  if (bf16) {  // room for the pad rows of any bf16 call (kBf16MinRows, or kBiRows per call)
    p.x16_rows = (T + kBiRows - 1) / kBiRows * kBiRows + std::max(kBiRows, kBf16MinRows);
    DI_ASSIGN_OR_RETURN(x16, buf<uint16_t>(slots[2], p.x16_rows * K));
    p.x16 = x16;
  }
  return true;
}

Status Forward::linear(const void* x, bool x_bf16, int64_t M, const GpuLinear& W, int64_t r0, int64_t rows, float* y,
                       int lane, const Packed* p, bool* y_bf16) {
  void* const s = st(lane);
  if (y_bf16) *y_bf16 = false;
  if (M <= 0) return Status::ok();
  const int64_t K = W.k;
  if (W.fp8) {
    const dc::Fp8Weight w = W.fp8_rows(r0, rows);
    // x as e4m3 rows with scales in the layout asked for: the packed ones, or quantised here.
    using Quantised = std::pair<const uint8_t*, const float*>;
    auto quantised = [&](bool scales_t) -> Result<Quantised> {
      if (p && p->q8 && p->qs_t == scales_t && M <= p->rows && (!scales_t || M == p->rows)) return Quantised(p->q8, p->qs);
      DI_ASSIGN_OR_RETURN(uint8_t* q8, buf<uint8_t>(ls(kQ8, lane), M * K));
      DI_ASSIGN_OR_RETURN(float* qs, buf<float>(ls(kQs, lane), M * K / 128));
      if (scales_t) {
        DI_CUDA_TRY(dc::quantize_act_fp8_t(x, x_bf16, M, K, q8, qs, s));
      } else {
        DI_CUDA_TRY(dc::quantize_act_fp8(x, x_bf16, M, K, q8, qs, s));
      }
      return Quantised(q8, qs);
    };
    if (fp8_wgmma_for(M, rows)) {
      DI_ASSIGN_OR_RETURN(const auto xq, quantised(false));
      DI_CUDA_TRY(dc::fp8_linear_wgmma(xq.first, xq.second, M, w, y, s));
      return Status::ok();
    }
    if (fp8_on_lt(M, rows, K)) {
      // cuBLASLt's block-scaled FP8 GEMM (its algorithm, so a row's bits, may change with M); no
      // plan for the shape: our kernels from now on (linear_lt_packed records it)
      DI_ASSIGN_OR_RETURN(const auto xq, quantised(true));
      Packed pq;
      pq.q8 = xq.first, pq.qs = xq.second, pq.qs_t = true, pq.rows = M;
      if (y_bf16) {
        DI_ASSIGN_OR_RETURN(*y_bf16, linear_lt_packed(pq, M, W, r0, rows, y, lane, true));
        if (*y_bf16) return Status::ok();
      }
      DI_ASSIGN_OR_RETURN(const bool done, linear_lt_packed(pq, M, W, r0, rows, y, lane));
      if (done) return Status::ok();
    }
    DI_ASSIGN_OR_RETURN(const auto xq, quantised(false));
    if (c_.numerics.batch_invariant) {  // one kernel at every M: a row's sum order never changes
      DI_CUDA_TRY(dc::fp8_linear_tiled(xq.first, xq.second, M, w, y, s));
    } else {
      const size_t ws_bytes = std::max<size_t>(dc::fp8_linear_workspace_bytes(M, rows, K), 16);
      DI_ASSIGN_OR_RETURN(void* ws, scratch_.get(ls(kFp8Ws, lane), ws_bytes));
      DI_CUDA_TRY(dc::fp8_linear(xq.first, xq.second, M, w, y, ws, s));
    }
    return Status::ok();
  }
  return linear_bf16(x, x_bf16, M, W, r0, rows, y, lane, p);
}

bool Forward::grouped_wgmma(int64_t M, const GpuLinear& W, int64_t G) const {
  // Past the decode rows, the wgmma kernel per 128 rows still beats cuBLASLt's G calls (each
  // about 15 us at any size, op bench fp8mid, H200).
  return fp8_wgmma_for(M, W.n / G) || (M > kWgmmaMaxRows && M <= kGroupedWgmmaMaxRows &&
                                       fp8_wgmma_for(std::max<int64_t>(kWgmmaMinRows, tuning_.fp8_wgmma_rows), 0));
}

bool Forward::grouped_applies(int64_t M, const GpuLinear& W, int64_t G) const {
  // cuBLASLt's block-scaled FP8 GEMM takes no row stride here (no algorithm for x or y as column
  // blocks of wider rows, measured on the H200), so past the decode kernels the caller's per-group path.
  return W.fp8 && !c_.numerics.batch_invariant && M > 0 && (M < kLtMinRows || grouped_wgmma(M, W, G));
}

Result<std::pair<uint8_t*, float*>> Forward::grouped_input(int64_t M, const GpuLinear& W, int64_t G) {
  DI_ASSIGN_OR_RETURN(uint8_t* q8, buf<uint8_t>(kQ8, M * G * W.k));
  DI_ASSIGN_OR_RETURN(float* qs, buf<float>(kQs, M * G * W.k / 128));
  return std::pair<uint8_t*, float*>{q8, qs};
}

Result<bool> Forward::linear_grouped(const uint16_t* x, int64_t M, const GpuLinear& W, int64_t G, float* y,
                                     bool x_quantised) {
  if (!grouped_applies(M, W, G)) return false;
  const int64_t K = W.k;
  DI_ASSIGN_OR_RETURN(const auto xq, grouped_input(M, W, G));
  const auto [q8, qs] = xq;
  if (!x_quantised) DI_CUDA_TRY(dc::quantize_act_fp8(x, true, M, G * K, q8, qs, stream_));
  const dc::Fp8Weight w = W.fp8_rows(0, W.n);
  const int g = static_cast<int>(G);
  if (!grouped_wgmma(M, W, G)) {
    DI_CUDA_TRY(dc::fp8_linear_grouped_skinny(q8, qs, M, w, g, y, stream_));
    return true;
  }
  for (int64_t m0 = 0; m0 < M; m0 += dc::kFp8WgmmaMaxRows) {  // rows are independent: x, scales, y by row
    const int64_t m = std::min(dc::kFp8WgmmaMaxRows, M - m0);
    DI_CUDA_TRY(dc::fp8_linear_grouped_wgmma(q8 + m0 * G * K, qs + m0 * G * K / 128, m, w, g, y + m0 * W.n, stream_));
  }
  return true;
}

Result<bool> Forward::linear_lt_packed(const Packed& p, int64_t M, const GpuLinear& W, int64_t r0, int64_t rows,
                                       void* y, int lane, bool y_bf16) {
  if (!W.fp8 || !p.q8 || !p.qs_t || p.rows != M || !fp8_on_lt(M, rows, W.k, y_bf16)) return false;
  DI_ASSIGN_OR_RETURN(void* lws, scratch_.get(ls(kLtWs, lane), dc::fp8_linear_lt_workspace_bytes()));
  const bool timed = tuning_.lt_timed && M <= kLtTimedMaxRows;
  if (dc::fp8_linear_lt(p.q8, p.qs, M, W.lt_rows(r0, rows), y, y_bf16, lws, st(lane), timed)) return true;
  lt_missing_.insert(std::make_tuple(M, rows, W.k, y_bf16));  // no plan for this shape: our kernels from now on
  return false;
}

Result<bool> Forward::grouped_out_lt(const uint16_t* x, int64_t T, const GpuLayer& L, int64_t G, float* y_groups,
                                     Packed& wo_b_in) {
  const GpuLinear &A = L.wo_a, &B = L.wo_b;
  const int64_t K = A.k, N = A.n / G;
  if (!tuning_.act_pack || !A.fp8 || !B.fp8 || B.k != G * N || N % 128 || !fp8_on_lt(T, N, K) ||
      !fp8_on_lt(T, B.n, B.k))
    return false;
  DI_ASSIGN_OR_RETURN(uint8_t* q8, buf<uint8_t>(kWoaQ8, T * G * K));
  DI_ASSIGN_OR_RETURN(float* qs, buf<float>(kWoaQs, T * G * K / 128));
  DI_CUDA_TRY(dc::quantize_act_fp8_t_grouped(x, true, T, G * K, K, false, q8, qs, stream_));
  // The G group GEMMs (o_lora_rank rows each: a few dozen CTAs) over the main stream and the side
  // lanes, each with its own workspace; joined before wo_b. A missing plan stops here (the
  // caller's path then runs every group again).
  bool all = true;
  DI_TRY(fork(kWoLanes));
  for (int64_t g = 0; g < G && all; ++g) {
    const int lane = static_cast<int>(g % (kWoLanes + 1)) - 1;
    Packed pg;
    pg.q8 = q8 + g * T * K, pg.qs = qs + g * (K / 128) * T, pg.qs_t = true, pg.rows = T;
    DI_ASSIGN_OR_RETURN(all, linear_lt_packed(pg, T, A, g * N, N, y_groups + g * T * N, lane));
  }
  DI_TRY(join(kWoLanes));
  if (!all) return false;
  DI_ASSIGN_OR_RETURN(uint8_t* b8, buf<uint8_t>(kWobQ8, T * B.k));
  DI_ASSIGN_OR_RETURN(float* bs, buf<float>(kWobQs, T * B.k / 128));
  DI_CUDA_TRY(dc::quantize_act_fp8_t_grouped(y_groups, false, T, B.k, N, true, b8, bs, stream_));
  wo_b_in = {};
  wo_b_in.q8 = b8, wo_b_in.qs = bs, wo_b_in.qs_t = true, wo_b_in.rows = T;
  return true;
}

bool Forward::fp8_wgmma_for(int64_t M, int64_t N) const {
  const int64_t lo = tuning_.fp8_wgmma_rows > 0 ? tuning_.fp8_wgmma_rows : kWgmmaMinRows;
  const int64_t hi = tuning_.fp8_wgmma_max_rows > 0 ? tuning_.fp8_wgmma_max_rows : kWgmmaMaxRows;
  if (c_.numerics.batch_invariant || tuning_.fp8_wgmma_rows < 0 || M < lo || M > hi) return false;
  // up to kWgmmaMaxRows cuBLASLt keeps N = 4096 from 33 rows; past it (the knob's rows) every N
  return M > kWgmmaMaxRows || M <= kLtMinRows || N != kWgmmaLtN;
}

// bf16 GEMM (cuBLASLt) in calls of `call` rows: all M at once (at least kBf16MinRows, so small M
// always finds a plan), or in batch-invariant mode exactly kBiRows per call, so cuBLASLt sees one
// shape and picks one algorithm whatever M is. A short call is padded; pad rows' outputs dropped.
Status Forward::linear_bf16(const void* x, bool x_bf16, int64_t M, const GpuLinear& W, int64_t r0, int64_t rows,
                            float* y, int lane, const Packed* p) {
  void* const s = st(lane);
  const int64_t K = W.k;
  const int64_t call = c_.numerics.batch_invariant ? kBiRows : std::max(M, kBf16MinRows);
  const uint16_t* wp = W.data.as<uint16_t>() + r0 * K;
  // A few rows (decode), default mode: the GEMV kernel (its own sum order; batch-invariant mode keeps
  // the one GEMM shape that prefill uses too). At 1-4 rows any width (the head: its first wave's
  // weights stream during the last layer's tail; measured -3% / -4% / -2% a step at batch 1 / 2 / 4;
  // at 8 rows it was 12% slower than cuBLASLt's on an H200, 3% on an H100, and two columns a warp
  // did not mend it).
  const int64_t gemv_n = tuning_.bf16_gemv_max_n != 0 ? tuning_.bf16_gemv_max_n
                         : M <= kBf16GemvAnyNRows    ? std::numeric_limits<int64_t>::max()
                                                     : kBf16GemvMaxN;
  if (!c_.numerics.batch_invariant && dc::bf16_gemv_fits(M, K) && rows <= gemv_n) {
    const uint16_t* xb = static_cast<const uint16_t*>(x);
    if (!x_bf16) {
      if (p && p->x16 && p->x16_rows >= M) {
        xb = p->x16;
      } else {
        DI_ASSIGN_OR_RETURN(uint16_t* xc, buf<uint16_t>(ls(kX16, lane), M * K));
        DI_CUDA_TRY(dc::cast_f32_to_bf16(static_cast<const float*>(x), M, K, xc, K, s));
        xb = xc;
      }
    }
    DI_CUDA_TRY(dc::bf16_gemv(xb, M, wp, rows, K, y, s));
    return Status::ok();
  }
  DI_ASSIGN_OR_RETURN(void* ws, scratch_.get(ls(kLtWs, lane), dc::fp8_linear_lt_workspace_bytes()));
  for (int64_t m0 = 0; m0 < M; m0 += call) {
    const int64_t m = std::min(call, M - m0);
    const uint16_t* xc = static_cast<const uint16_t*>(x) + m0 * K;  // used as is when bf16 and full
    if (!x_bf16 && p && p->x16 && p->x16_rows >= m0 + call) {
      xc = p->x16 + m0 * K;  // the packed bf16 rows (the pad rows' outputs are dropped below)
    } else if (!x_bf16 || m != call) {
      DI_ASSIGN_OR_RETURN(uint16_t* xb, buf<uint16_t>(ls(kX16, lane), call * K));
      if (x_bf16) {
        DI_CUDA_TRY(dc::copy_device_to_device(xb, xc, static_cast<size_t>(m * K) * 2, s));
      } else {
        DI_CUDA_TRY(dc::cast_f32_to_bf16(static_cast<const float*>(x) + m0 * K, m, K, xb, K, s));
      }
      xc = xb;
    }
    float* yc = y + m0 * rows;
    if (m != call) {
      DI_ASSIGN_OR_RETURN(yc, buf<float>(ls(kYPad, lane), call * rows));
    }
    DI_CUDA_TRY(dc::bf16_linear_lt(xc, call, wp, rows, K, yc, false, ws, s));
    if (m != call)
      DI_CUDA_TRY(dc::copy_device_to_device(y + m0 * rows, yc, static_cast<size_t>(m * rows) * 4, s));
  }
  return Status::ok();
}

}  // namespace deepinfer::v4gpu
