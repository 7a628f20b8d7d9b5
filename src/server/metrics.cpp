#include "server/metrics.h"

#include <cinttypes>
#include <cstdio>

namespace deepinfer::server {

namespace {

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string escape_label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out;
}

void header(std::string& out, std::string_view name, std::string_view help, std::string_view type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, std::string_view name, std::string_view labels, double v) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += fmt_double(v);
  out += '\n';
}

void metric(std::string& out, std::string_view name, std::string_view help, std::string_view type,
            std::string_view labels, double v) {
  header(out, name, help, type);
  sample(out, name, labels, v);
}

std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
          2.5,   5.0,   7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0};
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

uint64_t Histogram::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

void Histogram::render(std::string& out, std::string_view name, std::string_view help,
                       std::string_view labels) const {
  std::vector<uint64_t> counts;
  double sum;
  uint64_t count;
  {
    std::lock_guard<std::mutex> lock(mu_);
    counts = counts_;
    sum = sum_;
    count = count_;
  }
  header(out, name, help, "histogram");
  std::string prefix = labels.empty() ? std::string() : std::string(labels) + ",";
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts[i];
    std::string le = i < bounds_.size() ? fmt_double(bounds_[i]) : "+Inf";
    sample(out, std::string(name) + "_bucket", prefix + "le=\"" + le + "\"", static_cast<double>(cum));
  }
  sample(out, std::string(name) + "_sum", labels, sum);
  sample(out, std::string(name) + "_count", labels, static_cast<double>(count));
}

ServerMetrics::ServerMetrics() : ttft_(latency_buckets()), itl_(latency_buckets()), e2e_(latency_buckets()) {}

void ServerMetrics::count_request(std::string_view endpoint, int http_status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{std::string(endpoint), http_status}];
}

void ServerMetrics::count_cancelled(std::string_view reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++cancelled_[std::string(reason)];
}

int64_t ServerMetrics::cancelled(std::string_view reason) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cancelled_.find(reason);
  return it == cancelled_.end() ? 0 : it->second;
}

int64_t ServerMetrics::requests(std::string_view endpoint, int http_status) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find({std::string(endpoint), http_status});
  return it == requests_.end() ? 0 : it->second;
}

std::string ServerMetrics::render(const EngineStats& s, std::string_view model_name) const {
  std::string out;
  const std::string m = "model_name=\"" + escape_label(model_name) + "\"";
  header(out, "deepinfer_requests_total", "HTTP requests finished, by endpoint and status code.", "counter");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_) {
      sample(out, "deepinfer_requests_total",
             m + ",endpoint=\"" + escape_label(key.first) + "\",status=\"" + std::to_string(key.second) + "\"",
             static_cast<double>(n));
    }
  }
  header(out, "deepinfer_requests_cancelled_total",
         "HTTP requests whose generation was cancelled before it finished, by reason: client_disconnect "
         "(the client went away mid-stream or while waiting for a non-streaming answer), shutdown (the "
         "drain grace period ran out).",
         "counter");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const char* reason : {"client_disconnect", "shutdown"}) {
      auto it = cancelled_.find(std::string_view(reason));
      sample(out, "deepinfer_requests_cancelled_total", m + ",reason=\"" + reason + "\"",
             static_cast<double>(it == cancelled_.end() ? 0 : it->second));
    }
  }
  metric(out, "deepinfer_http_requests_in_flight", "HTTP requests being served now.", "gauge", m,
         static_cast<double>(in_flight_.load()));
  metric(out, "deepinfer_num_requests_waiting", "Requests queued in the engine.", "gauge", m,
         static_cast<double>(s.waiting));
  metric(out, "deepinfer_num_requests_running", "Requests holding state in the engine.", "gauge", m,
         static_cast<double>(s.running));
  metric(out, "deepinfer_state_memory_used_bytes",
         "Model state reserved, as published after each engine step: per running sequence its state once "
         "its pending tokens and the next one are computed (admission and preemption count these "
         "reservations), plus the prefix cache's snapshots. Never above capacity_bytes.", "gauge", m,
         static_cast<double>(s.state_bytes_used));
  metric(out, "deepinfer_state_memory_capacity_bytes",
         "Model state capacity: the running sequences' budget plus the prefix cache's.", "gauge", m,
         static_cast<double>(s.state_bytes_capacity));
  metric(out, "deepinfer_state_memory_usage_ratio", "state_memory_used_bytes / capacity (0..1).", "gauge", m,
         s.state_bytes_capacity > 0 ? static_cast<double>(s.state_bytes_used) / static_cast<double>(s.state_bytes_capacity)
                                    : 0.0);
  metric(out, "deepinfer_prompt_tokens_total", "Prompt tokens processed by the engine.", "counter", m,
         static_cast<double>(s.prompt_tokens_total));
  metric(out, "deepinfer_generation_tokens_total", "Tokens generated by the engine.", "counter", m,
         static_cast<double>(s.generation_tokens_total));
  metric(out, "deepinfer_prefix_cache_queries_total",
         "Prefix-cache lookups: one per sequence admitted to run (again after a preemption); "
         "compare with the _hits_total tokens, not as a token count.", "counter", m,
         static_cast<double>(s.prefix_cache_queries));
  metric(out, "deepinfer_prefix_cache_hits_total",
         "Prompt tokens restored from the prefix cache instead of computed (summed over lookups).", "counter", m,
         static_cast<double>(s.prefix_cache_hit_tokens));
  metric(out, "deepinfer_num_preemptions_total", "Sequences preempted (state freed, recomputed later).", "counter", m,
         static_cast<double>(s.preemptions));
  metric(out, "deepinfer_request_prompt_tokens_total", "Prompt tokens of requests the server finished.", "counter", m,
         static_cast<double>(prompt_tokens_.load()));
  metric(out, "deepinfer_request_generation_tokens_total", "Tokens the server returned to clients.", "counter", m,
         static_cast<double>(generated_tokens_.load()));
  ttft_.render(out, "deepinfer_time_to_first_token_seconds", "Time from submit to the first generated token.", m);
  itl_.render(out, "deepinfer_inter_token_latency_seconds", "Time between consecutive tokens of a sample.", m);
  e2e_.render(out, "deepinfer_e2e_request_latency_seconds", "Time from request arrival to its last token.", m);
  return out;
}

}  // namespace deepinfer::server
