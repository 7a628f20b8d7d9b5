// HttpServer: the transport (cpp-httplib behind a pimpl, so no other file includes httplib.h).
// Handlers receive an HttpRequest and return an HttpResponse: either a whole body or a
// streaming producer that writes chunks (SSE) through a ChunkSink on the connection's worker
// thread, or a JSON body awaited on that thread while the client is probed (await_body: how a
// non-streaming client that hangs up is seen). Connections are served by a fixed thread pool (`threads`); a streaming response holds
// its worker until it ends. Errors the transport itself detects (no route, 413 body too large,
// unparsable request line) get their body from the ErrorBodyFn, so they look like API errors.
// Thread-safe after start(); routes must be registered before.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace deepinfer::server {

struct HttpRequest {
  std::string method;
  std::string path;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string header(std::string_view lower_name) const;
};

/// Chunks of a streaming response. write() returns false once the client has gone (the
/// producer should then stop and cancel its work).
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual bool write(std::string_view data) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  /// When set, the response is chunked and produced by this call; `body` is ignored. The
  /// function object is destroyed when the connection is done with it, whether or not it ran
  /// (a client that went away before the first chunk): owners cancel work in destructors.
  std::function<void(ChunkSink&)> stream;
  /// When set (and `stream` is not), a whole JSON body that takes a while to compute: the status
  /// and headers go out at once (Transfer-Encoding: chunked, no Content-Length) and this is called
  /// on the connection's worker thread. While it waits it calls `client_alive()` now and then
  /// (every ~0.5 s): each call writes one space, which is JSON-legal leading whitespace, and
  /// returns false once a write failed (the client went away; a dropped peer fails the second
  /// write at the latest); the producer should then return at once ("" is fine). Its result is
  /// written as the body. httplib 0.11 gives a handler no other way to see a closed connection.
  /// The status cannot change after the first byte: a late error goes out as an error body under
  /// `status`. Destroyed like `stream`, whether or not it ran.
  std::function<std::string(const std::function<bool()>& client_alive)> await_body;
  std::vector<std::pair<std::string, std::string>> headers;
};

using RouteHandler = std::function<HttpResponse(const HttpRequest&)>;
/// Builds the response for a transport-level error (status 400/404/405/413/500).
using ErrorBodyFn = std::function<HttpResponse(int status, const std::string& message)>;
/// Called after every response (endpoint path, status); for metrics.
using AccessLogFn = std::function<void(const HttpRequest&, int status)>;

struct HttpServerOptions {
  size_t max_body_bytes = size_t{32} << 20;
  int threads = 128;              // concurrent connections served
  int read_timeout_s = 60;
  int write_timeout_s = 60;
  int keep_alive_timeout_s = 5;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions opts);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void get(const std::string& path, RouteHandler h);
  void post(const std::string& path, RouteHandler h);
  void set_error_body(ErrorBodyFn fn);
  void set_access_log(AccessLogFn fn);

  /// Binds (port 0: any free port) and returns the port.
  Result<int> bind(const std::string& host, int port);
  /// Serves until stop(); call after bind().
  void run();
  void stop();
  bool is_running() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::server
