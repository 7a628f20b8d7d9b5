// The cuBLASLt handle and plan cache shared by the cuBLASLt GEMMs of the CUDA op set (fp8_lt.cu:
// FP8 block-scaled, model_ops.cu: bf16). One handle per process; a plan (descriptors + the
// heuristic's first algorithm) per (kind, M, N, K, out type), so a shape always runs the same
// algorithm (or, asked for, the fastest of its candidates timed once). Host code only; never
// included outside backend/cuda.
#pragma once

#include <cublasLt.h>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_common.cuh"

namespace deepinfer::cuda::detail {

/// Workspace every cuBLASLt GEMM here may use (fp8_linear_lt_workspace_bytes()).
constexpr size_t kLtWorkspace = size_t(32) << 20;

struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

enum class LtKind : int { kFp8Block = 0, kBf16 = 1, kFp8BlockTimed = 2 };
using LtKey = std::tuple<int, int64_t, int64_t, int64_t, bool>;  // kind, M, N, K, y_bf16

struct LtCache {
  std::mutex mu;  // held by the caller around lt_get_plan and the matmul that uses the plan
  cublasLtHandle_t handle = nullptr;
  std::map<LtKey, LtPlan> plans;
};

/// The process's cache, created on first use and never destroyed (at exit the driver may be gone).
inline LtCache& lt_cache() {
  static LtCache* c = new LtCache;
  return *c;
}

inline bool lt_fail(const char* who, const char* what, cublasStatus_t st) {
  return fail(std::string(who) + ": " + what + " (cublas status " + std::to_string(int(st)) + ")");
}

inline void lt_destroy(LtPlan& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  p = LtPlan{};
}

/// Times one algorithm of a plan on the caller's operands: ms, or < 0 where it cannot (it failed,
/// or the stream is being captured).
using LtTimer = std::function<float(const LtPlan&, const cublasLtMatmulAlgo_t&)>;

/// Splits of K tried beside each timed candidate that runs unsplit (lt_with_splits).
inline constexpr uint32_t kLtSplits[] = {2, 3, 4, 6, 8};

/// `algo` and, where it supports a split of K and runs unsplit, its variants split kLtSplits ways
/// with the partial sums reduced in a workspace (compute type, else output type: never in place,
/// whose order of additions is not fixed), each kept only where cublasLtMatmulAlgoCheck accepts it
/// within kLtWorkspace. At a decode batch's rows (8-66 CTAs at 128 x 128 tiles for the 1-8 MB
/// weights) the heuristic's candidates leave most SMs idle; a split of K fills them.
inline void lt_with_splits(cublasLtHandle_t h, const LtPlan& p, const cublasLtMatmulAlgo_t& algo,
                           std::vector<cublasLtMatmulAlgo_t>& out) {
  out.push_back(algo);
  int32_t can = 0;
  uint32_t cur = 1, schemes = 0;
  size_t n = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &can, sizeof(can), &n) !=
          CUBLAS_STATUS_SUCCESS || !can)
    return;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &cur, sizeof(cur), &n) !=
          CUBLAS_STATUS_SUCCESS || cur > 1)
    return;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes),
                                        &n) != CUBLAS_STATUS_SUCCESS)
    return;
  const uint32_t scheme = (schemes & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)  ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                          : (schemes & CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE) ? CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE
                                                                              : 0u;
  if (!scheme) return;
  for (uint32_t k : kLtSplits) {
    cublasLtMatmulAlgo_t v = algo;
    cublasLtMatmulHeuristicResult_t r{};
    if (cublasLtMatmulAlgoConfigSetAttribute(&v, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &k, sizeof(k)) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoConfigSetAttribute(&v, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme)) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoCheck(h, p.desc, p.a, p.b, p.d, p.d, &v, &r) == CUBLAS_STATUS_SUCCESS &&
        r.workspaceSize <= kLtWorkspace)
      out.push_back(v);
  }
}

/// The configuration of a plan's algorithm in words ("tile 20 stages 8 split 4"): what the bench
/// prints beside a timed shape.
inline std::string lt_algo_text(const cublasLtMatmulAlgo_t& a) {
  uint32_t tile = 0, stages = 0, split = 1;
  size_t n = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof(split), &n);
  return "tile " + std::to_string(tile) + " stages " + std::to_string(stages) + " split " + std::to_string(split);
}

/// With c.mu held: the cached plan of `key`, or a new one: build(LtPlan&) -> cublasStatus_t creates
/// the descriptor and the a, b, d layouts, then the heuristic picks the algorithm (D = C layout,
/// workspace kLtWorkspace): its first, or with `timer` the fastest of its candidates and their
/// splits of K (lt_with_splits) as timed (the first where none could be). On failure whatever was
/// built is destroyed and `who`'s message is set.
template <class Build>
bool lt_get_plan(LtCache& c, const LtKey& key, const char* who, Build&& build, LtPlan** out,
                 const LtTimer* timer = nullptr) {
  auto it = c.plans.find(key);
  if (it != c.plans.end()) {
    *out = &it->second;
    return true;
  }
  cublasStatus_t st;
  if (!c.handle && (st = cublasLtCreate(&c.handle)) != CUBLAS_STATUS_SUCCESS) return lt_fail(who, "cublasLtCreate", st);
  LtPlan p;
  if ((st = build(p)) != CUBLAS_STATUS_SUCCESS) {
    lt_destroy(p);
    return lt_fail(who, "descriptors", st);
  }
  cublasLtMatmulPreference_t pref;
  if ((st = cublasLtMatmulPreferenceCreate(&pref)) != CUBLAS_STATUS_SUCCESS) {
    lt_destroy(p);
    return lt_fail(who, "preference", st);
  }
  const size_t ws = kLtWorkspace;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  constexpr int kCandidates = 16;
  cublasLtMatmulHeuristicResult_t res[kCandidates] = {};
  int found = 0;
  st = cublasLtMatmulAlgoGetHeuristic(c.handle, p.desc, p.a, p.b, p.d, p.d, pref, timer ? kCandidates : 8, res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    lt_destroy(p);
    return fail(std::string(who) + ": no cuBLASLt algorithm for M=" + std::to_string(std::get<1>(key)) +
                " N=" + std::to_string(std::get<2>(key)) + " K=" + std::to_string(std::get<3>(key)) +
                (std::get<4>(key) ? " (bf16 out)" : " (fp32 out)") + ", status " + std::to_string(int(st)));
  }
  p.algo = res[0].algo;
  if (timer) {
    std::vector<cublasLtMatmulAlgo_t> cand;
    for (int i = 0; i < found; ++i) lt_with_splits(c.handle, p, res[i].algo, cand);
    float best = -1.f;
    for (const auto& a : cand) {
      const float ms = cand.size() > 1 ? (*timer)(p, a) : -1.f;
      if (ms >= 0.f && (best < 0.f || ms < best)) best = ms, p.algo = a;
    }
  }
  *out = &(c.plans[key] = p);
  return true;
}

}  // namespace deepinfer::cuda::detail
