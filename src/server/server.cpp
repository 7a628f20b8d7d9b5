#include "server/server.h"

#include "core/log.h"
#include "server/auth.h"
#include "server/http_server.h"
#include "server/routes.h"

namespace deepinfer::server {

namespace {

// Endpoint label for metrics: the known routes, else "other" (unbounded paths stay out of labels).
std::string endpoint_label(const std::string& path) {
  static const char* const kKnown[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics",
                                       "/tokenize", "/detokenize"};
  for (const char* k : kKnown) {
    if (path == k) return path;
  }
  return "other";
}

}  // namespace

Server::Server(EngineClient& engine, const tokenizer::Tokenizer* tok, ServerConfig cfg)
    : ctx_(engine, tok, std::move(cfg)) {
  HttpServerOptions ho;
  ho.max_body_bytes = ctx_.cfg.max_body_bytes;
  ho.threads = ctx_.cfg.http_threads;
  http_ = std::make_unique<HttpServer>(ho);
  ServerContext* ctx = &ctx_;
  // The chunked producer of a stream outlives the handler; in_flight counts until it is done.
  auto counted = [ctx](HttpResponse (*fn)(ServerContext&, const HttpRequest&)) {
    return [ctx, fn](const HttpRequest& req) {
      if (!authorized(req, ctx->cfg.api_keys)) return unauthorized_response();
      ctx->metrics.in_flight().fetch_add(1);
      HttpResponse r = fn(*ctx, req);
      if (r.stream) {
        auto guard = std::shared_ptr<void>(nullptr, [ctx](void*) { ctx->metrics.in_flight().fetch_sub(1); });
        r.stream = [inner = std::move(r.stream), guard](ChunkSink& sink) { inner(sink); };
      } else if (r.await_body) {
        auto guard = std::shared_ptr<void>(nullptr, [ctx](void*) { ctx->metrics.in_flight().fetch_sub(1); });
        r.await_body = [inner = std::move(r.await_body), guard](const std::function<bool()>& alive) { return inner(alive); };
      } else {
        ctx->metrics.in_flight().fetch_sub(1);
      }
      return r;
    };
  };
  http_->post("/v1/chat/completions", counted(&handle_chat));
  http_->post("/v1/completions", counted(&handle_completions));
  // API routes need the key when one is set; /health and /metrics stay open.
  auto keyed = [ctx](HttpResponse (*fn)(ServerContext&, const HttpRequest&)) {
    return [ctx, fn](const HttpRequest& req) { return authorized(req, ctx->cfg.api_keys) ? fn(*ctx, req) : unauthorized_response(); };
  };
  http_->get("/v1/models", keyed(&handle_models));
  http_->get("/health", [ctx](const HttpRequest& r) { return handle_health(*ctx, r); });
  http_->get("/metrics", [ctx](const HttpRequest& r) { return handle_metrics(*ctx, r); });
  http_->post("/tokenize", keyed(&handle_tokenize));
  http_->post("/detokenize", keyed(&handle_detokenize));
  http_->set_error_body([](int status, const std::string& msg) { return error_response(api_error_for_http(status, msg)); });
  http_->set_access_log([ctx](const HttpRequest& req, int status) {
    ctx->metrics.count_request(endpoint_label(req.path), status);
  });
}

Server::~Server() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

Result<int> Server::start() {
  DI_TRY(ctx_.cfg.validate());
  DI_ASSIGN_OR_RETURN(port_, http_->bind(ctx_.cfg.host, ctx_.cfg.port));
  thread_ = std::thread([this] { http_->run(); });
  // httplib's stop() is a no-op until the listen loop runs: wait for it, so shutdown() right
  // after start() cannot miss it.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!http_->is_running() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  DI_LOG(Info, "serving '%s' on http://%s:%d (%s)", ctx_.model_name.c_str(), ctx_.cfg.host.c_str(), port_,
         ctx_.tok ? "tokenizer loaded" : "no tokenizer: token-id prompts only");
  return port_;
}

void Server::wait() {
  if (thread_.joinable()) thread_.join();
}

void Server::shutdown(std::chrono::milliseconds grace) {
  ctx_.draining.store(true);
  const auto deadline = Clock::now() + grace;
  auto busy = [&] { return ctx_.active_generations.load() > 0 || ctx_.metrics.in_flight().load() > 0; };
  while (busy() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (busy()) {
    DI_LOG(Warn, "shutdown: grace period over with %lld request(s) in flight; cancelling them",
           static_cast<long long>(ctx_.active_generations.load()));
    ctx_.cancel_all();
    const auto hard = Clock::now() + std::chrono::seconds(5);
    while (busy() && Clock::now() < hard) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  http_->stop();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

}  // namespace deepinfer::server
