#include "router/router.h"

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <optional>
#include <deque>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "router/prompt_key.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/http_server.h"
#include "server/openai_types.h"

namespace deepinfer::router {

using server::ChunkSink;
using server::HttpRequest;
using server::HttpResponse;

Result<ReplicaAddress> parse_replica_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0)
    return Status::invalid_argument("replica '" + url + "' must be http://HOST:PORT");
  std::string rest = url.substr(scheme.size());
  for (const char* tail : {"/v1/", "/v1", "/"})
    if (rest.size() > std::strlen(tail) && rest.compare(rest.size() - std::strlen(tail), std::string::npos, tail) == 0)
      rest.resize(rest.size() - std::strlen(tail));
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || rest.find('/') != std::string::npos)
    return Status::invalid_argument("replica '" + url + "' must be http://HOST:PORT");
  ReplicaAddress a;
  a.host = rest.substr(0, colon);
  const std::string port = rest.substr(colon + 1);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 1 || p > 65535)
    return Status::invalid_argument("replica '" + url + "': the port must be 1..65535");
  a.port = static_cast<int>(p);
  a.url = scheme + rest;
  return a;
}

Status RouterConfig::validate() const {
  if (replicas.empty()) return Status::invalid_argument("give at least one --replica");
  for (const auto& r : replicas) DI_TRY(parse_replica_url(r).status());
  if (port < 0 || port > 65535) return Status::invalid_argument("port must be 0..65535");
  if (health_interval.count() <= 0) return Status::invalid_argument("the health interval must be positive");
  if (http_threads < 1) return Status::invalid_argument("http threads must be >= 1");
  return picker.validate();
}

namespace {

// One request relayed to a replica, on its own thread: the status and content type once the
// headers are in, then the body chunks as they arrive. cancel() closes the connection.
class Upstream {
 public:
  Upstream(const ReplicaAddress& r, const RouterConfig& cfg) : cli_(r.host, r.port) {
    cli_.set_connection_timeout(std::chrono::duration_cast<std::chrono::seconds>(cfg.connect_timeout).count(),
                                static_cast<time_t>((cfg.connect_timeout.count() % 1000) * 1000));
    cli_.set_read_timeout(cfg.upstream_timeout.count(), 0);
    cli_.set_write_timeout(60, 0);
  }
  ~Upstream() {
    if (!finished()) cancel();
    if (thread_.joinable()) thread_.join();
  }

  void start(const HttpRequest& in, const std::string& api_key) {
    httplib::Request req;
    req.method = in.method;
    req.path = in.path;
    req.body = in.body;
    for (const auto& [k, v] : in.headers)
      if (k != "host" && k != "content-length" && k != "transfer-encoding" && k != "connection" && k != "accept-encoding")
        if (api_key.empty() || k != "authorization") req.headers.emplace(k, v);
    if (!api_key.empty()) req.headers.emplace("authorization", "Bearer " + api_key);
    req.response_handler = [this](const httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = res.status;
      content_type_ = res.get_header_value("Content-Type");
      cv_.notify_all();
      return !abort_.load();
    };
    req.content_receiver = [this](const char* data, size_t n, uint64_t, uint64_t) {
      std::lock_guard<std::mutex> lock(mu_);
      chunks_.emplace_back(data, n);
      cv_.notify_all();
      return !abort_.load();
    };
    thread_ = std::thread([this, req = std::move(req)]() mutable {
      auto res = cli_.send(req);
      std::lock_guard<std::mutex> lock(mu_);
      if (res && status_ == 0) status_ = res->status;
      if (!res) error_ = httplib::to_string(res.error());
      done_ = true;
      cv_.notify_all();
    });
  }
  /// Waits for the status (0: the replica could not be reached; error() says why).
  int wait_status() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return status_ != 0 || done_; });
    return status_;
  }
  /// Waits up to `d` for the body to be complete.
  bool wait_done(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, d, [&] { return done_; });
  }
  /// The next chunk, waiting for it; nullopt once the body is complete.
  std::optional<std::string> next_chunk() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !chunks_.empty() || done_; });
    if (chunks_.empty()) return std::nullopt;
    std::string c = std::move(chunks_.front());
    chunks_.pop_front();
    return c;
  }
  std::string body() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string b;
    for (auto& c : chunks_) b += c;
    chunks_.clear();
    return b;
  }
  std::string content_type() {
    std::lock_guard<std::mutex> lock(mu_);
    return content_type_;
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  bool finished() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  void cancel() {
    abort_ = true;
    cli_.stop();
  }

 private:
  httplib::Client cli_;
  std::mutex mu_;
  std::condition_variable cv_;
  int status_ = 0;
  std::string content_type_, error_;
  std::deque<std::string> chunks_;
  bool done_ = false;
  std::atomic<bool> abort_{false};
  std::thread thread_;
};

