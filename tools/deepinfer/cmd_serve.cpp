// `deepinfer serve MODEL_DIR`: the OpenAI-compatible HTTP server (src/server/) over the engine.
// SIGTERM / SIGINT stop intake (new requests get 503) and let in-flight requests finish within
// --shutdown-grace seconds; what is left is then cancelled and the process exits 0.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "device_flag.h"
#include "state_memory_flags.h"
#include "gpus_flag.h"
#include "core/log.h"
#include "server/auth.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"
#if __has_include("engine/engine.h")
#include "engine/engine.h"
#define DI_SERVE_HAS_ENGINE 1
#endif

namespace deepinfer::cli {
namespace {

struct ServeArgs {
  bool overlap = true;  // --no-overlap
  std::string model_dir;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;
  std::string api_key;
  int64_t max_queue = 4096;
  int64_t max_running = 64;
  int64_t max_batch_tokens = 2048;
  int64_t max_context = 65536;
  StateMemoryFlags state_memory;  // --state-memory-mib, --gpu-memory-utilization
  int64_t prefix_cache_mib = 512;
  int threads = 0;
  std::string device = "cpu";
  int http_threads = 128;
  int64_t max_body_mib = 32;
  int max_n = 64;
  std::string chat_format = "v4";
  bool thinking = false;
  bool reasoning_alias = false;
  bool skip_tokenizer_init = false;
  double shutdown_grace_s = 30;
  // Prefill chunks are cut so a step stays within this once the step-cost model is fitted
  // (bounding the inter-token latency of running streams); 0: the token budget alone.
  double target_step_ms = 200;
  int gpus = 1;
  grammar::CompilerOptions grammar;  // --grammar-max-steps, --grammar-max-states, --grammar-cache-mib
  int64_t grammar_cache_mib = grammar.max_cache_bytes >> 20;
};

int run_serve(const ServeArgs& a) {
  if (int rc = check_gpus_flag("serve", a.gpus, a.model_dir)) return rc;
  if (int rc = check_device_flag("serve", a.device)) return rc;
  if (!(a.target_step_ms >= 0)) {
    std::fprintf(stderr, "deepinfer serve: --target-step-ms must be >= 0 (0: no target), got %g\n", a.target_step_ms);
    return 2;
  }
#ifndef DI_SERVE_HAS_ENGINE
  std::fprintf(stderr, "deepinfer serve: this build has no serving engine (src/engine/engine.h)\n");
  return 1;
#else
  // Signals are taken by sigwait below: block them before any thread exists so every thread
  // inherits the mask. A client that hangs up must not kill the process: ignore SIGPIPE.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  server::ServerConfig cfg;
  cfg.host = a.host;
  cfg.port = a.port;
  cfg.served_model_name = a.served_model_name;
  cfg.api_keys = server::api_keys_from(a.api_key, "DEEPINFER_API_KEY");
  cfg.http_threads = a.http_threads;
  cfg.max_body_bytes = static_cast<size_t>(a.max_body_mib) << 20;
  cfg.max_n = a.max_n;
  cfg.default_thinking = a.thinking;
  cfg.emit_reasoning_alias = a.reasoning_alias;
  cfg.grammar = a.grammar;
  if (a.grammar_cache_mib < 1 || a.grammar_cache_mib > (int64_t{1} << 30)) {
    std::fprintf(stderr, "deepinfer serve: --grammar-cache-mib must be in [1, 2^30], got %lld\n",
                 static_cast<long long>(a.grammar_cache_mib));
    return 2;
  }
  cfg.grammar.max_cache_bytes = a.grammar_cache_mib << 20;
  if (a.chat_format == "v4") cfg.chat_format = tokenizer::ChatFormat::kV4;
  else if (a.chat_format == "v41") cfg.chat_format = tokenizer::ChatFormat::kV41;
  else {
    std::fprintf(stderr, "deepinfer serve: --chat-format must be v4 or v41, got '%s'\n", a.chat_format.c_str());
    return 2;
  }
  if (Status s = cfg.validate(); !s.is_ok()) {
    std::fprintf(stderr, "deepinfer serve: %s\n", s.to_string().c_str());
    return 2;
  }

  std::unique_ptr<tokenizer::Tokenizer> tok;
  const bool has_tokenizer = std::filesystem::exists(std::filesystem::path(a.model_dir) / "tokenizer.json");
  if (!a.skip_tokenizer_init && has_tokenizer) {
    auto t = tokenizer::Tokenizer::from_path(a.model_dir);
    if (!t.is_ok()) {
      std::fprintf(stderr, "deepinfer serve: loading the tokenizer: %s\n", t.status().to_string().c_str());
      return 1;
    }
    tok = std::move(t).value();
  } else {
    DI_LOG(Info, "no tokenizer (%s): serving token-id prompts only, generated ids in choices[i].token_ids",
           a.skip_tokenizer_init ? "--skip-tokenizer-init" : "the model folder has no tokenizer.json");
  }

  EngineOptions eo;
  eo.sched.max_waiting = a.max_queue;
  eo.sched.max_running = a.max_running;
  eo.sched.max_batch_tokens = a.max_batch_tokens;
  eo.sched.target_step_ms = a.target_step_ms;
  eo.max_context = a.max_context;
  a.state_memory.apply(eo);
  eo.prefix_cache_bytes = a.prefix_cache_mib << 20;
  eo.threads = a.threads;
  eo.device = a.device;
  eo.overlap = a.overlap;
  eo.served_model_name = a.served_model_name;
  eo.load_tokenizer = tok != nullptr;
  if (Status s = eo.validate(); !s.is_ok()) {
    std::fprintf(stderr, "deepinfer serve: %s\n", s.to_string().c_str());
    return 2;
  }
  auto engine = make_engine(a.model_dir, eo);
  if (!engine.is_ok()) {
    std::fprintf(stderr, "deepinfer serve: %s\n", engine.status().to_string().c_str());
    return 1;
  }

  server::Server srv(**engine, tok.get(), cfg);
  auto port = srv.start();
  if (!port.is_ok()) {
    std::fprintf(stderr, "deepinfer serve: %s\n", port.status().to_string().c_str());
    return 1;
  }
  std::printf("deepinfer serve: listening on http://%s:%d/v1 (model '%s')\n", a.host.c_str(), *port,
              srv.context().model_name.c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&sigs, &sig);
  DI_LOG(Info, "signal %d: stopping intake, finishing in-flight requests (grace %.0f s)", sig, a.shutdown_grace_s);
  srv.shutdown(std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_grace_s * 1000)));
  return 0;
#endif
}

}  // namespace

