// ServerContext (what every route shares) and Generation: the engine requests behind one HTTP
// request (one per prompt; each with n samples), read as a single stream of per-choice events.
// Generation::start validates every request fully (token ids against the vocab, sampling
// parameters, context length) before the first submit, and cancels what it submitted when a
// later submit fails, so a rejected HTTP request leaves no state in the engine. Destroying a
// Generation cancels whatever has not finished (a client that went away). It records TTFT,
// inter-token and end-to-end latency in the server metrics. One consumer thread per Generation.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/engine_client.h"
#include "server/metrics.h"
#include "server/openai_types.h"
#include "server/structured.h"
#include "tokenizer/chat_encoding.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

using Clock = std::chrono::steady_clock;

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;        // "" = the engine's ModelInfo::name
  std::vector<std::string> api_keys;     // non-empty: API routes need "Authorization: Bearer <key>" (auth.h)
  size_t max_body_bytes = size_t{32} << 20;
  int http_threads = 128;               // concurrent connections (each stream holds one)
  int32_t max_n = 64;                   // n per request (SamplingParams allows up to 128)
  ParseLimits limits;
  tokenizer::ChatFormat chat_format = tokenizer::ChatFormat::kV4;
  bool default_thinking = false;        // thinking mode when a request does not say
  bool emit_reasoning_alias = false;    // also emit `reasoning` next to `reasoning_content`
  std::chrono::milliseconds heartbeat{1000};  // SSE comment when a stream is idle this long
  /// A non-streaming request still running after this long is answered chunked, with a
  /// leading-whitespace byte this often, so a client that went away is seen and cancelled.
  std::chrono::milliseconds disconnect_probe{500};
  /// Structured outputs' and forced tool calls' grammar compiler: its per-grammar budgets (token
  /// classification steps, automaton states, token-cache bytes; a grammar past one is a 400) and
  /// its cache of compiled grammars.
  grammar::CompilerOptions grammar;
  Status validate() const;
};

struct ServerContext {
  ServerContext(EngineClient& e, const tokenizer::Tokenizer* t, ServerConfig c);
  EngineClient& engine;
  const tokenizer::Tokenizer* tok;  // nullptr: token-id prompts only
  ServerConfig cfg;
  std::string model_name;           // served name
  ServerMetrics metrics;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> active_generations{0};
  std::unique_ptr<ConstraintCompiler> constraints;  // null without a tokenizer

  /// A unique id: "<prefix>-<startup tag><counter>".
  std::string make_id(const char* prefix);
  /// Engine ids of running generations (cancelled at the end of a shutdown grace period).
  void track(const std::string& id);
  void untrack(const std::string& id);
  void cancel_all();

 private:
  std::atomic<uint64_t> counter_{0};
  std::string tag_;
  std::mutex mu_;
  std::set<std::string> live_;
};

/// An event of one choice: choice = prompt_index * n + sample_index.
struct ChoiceEvent {
  int choice = 0;
  StreamEvent event;
};

class Generation {
 public:
  /// Validates all requests, then submits them. `arrival` is when the HTTP request came in.
  static Result<std::unique_ptr<Generation>> start(ServerContext& ctx, std::vector<EngineRequest> reqs,
                                                   Clock::time_point arrival);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  /// The next event of any choice, waiting up to `timeout`; nullopt on timeout or when done().
  std::optional<ChoiceEvent> next(std::chrono::milliseconds timeout);
  /// Every engine stream has ended (or the server finished every choice).
  bool done() const;
  /// The server decided `choice` is complete (a stop string): its later events are dropped, and
  /// the engine request is cancelled once all of its samples are complete.
  void finish_choice(int choice);
  /// Cancels what is still open: the client went away (counted in
  /// deepinfer_requests_cancelled_total{reason="client_disconnect"} unless the run had failed).
  void cancel();
  int num_choices() const { return static_cast<int>(subs_.size()) * n_; }
  int n() const { return n_; }
  int64_t prompt_tokens(int choice) const { return subs_[choice / n_].prompt_len; }
  /// Records the end-to-end latency and tokens (once).
  void record_end(int64_t completion_tokens);

 private:
  struct Sub {
    std::string id;
    std::shared_ptr<RequestStream> stream;
    int64_t prompt_len = 0;
    int open_samples = 0;              // samples without kFinished yet
    std::vector<bool> server_done;     // finish_choice() per sample
    std::vector<Clock::time_point> last_token;
    bool done = false;
  };
  Generation(ServerContext& ctx, Clock::time_point arrival) : ctx_(ctx), arrival_(arrival) {}
  std::optional<ChoiceEvent> poll(size_t i, std::chrono::milliseconds wait);
  void end_sub(Sub& s, bool cancel);

  ServerContext& ctx_;
  Clock::time_point arrival_;
  std::vector<Sub> subs_;
  int n_ = 1;
  size_t rr_ = 0;
  bool first_token_seen_ = false;
  bool recorded_ = false;
  bool failed_ = false;         // an engine error, or a submit refused in start()
  bool client_cancel_ = false;  // cancel() found open work
  bool server_cancel_ = false;  // the engine ended a sample "cancelled" without our asking (shutdown)
};

}  // namespace deepinfer::server
