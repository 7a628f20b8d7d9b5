// ChoiceRun: what the chat and completions routes keep per request while its Generation runs
// (one ChoiceOutput per choice, each choice's finish and stop reason, the prefix-cache hits per
// prompt), and the parts of a response both routes share: applying an event, the SSE event loop
// and the end of a stream, the non-streaming pump. The routes add their own JSON shapes.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/choice_output.h"
#include "server/generation.h"
#include "server/http_server.h"
#include "server/openai_types.h"
#include "server/routes.h"

namespace deepinfer::server {

class ChoiceRun {
 public:
  explicit ChoiceRun(ServerContext& c) : ctx(c) {}
  virtual ~ChoiceRun() = default;
  ChoiceRun(const ChoiceRun&) = delete;
  ChoiceRun& operator=(const ChoiceRun&) = delete;

  ServerContext& ctx;
  std::unique_ptr<Generation> gen;
  std::string id;
  int64_t created = 0;
  bool logprobs = false;
  bool include_usage = false;
  bool continuous_usage = false;
  std::vector<ChoiceOutput> outs;
  std::vector<std::string> finish;  // "" while running
  std::vector<std::optional<std::string>> stop_reason;
  std::vector<int64_t> cached;      // per prompt: its tokens served from the prefix cache
  /// Per choice: the logprobs of its prompt's tokens 1, 2, ... as they arrived
  /// (sampling.prompt_logprobs; StreamEvent::kPromptLogprobs).
  std::vector<std::vector<SampledToken>> prompt_lp;

  /// Sizes the per-choice vectors for `choices` choices of `prompts` prompts, each choice's output
  /// built from `opts`.
  void init_choices(int choices, int prompts, const ChoiceOutputOptions& opts);
  /// Applies one event; `d` receives what became final for that choice. False on an engine error
  /// (then `error` says what failed).
  bool apply(ChoiceEvent& ce, ChoiceDelta& d, Status& error);
  /// Ends the choices that never got kFinished (the stream closed early) as "cancelled"; their
  /// indices go to `newly` when given.
  void finish_open_choices(std::vector<int>* newly);
  int64_t completion_tokens() const;
  /// {"id", "object", "created", "model", "choices"}: the frame of every response and chunk.
  Json frame(const char* object, Json choices) const;
  /// The usage object of the run so far.
  virtual Json usage() const = 0;
  /// vLLM's `prompt_logprobs` of choice c: null for the prompt's first token, then per token an
  /// object {"<id>": {"logprob", "rank", "decoded_token"}} with the token and its alternatives.
  Json prompt_logprobs_json(int c) const;

 protected:
  /// The API's finish reason for the engine's (chat: "tool_calls" when the choice called tools).
  virtual std::string api_reason(int c, const std::string& engine_reason) const;
  /// The text a choice releases when it is ended early (completions keep it for the response).
  virtual void on_cancelled_tail(int c, ChoiceDelta tail) {}

 private:
  void set_finish(int c, const std::string& engine_reason);
};

/// Appends `more` (text, reasoning, content, tool-call pieces, tokens) to `d`.
void append_delta(ChoiceDelta& d, ChoiceDelta more);

/// The SSE event loop: applies each event and calls `on_delta(c, d, now_finished)`, which writes
/// what it wants and returns false when the client has gone. Idle for cfg.heartbeat: a keep-alive
/// comment. Returns the engine's error (ok when every choice ended), or nullopt when the client
/// went away (the generation is then cancelled).
std::optional<Status> stream_events(ChoiceRun& run, ChunkSink& sink,
                                    const std::function<bool(int, ChoiceDelta&, bool)>& on_delta);

/// The end of a stream: on an engine error the error object; otherwise `final_chunk(c)` for each
/// choice that never finished, the usage chunk (`envelope([])` with usage) when asked for; then
/// [DONE]. `write` sends one chunk (the route's own JSON writer).
void end_stream(ChoiceRun& run, ChunkSink& sink, const Status& error, const std::function<bool(Json)>& write,
                const std::function<Json(int)>& final_chunk, const std::function<Json(Json)>& envelope);

/// A streaming (SSE) response produced by `produce`.
HttpResponse sse_response(std::function<void(ChunkSink&)> produce);

/// The opening both generation routes share: 503 while draining, the JSON body (into `body`),
/// `parse` (the route's request parser) into `req`, then check_common. Returns the response to
/// send when the request goes no further.
template <class Req>
std::optional<HttpResponse> open_request(ServerContext& ctx, const HttpRequest& http,
                                         Result<Req> (*parse)(const Json&, const ParseLimits&, ParseError*),
                                         Json& body, Req& req) {
  HttpResponse refused;
  if (refuse_when_draining(ctx, refused)) return refused;
  auto parsed_body = parse_json_body(http.body);
  if (!parsed_body.is_ok()) return status_response(parsed_body.status());
  body = std::move(parsed_body).value();
  ParseError perr;
  auto parsed = parse(body, ctx.cfg.limits, &perr);
  if (!parsed.is_ok()) return status_response(parsed.status(), &perr);
  req = std::move(parsed).value();
  if (Status s = check_common(ctx, req); !s.is_ok()) return status_response(s);
  return std::nullopt;
}

/// A non-streaming response: pumps events into `on_delta(c, d)`, then answers the engine's error
/// or, once every choice is done, `build()` (await_response: probes a client that waits long).
HttpResponse respond_when_done(ServerContext& ctx, std::shared_ptr<ChoiceRun> run,
                               std::function<void(int, ChoiceDelta&)> on_delta, std::function<Json()> build);

}  // namespace deepinfer::server
