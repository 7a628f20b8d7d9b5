// ServerMetrics: the server's own per-request measurements (requests by endpoint and status,
// TTFT, inter-token latency, end-to-end latency, tokens streamed) and the Prometheus text
// exposition of them together with EngineClient::stats() (queue depth, running, state memory,
// prefix-cache hits, preemptions). Thread-safe: request threads record, /metrics renders.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine_client.h"

namespace deepinfer::server {

/// A cumulative Prometheus histogram over fixed upper bounds (seconds). Thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  /// Appends `# HELP`, `# TYPE` and the _bucket/_sum/_count series.
  void render(std::string& out, std::string_view name, std::string_view help, std::string_view labels) const;
  uint64_t count() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), plus +Inf at the end
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  /// One finished HTTP request (after its last byte, or its error).
  void count_request(std::string_view endpoint, int http_status);
  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  void observe_itl(double seconds) { itl_.observe(seconds); }
  void observe_e2e(double seconds) { e2e_.observe(seconds); }
  void add_tokens(int64_t prompt, int64_t generated) {
    prompt_tokens_ += prompt;
    generated_tokens_ += generated;
  }
  /// An HTTP request whose engine work was cancelled before it finished: `reason` is
  /// "client_disconnect" (the client went away: hung up mid-stream or while waiting for a
  /// non-streaming answer) or "shutdown" (the grace period ran out).
  void count_cancelled(std::string_view reason);
  int64_t cancelled(std::string_view reason) const;
  std::atomic<int64_t>& in_flight() { return in_flight_; }
  int64_t requests(std::string_view endpoint, int http_status) const;
  uint64_t ttft_count() const { return ttft_.count(); }

  /// Prometheus text exposition format 0.0.4.
  std::string render(const EngineStats& engine, std::string_view model_name) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::map<std::string, int64_t, std::less<>> cancelled_;
  Histogram ttft_, itl_, e2e_;
  std::atomic<int64_t> prompt_tokens_{0}, generated_tokens_{0}, in_flight_{0};
};

}  // namespace deepinfer::server
