// Backend: where the model's ops run. The CPU backend is the readable reference, always built:
// fp32 math with a fixed reduction order per output element, threaded over output elements, so
// a row's result never depends on the other rows of the batch (batch invariance).
// The CUDA backend (issue D) implements the same op set on device buffers.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "core/thread_pool.h"
#include "tensor/weight.h"

namespace deepinfer {

struct BackendConfig {
  std::string device = "cpu";  // "cpu" (CUDA arrives with issue D)
  int num_threads = 0;         // 0: hardware concurrency
};

/// The op set of a V4 forward on host fp32 activations. Every op is row-independent.
class CpuOps {
 public:
  explicit CpuOps(ThreadPool& pool) : pool_(pool) {}
  ThreadPool& pool() { return pool_; }

  /// y[i, r - r0] = x[i, :] . W[r, :] for r in [r0, r1). x is [n, ldx], y is [n, ldy].
  void linear(const float* x, int64_t n, int64_t ldx, const Weight& w, int64_t r0, int64_t r1, float* y,
              int64_t ldy);
  void linear(const float* x, int64_t n, const Weight& w, float* y) { linear(x, n, w.cols, w, 0, w.rows, y, w.rows); }
  /// y = x * rsqrt(mean(x^2) + eps) * weight (weight may be null: unweighted).
  void rms_norm(const float* x, int64_t n, int64_t d, const float* weight, float eps, float* y);
  /// Gathers rows of an embedding table (any weight format) into out[n, cols].
  void embedding(const Weight& table, const int32_t* ids, int64_t n, float* out);

 private:
  ThreadPool& pool_;
};

/// Fixed-order fp32 dot product (16 independent lanes, then a fixed tree).
float dot_f32(const float* a, const float* b, int64_t n);

class Backend {
 public:
  static Result<std::unique_ptr<Backend>> create(const BackendConfig& cfg);
  const std::string& name() const { return name_; }
  CpuOps& ops() { return ops_; }
  ThreadPool& pool() { return pool_; }

 private:
  Backend(std::string name, int threads) : name_(std::move(name)), pool_(threads), ops_(pool_) {}
  std::string name_;
  ThreadPool pool_;
  CpuOps ops_;
};

}  // namespace deepinfer
