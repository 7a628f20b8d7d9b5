// Route handlers and the helpers they share. Each handler parses and fully validates its
// request, then either answers at once, returns a streaming producer (SSE), or (non-streaming
// requests that outlast cfg.disconnect_probe) an awaited body that probes the client.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/http_server.h"
#include "server/openai_types.h"

namespace deepinfer::server {

HttpResponse json_response(const Json& body, int status = 200);
HttpResponse error_response(const ApiError& err);
/// A non-ok Status as an OpenAI error (api_error.h does the mapping); `perr` names the field.
HttpResponse status_response(const Status& status, const ParseError* perr = nullptr);

/// kNotFound unless `model` is empty or the served name.
Status check_model(const ServerContext& ctx, const std::string& model);
/// Server policy on the sampling fields (stop strings need a tokenizer, n limit); the ranges
/// are SamplingParams::validate's, run by Generation::start.
Status check_common(const ServerContext& ctx, const CommonRequest& req);
/// Compiles the request's structured-output constraint (if any) into `er.grammar`.
Status attach_constraint(ServerContext& ctx, const CommonRequest& req, EngineRequest& er);
/// 503 while draining.
bool refuse_when_draining(ServerContext& ctx, HttpResponse& out);

/// A token as text for logprobs: its bytes (lossy UTF-8), or "token_id:<id>" without a tokenizer.
std::string token_text(const ServerContext& ctx, int32_t id);
/// Its bytes as a JSON array of integers (chat logprobs `bytes`).
Json token_bytes_json(const ServerContext& ctx, int32_t id);
int64_t unix_time();
/// Maps the engine's finish reason ("stop", "length", "cancelled") to the API's.
std::string api_finish_reason(const std::string& engine_reason);

/// A non-streaming answer. `pump(wait)` consumes at most one event, waiting up to `wait`, and
/// returns true once the run is over (done or failed); `build()` then makes the response. Runs in
/// the handler for up to cfg.disconnect_probe (the usual case: a plain response with the right
/// status); then goes on in an HttpResponse::await_body that probes the client every
/// disconnect_probe and drops the run (its Generation cancels) when the client has gone.
HttpResponse await_response(ServerContext& ctx, std::function<bool(std::chrono::milliseconds)> pump,
                            std::function<HttpResponse()> build);

/// A chat request's prompt as /v1/chat/completions runs it: the rendered messages' token ids,
/// whether thinking mode is on, and whether the reply starts inside the reasoning.
struct ChatPrompt {
  std::vector<int32_t> ids;
  bool thinking = false;
  bool starts_in_reasoning = false;
};
Result<ChatPrompt> render_chat_prompt(const ServerContext& ctx, const ChatRequest& req);

HttpResponse handle_chat(ServerContext& ctx, const HttpRequest& req);
/// POST /tokenize, /detokenize (vLLM's): a completions prompt or chat messages to the ids the
/// generation routes would run, and ids back to text.
HttpResponse handle_tokenize(ServerContext& ctx, const HttpRequest& req);
HttpResponse handle_detokenize(ServerContext& ctx, const HttpRequest& req);
HttpResponse handle_completions(ServerContext& ctx, const HttpRequest& req);
HttpResponse handle_models(ServerContext& ctx, const HttpRequest& req);
HttpResponse handle_health(ServerContext& ctx, const HttpRequest& req);
HttpResponse handle_metrics(ServerContext& ctx, const HttpRequest& req);

}  // namespace deepinfer::server
