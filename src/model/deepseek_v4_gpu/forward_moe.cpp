// Forward's MoE sub-layer: the shared expert on a side lane, the routed experts' route (learned
// top-k or hash), their groups and kernels (FP8 or f16 wgmma, wide or narrow) in chunks of tokens,
// and the combine with the mHC post.
#include <algorithm>
#include <limits>

#include "backend/cuda/layer_ops.h"
#include "backend/cuda/model_ops.h"
#include "backend/cuda/v4_ops.h"
#include "model/deepseek_v4/decode_floor.h"
#include "model/deepseek_v4_gpu/forward.h"
#include "model/deepseek_v4_gpu/forward_acts.h"
#include "model/deepseek_v4_gpu/forward_slots.h"

namespace deepinfer::v4gpu {

namespace dc = deepinfer::cuda;
namespace part = v4::part;  // the profile's part names (decode_floor.h)

using namespace fwd;

// The wide expert kernels (weights read once per group of up to 64 rows; 128 on wgmma) from
// tuning_.moe_wide_rows routed rows (tokens x top-k). Default: from 1 row where the layer's
// experts take the FP8 wgmma kernels (I, d % 256 == 0, scales foldable), else from 32. H100,
// 28c0f3d, op bench (w13 + SwiGLU + w2): 6 experts x 1 row FP8 on tiled weights 42.0 us against the
// narrow kernel's 59.1, 6 x 4 41.1 against 68.1, 24 x 1 120.4 against 189.8; the batch-1 step
// 1.215 -> 1.163 ms of device time, batch 4 1.706 -> 1.504. (The f16 wide kernels were behind the
// narrow one at 1 row per expert with few experts, so 32 stays theirs.) Never in batch-invariant
// mode, whose sums must not depend on how many rows the step has (the narrow kernel's per-row sum
// order is fixed).
int64_t Forward::wide_experts_from(const GpuLayer& L) const {
  if (c_.numerics.batch_invariant || tuning_.moe_wide_rows < 0) return std::numeric_limits<int64_t>::max();
  if (tuning_.moe_wide_rows > 0) return tuning_.moe_wide_rows;
  return fp8_experts(L) ? 1 : 32;
}

// Whether the routed experts fit the warpgroup-MMA kernels (K % 256: I and d), and whether the
// layer's can take their FP8 form (at groups of up to tuning_.moe_fp8_max_rows rows).
bool Forward::wgmma_experts() const { return tuning_.moe_wgmma && c_.moe_inter % 256 == 0 && c_.hidden % 256 == 0; }
bool Forward::fp8_experts(const GpuLayer& L) const {
  return wgmma_experts() && tuning_.moe_fp8 && L.experts_fp8_foldable;
}

Forward::MoeChunk Forward::moe_chunk(const GpuLayer& L, int64_t R) const {
  const int64_t E = c_.n_routed_experts;
  MoeChunk c;
  c.wide = R >= wide_experts_from(L);
  // The wide kernels on wgmma (op bench, git 17758f2: ahead of mma.sync at 3-192 rows per
  // expert, 1.03-1.44x), groups of 128 rows from 96 per expert (one block per SM), else 64;
  // where their shapes fit (K % 256: I and d), else the mma.sync ones.
  c.wg = c.wide && wgmma_experts();
  // Groups of gr rows (G, sized for 16, bounds every larger size too).
  c.gr = c.wg ? (R >= 96 * E ? 128 : 64)
       : c.wide ? 64
                : tuning_.moe_group_rows > 0 ? tuning_.moe_group_rows : dc::moe_group_rows();
  // FP8 (e4m3 rows per 128 as the reference, e2m1 folded into e4m3): op bench (H200, tiled
  // weights) 1.3x the f16 wgmma kernels at 6-24 rows per expert; 128-row groups (prefill) on
  // its one-block kernel.
  const int fp8_max_rows = tuning_.moe_fp8_max_rows > 0 ? tuning_.moe_fp8_max_rows : 128;
  c.fp8 = c.wide && fp8_experts(L) && c.gr <= fp8_max_rows;
  return c;
}

Result<Forward::MoeBufs> Forward::moe_bufs(const GpuLayer& L, int64_t T) {
  const int64_t d = c_.hidden, E = c_.n_routed_experts, k = c_.experts_per_tok;
  MoeBufs b;
  // Routed experts (MXFP4), in chunks of tokens: kMoeWideChunk where the wide kernels may run.
  b.from = wide_experts_from(L);
  b.can_wide = b.from != std::numeric_limits<int64_t>::max();
  b.Tm = std::min(T, b.can_wide ? kMoeWideChunk : kMoeChunk), b.Rm = b.Tm * k;
  // One chunk on the FP8 kernels with groups built in one block, below hc_pre's one-launch limit
  // (decode steps, short prefills): the norm's launch writes the experts' e4m3 rows, one per token,
  // and the w13 kernel reads each group row's token (moe_build_groups' row_token): no
  // moe_rows_fp8 launch between the routing and the experts, T rows quantised instead of T x k.
  b.rows_by_norm = tuning_.act_pack && b.Tm == T && T <= dc::kHcPreOneLaunchMaxT &&
                   b.Rm <= dc::moe_build_groups_max_slots() && moe_chunk(L, b.Rm).fp8;
  if (b.rows_by_norm) {
    DI_ASSIGN_OR_RETURN(b.row_token, buf<int32_t>(kRowTok, b.Rm));
  }
  const int G = dc::moe_max_groups(b.Tm, static_cast<int>(k), E);
  // Past moe_build_groups' one-block limit, moe_sort_tokens sorts the rows first.
  if (b.Rm > dc::moe_build_groups_max_slots()) {
    DI_ASSIGN_OR_RETURN(b.offsets, buf<int32_t>(kMoeOff, E + 1));
    DI_ASSIGN_OR_RETURN(b.sort_ws, scratch_.get(kSortWs, dc::moe_sort_tokens_workspace_bytes(b.Tm, k, E)));
  }
  DI_ASSIGN_OR_RETURN(b.lws, buf<float>(kLogitsWs, b.Tm * E));
  DI_ASSIGN_OR_RETURN(b.experts, buf<int32_t>(kExperts, b.Rm));
  DI_ASSIGN_OR_RETURN(b.wts, buf<float>(kWts, b.Rm));
  DI_ASSIGN_OR_RETURN(b.slot_pos, buf<int32_t>(kSlotPos, b.Rm));
  DI_ASSIGN_OR_RETURN(b.yp, buf<float>(kYp, b.Rm * d));
  DI_ASSIGN_OR_RETURN(b.g13, buf<dc::Mxfp4Group>(kG13, 2 * int64_t(G)));
  DI_ASSIGN_OR_RETURN(b.g2, buf<dc::Mxfp4Group>(kG2, G));
  return b;
}

Result<Forward::MoeBufs::Narrow> Forward::moe_narrow_rows(const MoeBufs& b, bool wide) {
  // The narrow kernels' fp32 rows (x, gate, up, activation); the wide ones use fp16 rows only.
  // With the wide kernels on, sized at once for every narrow chunk (below their threshold), so
  // they grow once: a workspace that moves drops the captured graphs.
  MoeBufs::Narrow r;
  if (wide) return r;
  const int64_t d = c_.hidden, I = c_.moe_inter, k = c_.experts_per_tok;
  const int64_t rows = !b.can_wide ? b.Rm : std::max(std::min(b.Rm, b.from), std::min<int64_t>(b.from, kMoeChunk * k));
  DI_ASSIGN_OR_RETURN(r.xp, buf<float>(kXp, rows * d));
  DI_ASSIGN_OR_RETURN(r.gp, buf<float>(kGp, rows * I));
  DI_ASSIGN_OR_RETURN(r.up, buf<float>(kUp, rows * I));
  DI_ASSIGN_OR_RETURN(r.ap, buf<float>(kAp, rows * I));
  return r;
}

Status Forward::moe_groups(const GpuLayer& L, const MoeBufs& b, int64_t n, void* s) {
  const int64_t E = c_.n_routed_experts;
  const int k = static_cast<int>(c_.experts_per_tok);
  const MoeChunk c = moe_chunk(L, n * k);
  DI_ASSIGN_OR_RETURN(const MoeBufs::Narrow r, moe_narrow_rows(b, c.wide));
  const bool sorted = n * k > dc::moe_build_groups_max_slots();
  if (sorted) DI_CUDA_TRY(dc::moe_sort_tokens(b.experts, n, k, E, b.offsets, b.slot_pos, b.sort_ws, s));
  DI_CUDA_TRY(dc::moe_build_groups(b.experts, n, k, E, L.expert_ptrs.as<dc::ExpertPtrs>(), r.xp, r.gp, r.up, r.ap, b.yp,
                                   c_.hidden, c_.moe_inter, dc::moe_max_groups(n, k, E, c.gr), b.slot_pos, b.g13, b.g2,
                                   s, c.gr, sorted ? b.offsets : nullptr, b.rows_by_norm ? b.row_token : nullptr));
  return Status::ok();
}

bool Forward::route_gemm_for(int64_t n) const {
  const int64_t rows = tuning_.route_gemm_rows != 0 ? tuning_.route_gemm_rows : kRouteGemmRows;
  return !c_.numerics.batch_invariant && rows >= 0 && n > rows;
}

bool Forward::hash_early(const GpuLayer& L, const MoeBufs& b, int64_t T) const {
  return L.hash && T <= kHashEarlyMaxT && b.rows_by_norm && !route_gemm_for(T) &&
         dc::hash_route_direct_fits(c_.hidden, static_cast<int>(c_.experts_per_tok));
}

Status Forward::moe_hash_early(const GpuLayer& L, Acts& a) {
  if (!L.hash || a.T > kHashEarlyMaxT) return Status::ok();  // (no buffer lookups for the rest)
  DI_ASSIGN_OR_RETURN(const MoeBufs b, moe_bufs(L, a.T));
  if (!hash_early(L, b, a.T)) return Status::ok();
  // After the last layer's combine (the main stream's work so far): its groups are consumed.
  DI_TRY(fork(1, kHashLane));
  DI_CUDA_TRY(dc::hash_route_direct(nullptr, a.T, c_.hidden, nullptr, a.ids, L.tid2eid.as<int32_t>(),
                                    static_cast<int>(c_.experts_per_tok), 0.f, b.experts, nullptr, st(kHashLane)));
  return moe_groups(L, b, a.T, st(kHashLane));
}

Status Forward::moe(const GpuLayer& L, const GpuHc* next_hc, Acts& a) {
  const int64_t T = a.T, d = c_.hidden, I = c_.moe_inter, E = c_.n_routed_experts;
  const int k = static_cast<int>(c_.experts_per_tok);
  const float limit = static_cast<float>(c_.swiglu_limit);
  const float scaling = static_cast<float>(c_.routed_scaling);
  DI_ASSIGN_OR_RETURN(const MoeBufs b, moe_bufs(L, T));
  const int64_t Tm = b.Tm, Rm = b.Rm;
  const bool rows_by_norm = b.rows_by_norm;
  int32_t *const experts = b.experts, *const slot_pos = b.slot_pos, *const row_token = b.row_token;
  float *const lws = b.lws, *const wts = b.wts, *const yp = b.yp;
  dc::Mxfp4Group *const g13 = b.g13, *const g2 = b.g2;
  SubNorm sub{L.ffn_norm.as<float>(), a.h, L.sh_w13.n, L.sh_w13.fp8, false, {kPackQ8, kPackQs, kPack16}, a.hp};
  if (rows_by_norm) {
    DI_ASSIGN_OR_RETURN(sub.qe, buf<uint8_t>(kXe8, T * d));
    DI_ASSIGN_OR_RETURN(sub.qes, buf<float>(kXes8, T * d / 128));
  }
  // A hash layer's experts and groups may come from moe_hash_early (lane kHashLane, launched before
  // the layer's attention); then only the weights read h: on lane 2, joined before the combine,
  // so w13 waits for hc_pre alone.
  const bool early = hash_early(L, b, T);
  DI_TRY(hc_pre_split(L.hc_ffn, a, sub));
  DI_TRY(mark(part::kMoePre));
  if (early) {
    DI_TRY(fork(1, 2));
    DI_CUDA_TRY(dc::hash_route_direct(a.h, T, d, L.gate.as<uint16_t>(), a.ids, L.tid2eid.as<int32_t>(), k, scaling,
                                      nullptr, wts, st(2)));
  }
  // Shared expert (FP8: w1 and w3 as one GEMM into [gate | up] rows, clamped SwiGLU, w2) on a side
  // stream, joined before the combine.
  DI_TRY(fork(1));
  DI_TRY(linear(a.h, T, L.sh_w13, a.sgu, 0, &a.hp));
  DI_CUDA_TRY(dc::swiglu(a.sgu, a.sgu + I, 2 * I, T, I, limit, a.sa, st(0)));
  DI_TRY(linear(a.sa, T, L.sh_w2, a.sy, 0));
  DI_TRY(mark(part::kMoeShared));
  for (int64_t t0 = 0; t0 < T; t0 += Tm) {
    const int64_t n = std::min(Tm, T - t0), R = n * k;
    const float* h = a.h + t0 * d;
    const auto [wide, wg, gr, fp8] = moe_chunk(L, R);
    const int gn = dc::moe_max_groups(n, k, E, gr);
    const int mm = static_cast<int>(std::min<int64_t>(n, gr));
    DI_ASSIGN_OR_RETURN(const MoeBufs::Narrow nr, moe_narrow_rows(b, wide));
    float *const xp = nr.xp, *const gp = nr.gp, *const up = nr.up, *const ap = nr.ap;
    // Hash layers: the router's logits only (hash_route's weights); tid2eid picks the experts.
    int32_t* const chosen = L.hash ? nullptr : experts;
    float* const chosen_wts = L.hash ? nullptr : wts;
    const bool route_gemm = route_gemm_for(n);
    // only the k picked logits, moe_route's bits
    const bool hash_direct = L.hash && !route_gemm && dc::hash_route_direct_fits(d, k);
    if (early) {
      DI_TRY(join(1, kHashLane));  // its groups
    } else if (hash_direct) {
      DI_CUDA_TRY(dc::hash_route_direct(h, n, d, L.gate.as<uint16_t>(), a.ids + t0, L.tid2eid.as<int32_t>(), k, scaling,
                                        experts, wts, stream_));
    } else if (route_gemm) {
      DI_ASSIGN_OR_RETURN(void* rws, scratch_.get(kRouteWs, dc::moe_route_gemm_workspace_bytes(n, d, E)));
      DI_CUDA_TRY(dc::moe_route_gemm(h, n, d, L.gate.as<uint16_t>(), E, L.bias.as<float>(), k, scaling, lws, chosen,
                                     chosen_wts, rws, stream_));
    } else {
      DI_CUDA_TRY(
          dc::moe_route(h, n, d, L.gate.as<uint16_t>(), E, L.bias.as<float>(), k, scaling, lws, chosen, chosen_wts, stream_));
    }
    if (L.hash && !hash_direct)
      DI_CUDA_TRY(dc::hash_route(lws, n, E, a.ids + t0, L.tid2eid.as<int32_t>(), k, scaling, experts, wts, stream_));
    if (!early) DI_TRY(moe_groups(L, b, n, stream_));
    const dc::Mxfp4Layout layout = L.experts_tiled ? dc::Mxfp4Layout::tiles64 : dc::Mxfp4Layout::rows;
    if (fp8) {
      DI_ASSIGN_OR_RETURN(float* a32, buf<float>(kA32, Rm * I));
      DI_ASSIGN_OR_RETURN(uint8_t* a8, buf<uint8_t>(kA8, Rm * I));
      DI_ASSIGN_OR_RETURN(float* as8, buf<float>(kAs8, Rm * I / 128));
      const int split = tuning_.moe_split_k;
      if (rows_by_norm) {
        DI_TRY(mark(part::kMoeRouting));
        DI_CUDA_TRY(dc::mxfp4_experts_w13_swiglu_fp8(g13, gn, mm, sub.qe, sub.qes, T, I, d, limit, a32, layout, stream_,
                                                     split, row_token));
      } else {
        DI_ASSIGN_OR_RETURN(uint8_t* x8, buf<uint8_t>(kX8, Rm * d));
        DI_ASSIGN_OR_RETURN(float* xs8, buf<float>(kXs8, Rm * d / 128));
        DI_CUDA_TRY(dc::moe_rows_fp8(h, n, k, d, slot_pos, x8, xs8, R, stream_));
        DI_TRY(mark(part::kMoeRouting));
        DI_CUDA_TRY(dc::mxfp4_experts_w13_swiglu_fp8(g13, gn, mm, x8, xs8, R, I, d, limit, a32, layout, stream_, split));
      }
      DI_CUDA_TRY(dc::moe_rows_fp8(a32, R, 1, I, nullptr, a8, as8, R, stream_));
      DI_CUDA_TRY(dc::mxfp4_experts_w2_fp8(g2, gn, mm, a8, as8, R, d, I, layout, stream_, split));
    } else if (wide) {  // fp16 rows, weights read once per 64-row group, SwiGLU fused into w1/w3
      DI_ASSIGN_OR_RETURN(uint16_t* xp16, buf<uint16_t>(kXp16, Rm * d));
      DI_ASSIGN_OR_RETURN(uint16_t* ap16, buf<uint16_t>(kAp16, Rm * I));
      DI_CUDA_TRY(dc::moe_permute_f16(h, n, k, d, slot_pos, xp16, stream_));
      DI_TRY(mark(part::kMoeRouting));
      if (wg) {  // warpgroup MMA, groups of up to 128 rows
        const dc::Mxfp4Scales fold =
            L.experts_foldable && !tuning_.moe_wgmma_exact ? dc::Mxfp4Scales::foldable : dc::Mxfp4Scales::any;
        DI_CUDA_TRY(dc::mxfp4_experts_w13_swiglu_wgmma(g13, gn, mm, xp16, I, d, limit, ap16, fold, layout, stream_));
        DI_CUDA_TRY(dc::mxfp4_experts_w2_wgmma(g2, gn, mm, ap16, d, I, fold, layout, stream_));
      } else {
        DI_CUDA_TRY(dc::mxfp4_experts_w13_swiglu(g13, gn, mm, xp16, I, d, limit, ap16, layout, stream_));
        DI_CUDA_TRY(dc::mxfp4_experts_w2(g2, gn, mm, ap16, d, I, layout, stream_));
      }
    } else {
      DI_CUDA_TRY(dc::moe_permute(h, n, k, d, slot_pos, xp, stream_));
      DI_TRY(mark(part::kMoeRouting));
      DI_CUDA_TRY(dc::mxfp4_linear_grouped(g13, 2 * gn, mm, I, d, layout, stream_));
      DI_CUDA_TRY(dc::swiglu(gp, up, I, R, I, limit, ap, stream_));
      DI_CUDA_TRY(dc::mxfp4_linear_grouped(g2, gn, mm, d, I, layout, stream_));
    }
    DI_TRY(mark(part::kMoeExperts));
    if (t0 == 0) {  // the shared expert's lane and the Sinkhorn's (and the early hash weights')
      DI_TRY(join(1));
      DI_TRY(join_comb(a));
      if (early) DI_TRY(join(1, 2));
    }
    // The combine and the mHC post in one pass over the chunk's tokens (their X rows are not read
    // again in this layer: the later chunks' experts read h).
    const int64_t nh = c_.hc_mult;
    // One chunk (decode): the next layer's hc_pre partials in the same launch.
    const std::optional<dc::HcNext> next = n == T ? hc_next(next_hc, a) : std::nullopt;
    DI_CUDA_TRY(dc::moe_combine_hc_post(yp, slot_pos, wts, a.sy + t0 * d, n, k, d, a.X + t0 * nh * d, a.post + t0 * nh,
                                        a.comb + t0 * nh * nh, stream_, next ? &*next : nullptr));
  }
  return mark(part::kMoeCombine);
}

}  // namespace deepinfer::v4gpu
