// GET /v1/models, /health, /metrics, and the helpers the routes share.
#include <chrono>

#include "server/routes.h"

namespace deepinfer::server {

HttpResponse json_response(const Json& body, int status) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  return r;
}

HttpResponse error_response(const ApiError& err) {
  HttpResponse r;
  r.status = err.http_status;
  r.body = api_error_body(err);
  return r;
}

HttpResponse status_response(const Status& status, const ParseError* perr) {
  return error_response(api_error_from_status(status, perr ? perr->param : std::string()));
}

Status check_model(const ServerContext& ctx, const std::string& model) {
  if (model.empty() || model == ctx.model_name) return Status::ok();
  return Status::not_found("the model '" + model + "' does not exist; this server serves '" + ctx.model_name + "'");
}

Status check_common(const ServerContext& ctx, const CommonRequest& req) {
  DI_TRY(check_model(ctx, req.model));
  if (!ctx.tok && !req.sampling.stop.empty()) {
    return Status::invalid_argument("stop strings need a tokenizer; this model folder has no tokenizer.json (use stop_token_ids)");
  }
  if (req.sampling.n > ctx.cfg.max_n) {
    return Status::invalid_argument("n must be at most " + std::to_string(ctx.cfg.max_n) + " on this server, got " +
                                    std::to_string(req.sampling.n));
  }
  return Status::ok();
}

Status attach_constraint(ServerContext& ctx, const CommonRequest& req, EngineRequest& er) {
  if (!req.structured.any()) return Status::ok();
  if (!ctx.constraints)
    return Status::invalid_argument("structured outputs need a tokenizer; this model folder has no tokenizer.json");
  DI_ASSIGN_OR_RETURN(er.grammar, ctx.constraints->compile(req.structured));
  return Status::ok();
}

bool refuse_when_draining(ServerContext& ctx, HttpResponse& out) {
  if (!ctx.draining.load()) return false;
  out = status_response(Status::cancelled("the server is shutting down and accepts no new requests"));
  return true;
}

std::string token_text(const ServerContext& ctx, int32_t id) {
  if (!ctx.tok) return "token_id:" + std::to_string(id);
  return json_safe_text(ctx.tok->token_bytes(id));
}

Json token_bytes_json(const ServerContext& ctx, int32_t id) {
  Json a = Json::array();
  if (!ctx.tok) return a;
  for (unsigned char c : ctx.tok->token_bytes(id)) a.push_back(static_cast<int>(c));
  return a;
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string api_finish_reason(const std::string& engine_reason) {
  if (engine_reason == "cancelled") return "abort";
  if (engine_reason.empty()) return "stop";
  return engine_reason;
}

HttpResponse handle_models(ServerContext& ctx, const HttpRequest&) {
  const ModelInfo& info = ctx.engine.model_info();
  Json m;
  m["id"] = ctx.model_name;
  m["object"] = "model";
  m["created"] = unix_time();
  m["owned_by"] = "deepinfer";
  m["root"] = info.name;
  m["max_model_len"] = info.max_context;
  Json body;
  body["object"] = "list";
  body["data"] = Json::array({m});
  return json_response(body);
}

HttpResponse handle_health(ServerContext& ctx, const HttpRequest&) {
  if (ctx.draining.load()) return status_response(Status::cancelled("shutting down"));
  return json_response(Json{{"status", "ok"}});
}

HttpResponse handle_metrics(ServerContext& ctx, const HttpRequest&) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = ctx.metrics.render(ctx.engine.stats(), ctx.model_name);
  return r;
}

HttpResponse await_response(ServerContext& ctx, std::function<bool(std::chrono::milliseconds)> pump,
                            std::function<HttpResponse()> build) {
  using std::chrono::milliseconds;
  const milliseconds probe = std::max(ctx.cfg.disconnect_probe, milliseconds(1));
  const auto deadline = Clock::now() + probe;
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (pump(std::chrono::duration_cast<milliseconds>(deadline - now) + milliseconds(1))) return build();
  }
  HttpResponse r;
  r.content_type = "application/json";
  r.headers.push_back({"Cache-Control", "no-cache"});
  r.await_body = [pump = std::move(pump), build = std::move(build), probe](const std::function<bool()>& alive) {
    auto next_probe = Clock::now();
    for (;;) {
      const auto now = Clock::now();
      if (now >= next_probe) {
        if (!alive()) return std::string();  // the client went away: the caller drops the run
        next_probe = now + probe;
      }
      if (pump(std::chrono::duration_cast<milliseconds>(next_probe - now) + milliseconds(1))) break;
    }
    return build().body;
  };
  return r;
}

}  // namespace deepinfer::server