HttpResponse error_response(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = server::api_error_body(server::api_error_for_http(status, message));
  return r;
}

}  // namespace

struct Router::Impl {
  RouterConfig cfg;
  std::vector<ReplicaAddress> replicas;
  ReplicaPicker picker;
  server::HttpServer http;
  std::thread serve_thread, health_thread;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::vector<std::atomic<int64_t>> served;  // per replica: requests answered
  std::atomic<int64_t> retries{0}, refused{0};

  Impl(RouterConfig c, std::vector<ReplicaAddress> r)
      : cfg(std::move(c)),
        replicas(std::move(r)),
        picker(replicas.size(), cfg.picker),
        http(server::HttpServerOptions{cfg.max_body_bytes, cfg.http_threads, 60, 60, 5}),
        served(replicas.size()) {}

  // Relays `in` to the picked replica (trying the next one while a replica cannot be reached).
  HttpResponse forward(const HttpRequest& in, bool by_prompt) {
    if (!server::authorized(in, cfg.api_keys)) return server::unauthorized_response();
    std::string key;
    if (by_prompt) {
      // The server's own parser (it refuses deep nesting before parsing); a body it refuses goes
      // to a replica unkeyed, which answers the 400.
      auto body = server::parse_json_body(in.body);
      if (body.is_ok()) key = prompt_key(*body);
    }
    std::vector<int> tried;
    std::string last_error;
    for (;;) {
      const int r = picker.pick(key, tried);
      if (r < 0) {
        ++refused;
        return error_response(503, tried.empty() ? "no replica is healthy"
                                                 : "no replica could be reached (last: " + last_error + ")");
      }
      auto up = std::make_shared<Upstream>(replicas[r], cfg);
      up->start(in, cfg.replica_api_key);
      const int status = up->wait_status();
      if (status == 0) {
        picker.done(r);
        picker.set_healthy(r, false);
        last_error = replicas[r].url + ": " + up->error();
        DI_LOG(Warn, "route: %s is down (%s); trying another replica", replicas[r].url.c_str(), up->error().c_str());
        tried.push_back(r);
        ++retries;
        continue;
      }
      ++served[r];
      // Released when the relay is done with the response (or drops it unrun).
      auto release = std::shared_ptr<void>(nullptr, [this, r](void*) { picker.done(r); });
      HttpResponse out;
      out.status = status;
      out.content_type = up->content_type().empty() ? "application/json" : up->content_type();
      out.headers.push_back({"x-deepinfer-replica", replicas[r].url});
      if (out.content_type.rfind("text/event-stream", 0) == 0) {
        out.headers.push_back({"Cache-Control", "no-cache"});
        out.stream = [up, release](ChunkSink& sink) {
          while (auto c = up->next_chunk()) {
            if (!sink.write(*c)) return up->cancel();  // the client went away: so does the replica's
          }
        };
        return out;
      }
      if (up->wait_done(cfg.disconnect_probe)) {
        out.body = up->body();
        return out;
      }
      out.await_body = [up, release, probe = cfg.disconnect_probe](const std::function<bool()>& alive) -> std::string {
        while (!up->wait_done(probe)) {
          if (!alive()) {
            up->cancel();
            return {};
          }
        }
        return up->body();
      };
      return out;
    }
  }

  HttpResponse health() {
    int up = 0;
    for (size_t i = 0; i < replicas.size(); ++i) up += picker.healthy(static_cast<int>(i));
    if (up == 0) return error_response(503, "no replica is healthy");
    HttpResponse r;
    r.body = nlohmann::json{{"status", "ok"}, {"healthy_replicas", up}, {"replicas", replicas.size()}}.dump();
    return r;
  }

