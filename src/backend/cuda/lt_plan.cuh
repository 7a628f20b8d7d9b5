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

/// With c.mu held: the cached plan of `key`, or a new one: build(LtPlan&) -> cublasStatus_t creates
/// the descriptor and the a, b, d layouts, then the heuristic picks the algorithm (D = C layout,
/// workspace kLtWorkspace): its first, or with `timer` the fastest of its candidates as timed
/// (the first where none could be). On failure whatever was built is destroyed and `who`'s
/// message is set.
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
  float best = -1.f;
  for (int i = 0; timer && found > 1 && i < found; ++i) {
    const float ms = (*timer)(p, res[i].algo);
    if (ms >= 0.f && (best < 0.f || ms < best)) best = ms, p.algo = res[i].algo;
  }
  *out = &(c.plans[key] = p);
  return true;
}

}  // namespace deepinfer::cuda::detail
