// Shared pieces of the whole-model GPU bench (bench/cuda_model/): V4-Flash shapes, a device
// arena that frees what a configuration allocated, checked calls that throw (so one failing op
// ends its configuration, not the run), the streams a step forks onto, and a marker that times
// op classes with events recorded inside the captured graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"

namespace deepinfer::bench {

namespace dc = deepinfer::cuda;

// ---- V4-Flash shapes (V4-MODEL.md sections 1-3) ----
constexpr int kD = 4096, kHc = 4, kQLora = 1024, kHeads = 64, kHeadDim = 512, kRope = 64;
constexpr int kOGroups = 8, kORank = 1024, kInter = 2048, kTopK = 6, kWindow = 128;
constexpr int kIdxHeads = 64, kIdxDim = 128, kIdxTopK = 512, kVocab = 129280, kAllLayers = 43;
constexpr float kEps = 1e-6f, kSwigluLimit = 10.f, kRouteScale = 1.5f;
constexpr int kSinkhorn = 20, kHashLayers = 3;
/// compress_ratios of layer l: [0, 0] + [4, 128] * 20 + [4].
inline int compress_ratio(int l) { return l < 2 ? 0 : (l % 2 == 0 ? 4 : 128); }

/// A failed op: which call, and the backend's last_error().
struct OpError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const char* what, const char* file, int line, const std::string& detail);
#define DI_CK(x)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) ::deepinfer::bench::fail(#x, __FILE__, __LINE__, cudaGetErrorString(e_)); \
  } while (0)
#define DI_OK(x)                                                                                 \
  do {                                                                                           \
    if (!(x)) ::deepinfer::bench::fail(#x, __FILE__, __LINE__, ::deepinfer::cuda::last_error()); \
  } while (0)

/// Device memory owned by one scope (a model, a configuration); freed on destruction.
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();
  void* alloc(size_t bytes);  // throws OpError when the device is out of memory
  template <class T>
  T* take(int64_t count) { return static_cast<T*>(alloc(size_t(count) * sizeof(T))); }
  template <class T>
  T* upload(const std::vector<T>& v);
  size_t bytes() const { return bytes_; }

 private:
  std::vector<void*> ptrs_;
  size_t bytes_ = 0;
};
template <class T>
T* Arena::upload(const std::vector<T>& v) {
  T* p = take<T>(int64_t(v.size()));
  DI_CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

/// Device bytes free now (cudaMemGetInfo).
size_t device_free_bytes();

/// Times op classes inside a step: mark(label) after each op records an event (in a graph: an
/// external event-record node), so the time since the previous mark is charged to `label`.
/// Off (no events) unless enabled; single-stream steps only (the profile runs unforked). The
/// first mark of a step only starts the clock.
class Marker {
 public:
  ~Marker();
  void enable(cudaStream_t s, bool in_graph);
  void disable() { on_ = false; }
  bool on() const { return on_; }
  void mark(const std::string& label);
  /// After the timed replay/run has finished: ms per label, in first-seen order.
  std::vector<std::pair<std::string, double>> totals() const;

 private:
  bool on_ = false, graph_ = false;
  cudaStream_t s_ = nullptr;
  size_t used_ = 0;
  std::vector<cudaEvent_t> ev_;
  std::vector<std::string> labels_;
};

/// The main stream and the side streams a step forks independent work onto.
struct Streams {
  static constexpr int kSide = 8;
  cudaStream_t main = nullptr;
  cudaStream_t side[kSide] = {};
  cudaEvent_t fork_ev = nullptr, join_ev[kSide] = {};
  bool serial = false;  // profile mode: everything on main
  void create();
  void destroy();
  cudaStream_t lane(int i) const { return serial || i < 0 ? main : side[i]; }
  void fork(int n);  // side streams 0..n-1 wait for main's work so far
  void join(int n);  // main waits for side streams 0..n-1
};

/// Seeds for fill_random, one per tensor.
struct SeedSeq {
  uint64_t next = 1;
  uint64_t operator()() { return (next++) * 0x9e3779b97f4a7c15ull; }
};

/// A row of the result table (also the skipped / failed configurations).
struct ResultRow {
  std::string model, phase;
  int batch = 0;
  int64_t context = 0;
  double tokens_per_s = 0, step_ms = 0, floor_ms = 0;
  std::string skipped, error;
  std::map<std::string, double> extra;  // distinct_experts, bytes, flops, ...
  std::string note;
};

double now_s();

}  // namespace deepinfer::bench
