#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>

#include "core/log.h"

namespace deepinfer::server {

std::string HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers) {
    if (k == lower_name) return v;
  }
  return {};
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

HttpRequest to_request(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  r.body = req.body;
  for (const auto& [k, v] : req.headers) r.headers.emplace_back(lower(k), v);
  return r;
}

class HttplibSink final : public ChunkSink {
 public:
  explicit HttplibSink(httplib::DataSink& sink) : sink_(sink) {}
  bool write(std::string_view data) override {
    if (!ok_) return false;
    if (sink_.is_writable && !sink_.is_writable()) ok_ = false;
    if (ok_ && !data.empty()) ok_ = sink_.write(data.data(), data.size());
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  httplib::DataSink& sink_;
  bool ok_ = true;
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions opts;
  httplib::Server svr;
  ErrorBodyFn error_body;
  AccessLogFn access_log;

  void apply(const HttpResponse& r, httplib::Response& res) {
    res.status = r.status;
    for (const auto& [k, v] : r.headers) res.set_header(k, v);
    if (r.stream) {
      // The producer runs once, on the first call; `stream` lives in the provider closure and is
      // destroyed with the response whether or not it ran.
      auto fn = std::make_shared<std::function<void(ChunkSink&)>>(r.stream);
      res.set_chunked_content_provider(
          r.content_type,
          [fn](size_t, httplib::DataSink& sink) {
            HttplibSink s(sink);
            (*fn)(s);
            *fn = nullptr;  // release engine resources promptly
            if (!s.ok()) return false;
            sink.done();
            return true;
          },
          [fn](bool) { *fn = nullptr; });
    } else if (r.await_body) {
      auto fn = std::make_shared<std::function<std::string(const std::function<bool()>&)>>(r.await_body);
      res.set_chunked_content_provider(
          r.content_type,
          [fn](size_t, httplib::DataSink& sink) {
            bool ok = true;
            const std::function<bool()> alive = [&] {
              if (ok && sink.is_writable && !sink.is_writable()) ok = false;
              if (ok) ok = sink.write(" ", 1);
              return ok;
            };
            std::string body = (*fn)(alive);
            *fn = nullptr;  // release engine resources promptly (a dropped client: cancels)
            if (!ok) return false;
            if (!body.empty() && !sink.write(body.data(), body.size())) return false;
            sink.done();
            return true;
          },
          [fn](bool) { *fn = nullptr; });
    } else {
      res.set_content(r.body, r.content_type.c_str());
    }
  }

  httplib::Server::Handler wrap(RouteHandler h) {
    return [this, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
      apply(h(to_request(req)), res);
    };
  }
};

HttpServer::HttpServer(HttpServerOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->opts = opts;
  auto& svr = impl_->svr;
  const int threads = std::max(1, opts.threads);
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr.set_payload_max_length(opts.max_body_bytes);
  svr.set_read_timeout(opts.read_timeout_s, 0);
  svr.set_write_timeout(opts.write_timeout_s, 0);
  svr.set_keep_alive_timeout(opts.keep_alive_timeout_s);
  svr.set_tcp_nodelay(true);
  Impl* impl = impl_.get();
  svr.set_error_handler(httplib::Server::HandlerWithResponse([impl](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || !impl->error_body) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg;
    switch (res.status) {
      case 404: msg = "no route for " + req.method + " " + req.path; break;
      case 405: msg = "method " + req.method + " not allowed on " + req.path; break;
      case 413:
        // httplib caps form-encoded bodies on its own (curl -d sends that content type by default).
        msg = req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0
                  ? "a body sent as application/x-www-form-urlencoded may be at most " +
                        std::to_string(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) +
                        " bytes; send JSON with Content-Type: application/json"
                  : "request body is larger than the limit of " + std::to_string(impl->opts.max_body_bytes) + " bytes";
        break;
      case 400: msg = "malformed HTTP request"; break;
      default: msg = "HTTP error " + std::to_string(res.status); break;
    }
    HttpResponse r = impl->error_body(res.status, msg);
    res.set_content(r.body, r.content_type.c_str());
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([impl](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    DI_LOG(Error, "unhandled exception in a request handler: %s", what.c_str());
    res.status = 500;
    if (impl->error_body) {
      HttpResponse r = impl->error_body(500, "internal error: " + what);
      res.set_content(r.body, r.content_type.c_str());
    }
  });
  svr.set_logger([impl](const httplib::Request& req, const httplib::Response& res) {
    if (impl->access_log) impl->access_log(to_request(req), res.status);
  });
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::get(const std::string& path, RouteHandler h) { impl_->svr.Get(path, impl_->wrap(std::move(h))); }
void HttpServer::post(const std::string& path, RouteHandler h) { impl_->svr.Post(path, impl_->wrap(std::move(h))); }
void HttpServer::set_error_body(ErrorBodyFn fn) { impl_->error_body = std::move(fn); }
void HttpServer::set_access_log(AccessLogFn fn) { impl_->access_log = std::move(fn); }

Result<int> HttpServer::bind(const std::string& host, int port) {
  if (port == 0) {
    int p = impl_->svr.bind_to_any_port(host);
    if (p <= 0) return Status::unsupported("cannot bind to " + host + " (any port)");
    return p;
  }
  if (!impl_->svr.bind_to_port(host, port)) {
    return Status::unsupported("cannot bind to " + host + ":" + std::to_string(port) + " (in use or not permitted)");
  }
  return port;
}

void HttpServer::run() { impl_->svr.listen_after_bind(); }
void HttpServer::stop() {
  if (impl_->svr.is_running()) impl_->svr.stop();
}
bool HttpServer::is_running() const { return impl_->svr.is_running(); }

}  // namespace deepinfer::server
