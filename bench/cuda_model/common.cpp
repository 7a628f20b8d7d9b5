#include "common.h"

#include <chrono>

namespace deepinfer::bench {

void fail(const char* what, const char* file, int line, const std::string& detail) {
  std::string msg = std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " + detail;
  std::fprintf(stderr, "ERROR %s\n", msg.c_str());
  throw OpError(msg);
}

Arena::~Arena() {
  for (auto it = ptrs_.rbegin(); it != ptrs_.rend(); ++it) cudaFree(*it);
}

void* Arena::alloc(size_t bytes) {
  void* p = nullptr;
  const size_t n = bytes < 256 ? 256 : bytes;
  cudaError_t e = cudaMalloc(&p, n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // out-of-memory is not sticky: clear it and let the caller skip
    fail("cudaMalloc", __FILE__, __LINE__,
         std::to_string(n) + " bytes (" + cudaGetErrorString(e) + "), arena holds " + std::to_string(bytes_));
  }
  ptrs_.push_back(p);
  bytes_ += n;
  return p;
}

size_t device_free_bytes() {
  size_t f = 0, t = 0;
  if (cudaMemGetInfo(&f, &t) != cudaSuccess) return 0;
  return f;
}

Marker::~Marker() {
  for (cudaEvent_t e : ev_) cudaEventDestroy(e);
}

void Marker::enable(cudaStream_t s, bool in_graph) {
  on_ = true, graph_ = in_graph, s_ = s, used_ = 0;
  labels_.clear();  // the step's first mark (inside the graph) starts the clock
}

void Marker::mark(const std::string& label) {
  if (!on_) return;
  if (used_ == ev_.size()) {
    cudaEvent_t e;
    DI_CK(cudaEventCreate(&e));
    ev_.push_back(e);
  }
  if (graph_)
    DI_CK(cudaEventRecordWithFlags(ev_[used_], s_, cudaEventRecordExternal));
  else
    DI_CK(cudaEventRecord(ev_[used_], s_));
  labels_.push_back(label);
  ++used_;
}

std::vector<std::pair<std::string, double>> Marker::totals() const {
  std::vector<std::pair<std::string, double>> out;
  std::map<std::string, size_t> at;
  for (size_t i = 1; i < used_; ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, ev_[i - 1], ev_[i]) != cudaSuccess) ms = -1.f;
    auto it = at.find(labels_[i]);
    if (it == at.end()) {
      at[labels_[i]] = out.size();
      out.push_back({labels_[i], ms});
    } else {
      out[it->second].second += ms;
    }
  }
  return out;
}

void Streams::create() {
  DI_CK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
  DI_CK(cudaEventCreateWithFlags(&fork_ev, cudaEventDisableTiming));
  for (int i = 0; i < kSide; ++i) {
    DI_CK(cudaStreamCreateWithFlags(&side[i], cudaStreamNonBlocking));
    DI_CK(cudaEventCreateWithFlags(&join_ev[i], cudaEventDisableTiming));
  }
}

void Streams::destroy() {
  for (int i = 0; i < kSide; ++i) cudaStreamDestroy(side[i]), cudaEventDestroy(join_ev[i]);
  cudaEventDestroy(fork_ev);
  cudaStreamDestroy(main);
}

void Streams::fork(int n) {
  if (serial) return;
  DI_CK(cudaEventRecord(fork_ev, main));
  for (int i = 0; i < n; ++i) DI_CK(cudaStreamWaitEvent(side[i], fork_ev, 0));
}

void Streams::join(int n) {
  if (serial) return;
  for (int i = 0; i < n; ++i) {
    DI_CK(cudaEventRecord(join_ev[i], side[i]));
    DI_CK(cudaStreamWaitEvent(main, join_ev[i], 0));
  }
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace deepinfer::bench