void register_serve_commands(CLI::App& app, Registry& reg) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* s = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, ...)");
  s->add_option("model_dir", a->model_dir, "model folder")->required();
  s->add_option("--host", a->host, "address to listen on");
  s->add_option("--port", a->port, "port (0: any free port)");
  s->add_option("--served-model-name", a->served_model_name, "model name clients send (default: the folder's name)");
  s->add_option("--api-key", a->api_key,
                "API routes need \"Authorization: Bearer KEY\" (comma-separated: several keys; default: $DEEPINFER_API_KEY; "
                "/health and /metrics stay open)");
  s->add_option("--max-queue", a->max_queue, "requests waiting in the engine before 429");
  s->add_option("--max-running", a->max_running, "sequences running at once");
  s->add_option("--max-batch-tokens", a->max_batch_tokens, "tokens per engine step");
  s->add_option("--target-step-ms", a->target_step_ms,
                 "target step time (ms): prefill chunks are sized by the fitted step-cost model to stay "
                 "within it, bounding inter-token latency (0: token budget only)")
      ->capture_default_str();
  s->add_option("--max-context", a->max_context, "prompt + generated tokens per sequence");
  a->state_memory.add_to(s);
  s->add_option("--prefix-cache-mib", a->prefix_cache_mib, "prefix cache capacity (MiB, 0: off)");
  s->add_option("--threads", a->threads, "CPU threads of the engine (0: all)");
  add_device_option(s, a->device);
  s->add_flag("!--no-overlap", a->overlap,
              "synchronous engine steps (default: step N+1 is launched before step N's tokens are collected)");
  s->add_option("--http-threads", a->http_threads, "concurrent HTTP connections (each stream holds one)");
  s->add_option("--max-body-mib", a->max_body_mib, "largest request body (MiB); larger gets 413");
  s->add_option("--max-n", a->max_n, "largest n per request");
  s->add_option("--chat-format", a->chat_format, "v4 | v41");
  s->add_flag("--thinking", a->thinking, "thinking mode unless a request says otherwise");
  s->add_flag("--reasoning-alias", a->reasoning_alias, "also emit `reasoning` next to `reasoning_content`");
  s->add_flag("--skip-tokenizer-init", a->skip_tokenizer_init, "do not load tokenizer.json: token-id prompts only");
  s->add_option("--shutdown-grace", a->shutdown_grace_s, "seconds in-flight requests get after SIGTERM");
  s->add_option("--gpus", a->gpus, "GPUs of this node to spread the experts over (1: single device)");
  s->add_option("--grammar-max-steps", a->grammar.max_classify_steps,
                "structured outputs: token-classification budget per grammar, in vocabulary-trie nodes walked "
                "(about 10 ns each); a grammar past it is a 400");
  s->add_option("--grammar-max-states", a->grammar.max_states,
                "structured outputs: automaton states per grammar (about 1 KB each); a grammar past it is a 400");
  s->add_option("--grammar-cache-mib", a->grammar_cache_mib,
                "structured outputs: token-cache MiB per grammar; a grammar past it is a 400");
  reg.add(s, [a] { return run_serve(*a); });
}

}  // namespace deepinfer::cli
