// Server: the OpenAI-compatible HTTP server over an EngineClient. Owns the transport and the
// routes; the engine and the tokenizer are borrowed and must outlive it.
//
//   Server s(engine, tokenizer_or_null, cfg);
//   DI_ASSIGN_OR_RETURN(int port, s.start());   // binds and serves on a background thread
//   ...                                         // SIGTERM:
//   s.shutdown(std::chrono::seconds(30));       // 503 for new requests, in-flight ones finish
//
// shutdown(grace) stops intake at once (every new API request gets 503, /health too), waits up
// to `grace` for in-flight generations (streams included) to finish, cancels what is left,
// then stops the listener. Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "core/result.h"
#include "engine/engine_client.h"
#include "server/generation.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

class HttpServer;

class Server {
 public:
  Server(EngineClient& engine, const tokenizer::Tokenizer* tok, ServerConfig cfg);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds cfg.host:cfg.port (0: any free port) and serves on a background thread.
  Result<int> start();
  int port() const { return port_; }
  /// Blocks until the listener has stopped (after shutdown()).
  void wait();
  void shutdown(std::chrono::milliseconds grace);
  bool draining() const { return ctx_.draining.load(); }
  ServerContext& context() { return ctx_; }

 private:
  ServerContext ctx_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace deepinfer::server