  HttpResponse metrics() {
    std::string m;
    auto family = [&](const char* name, const char* type, const char* help) {
      m += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    };
    auto per_replica = [&](const char* name, auto value) {
      for (size_t i = 0; i < replicas.size(); ++i)
        m += std::string(name) + "{replica=\"" + replicas[i].url + "\"} " + std::to_string(value(static_cast<int>(i))) + "\n";
    };
    family("deepinfer_router_requests_total", "counter", "Requests answered by each replica.");
    per_replica("deepinfer_router_requests_total", [&](int i) { return served[i].load(); });
    family("deepinfer_router_in_flight", "gauge", "Requests in flight at each replica.");
    per_replica("deepinfer_router_in_flight", [&](int i) { return picker.in_flight(i); });
    family("deepinfer_router_replica_healthy", "gauge", "1 while the replica is healthy.");
    per_replica("deepinfer_router_replica_healthy", [&](int i) { return picker.healthy(i) ? 1 : 0; });
    const PickerStats s = picker.stats();
    family("deepinfer_router_cache_affinity_total", "counter", "Requests sent where their prompt prefix was sent before.");
    m += "deepinfer_router_cache_affinity_total " + std::to_string(s.cache_hits) + "\n";
    family("deepinfer_router_retries_total", "counter", "Requests tried again on another replica (one was unreachable).");
    m += "deepinfer_router_retries_total " + std::to_string(retries.load()) + "\n";
    family("deepinfer_router_refused_total", "counter", "Requests answered 503: no replica could take them.");
    m += "deepinfer_router_refused_total " + std::to_string(refused.load()) + "\n";
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = std::move(m);
    return r;
  }

  void check_health() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      lock.unlock();
      for (size_t i = 0; i < replicas.size(); ++i) {
        httplib::Client c(replicas[i].host, replicas[i].port);
        c.set_connection_timeout(1, 0);
        c.set_read_timeout(2, 0);
        auto res = c.Get("/health");
        const bool ok = res && res->status == 200;
        if (ok != picker.healthy(static_cast<int>(i)))
          DI_LOG(Info, "route: %s is %s", replicas[i].url.c_str(), ok ? "up" : "down");
        picker.set_healthy(static_cast<int>(i), ok);
      }
      lock.lock();
      cv.wait_for(lock, cfg.health_interval, [&] { return stopping; });
    }
  }
};

Router::Router(RouterConfig cfg) {
  std::vector<ReplicaAddress> replicas;
  for (const auto& u : cfg.replicas) {
    auto a = parse_replica_url(u);
    if (a.is_ok()) replicas.push_back(*a);
  }
  impl_ = std::make_unique<Impl>(std::move(cfg), std::move(replicas));
}

Router::~Router() { stop(); }

Result<int> Router::start() {
  DI_TRY(impl_->cfg.validate());
  Impl* im = impl_.get();
  for (const char* path : {"/v1/chat/completions", "/v1/completions"})
    im->http.post(path, [im](const HttpRequest& r) { return im->forward(r, true); });
  for (const char* path : {"/tokenize", "/detokenize"})
    im->http.post(path, [im](const HttpRequest& r) { return im->forward(r, false); });
  im->http.get("/v1/models", [im](const HttpRequest& r) { return im->forward(r, false); });
  im->http.get("/health", [im](const HttpRequest&) { return im->health(); });
  im->http.get("/metrics", [im](const HttpRequest&) { return im->metrics(); });
  im->http.set_error_body([](int status, const std::string& msg) { return error_response(status, msg); });
  DI_ASSIGN_OR_RETURN(int port, im->http.bind(im->cfg.host, im->cfg.port));
  im->serve_thread = std::thread([im] { im->http.run(); });
  im->health_thread = std::thread([im] { im->check_health(); });
  return port;
}

void Router::stop() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  impl_->http.stop();
  if (impl_->serve_thread.joinable()) impl_->serve_thread.join();
  if (impl_->health_thread.joinable()) impl_->health_thread.join();
}

const ReplicaPicker& Router::picker() const { return impl_->picker; }

}  // namespace deepinfer::router
