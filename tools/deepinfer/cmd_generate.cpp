// `deepinfer generate MODEL_DIR --input in.jsonl --output out.jsonl`: offline batch inference on
// the serving engine. Each input line is {"id", ...} plus one of
//   "prompt_tokens": [ids]         (a completion over token ids)
//   "prompt": "text" | [ids]       (a completion)
//   "messages": [...]              (a chat, with tools/thinking as in /v1/chat/completions)
// and any OpenAI/vLLM sampling field (max_tokens, temperature, top_p, top_k, min_p, seed, n, stop,
// stop_token_ids, logprobs, prompt_logprobs, echo, penalties, ...). Lines go through the same parsing, validation and
// routes as the HTTP API, concurrently, so the engine batches them. Every line is validated
// before any work. Results are appended one line each and flushed as they finish; a rerun skips
// ids already in the output (a line cut short by a kill is dropped and recomputed), so after
// kill -9 and a rerun every id appears exactly once.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "commands.h"
#include "engine/engine.h"
#include "device_flag.h"
#include "state_memory_flags.h"
#include "gpus_flag.h"
#include "jsonl.h"
#include "server/generation.h"
#include "server/routes.h"

namespace deepinfer::cli {

namespace {

using server::Json;

struct GenArgs {
  std::string model_dir, input, output;
  int threads = 0;
  std::string device = "cpu";
  int concurrency = 64;
  int64_t max_running = 64;
  int64_t max_batch_tokens = 2048;
  int64_t max_context = 65536;
  bool progress = true;
  double target_step_ms = 0;  // offline: throughput, no latency target by default
  int gpus = 1;
  bool overlap = true;  // --no-overlap
  StateMemoryFlags state_memory;  // --state-memory-mib, --gpu-memory-utilization
};

int fail(const std::string& msg) {
  std::fprintf(stderr, "deepinfer: error: %s\n", msg.c_str());
  return 1;
}

struct Job {
  Json id;
  std::string key;  // id as written (for resume)
  bool chat = false;
  std::string body;
};

// Turns an input line into the body of the matching OpenAI request.
Result<Job> make_job(const JsonLine& l, const std::string& path) {
  const std::string where = path + ":" + std::to_string(l.line_no) + ": ";
  Job job;
  job.id = l.value.contains("id") ? Json::parse(l.value["id"].dump()) : Json(l.line_no);
  job.key = job.id.dump();
  Json body = Json::parse(l.value.dump());
  body.erase("id");
  const int kinds = l.value.contains("messages") + l.value.contains("prompt") + l.value.contains("prompt_tokens");
  if (kinds != 1) return Status::invalid_argument(where + "give exactly one of 'prompt_tokens', 'prompt' or 'messages'");
  if (l.value.contains("prompt_tokens")) {
    DI_ASSIGN_OR_RETURN(std::vector<int32_t> ids, token_array(l, "prompt_tokens", path));
    body.erase("prompt_tokens");
    body["prompt"] = ids;
  }
  job.chat = l.value.contains("messages");
  body["stream"] = false;
  body["return_token_ids"] = true;
  job.body = body.dump();
  return job;
}

// Ids already written to `path`; cuts off a trailing partial line (from a killed run).
Result<std::set<std::string>> resume_state(const std::string& path) {
  std::set<std::string> done;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return done;
  std::ifstream in(path, std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t good_end = 0, pos = 0;
  while (pos < content.size()) {
    const size_t nl = content.find('\n', pos);
    if (nl == std::string::npos) break;  // partial last line
    try {
      Json j = Json::parse(content.substr(pos, nl - pos));
      if (j.contains("id")) done.insert(j["id"].dump());
    } catch (const std::exception&) {
      break;  // a torn line: everything from here is recomputed
    }
    good_end = nl + 1;
    pos = nl + 1;
  }
  if (good_end < content.size()) {
    std::filesystem::resize_file(path, good_end, ec);
    if (ec) return Status::internal(path + ": cannot truncate a partial line: " + ec.message());
  }
  return done;
}

Json result_line(const Job& job, const Json& resp) {
  Json out;
  out["id"] = job.id;
  Json choices = Json::array();
  for (const auto& c : resp["choices"]) {
    Json o;
    o["tokens"] = c.contains("token_ids") ? c["token_ids"] : Json::array();
    o["finish_reason"] = c.value("finish_reason", Json(nullptr));
    if (job.chat) {
      const Json& m = c["message"];
      o["text"] = m.value("content", Json(nullptr));
      if (m.contains("reasoning_content")) o["reasoning_content"] = m["reasoning_content"];
      if (m.contains("tool_calls")) o["tool_calls"] = m["tool_calls"];
    } else if (c.contains("text")) {
      o["text"] = c["text"];
    }
    if (c.contains("logprobs") && !c["logprobs"].is_null()) o["logprobs"] = c["logprobs"];
    if (c.contains("prompt_logprobs")) o["prompt_logprobs"] = c["prompt_logprobs"];
    choices.push_back(std::move(o));
  }
  if (!choices.empty()) {
    out["tokens"] = choices[0]["tokens"];
    out["finish_reason"] = choices[0]["finish_reason"];
    if (choices[0].contains("text")) out["text"] = choices[0]["text"];
    for (const char* k : {"reasoning_content", "tool_calls", "logprobs", "prompt_logprobs"})
      if (choices[0].contains(k)) out[k] = choices[0][k];
  }
  if (resp.contains("prompt_logprobs")) out["prompt_logprobs"] = resp["prompt_logprobs"];  // chat: one per request
  if (choices.size() > 1) out["choices"] = choices;
  if (resp.contains("usage")) out["usage"] = resp["usage"];
  return out;
}

int run_generate(const GenArgs& a) {
  if (int rc = check_gpus_flag("generate", a.gpus, a.model_dir)) return rc;
  if (int rc = check_device_flag("generate", a.device)) return rc;
  if (!(a.target_step_ms >= 0))
    return fail("--target-step-ms must be >= 0 (0: no target), got " + std::to_string(a.target_step_ms));
  auto lines = read_jsonl(a.input);
  if (!lines.is_ok()) return fail(std::string(lines.status().message()));
  std::vector<Job> jobs;
  std::set<std::string> keys;
  for (const auto& l : *lines) {
    auto job = make_job(l, a.input);
    if (!job.is_ok()) return fail(std::string(job.status().message()));
    if (!keys.insert(job->key).second)
      return fail(a.input + ":" + std::to_string(l.line_no) + ": duplicate id " + job->key);
    jobs.push_back(std::move(job).value());
  }

  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (std::filesystem::exists(std::filesystem::path(a.model_dir) / "tokenizer.json")) {
    auto t = tokenizer::Tokenizer::from_path(a.model_dir);
    if (!t.is_ok()) return fail("loading the tokenizer: " + t.status().to_string());
    tok = std::move(t).value();
  }
  EngineOptions eo;
  eo.threads = a.threads;
  eo.device = a.device;
  eo.overlap = a.overlap;
  eo.sched.max_running = a.max_running;
  eo.sched.max_batch_tokens = a.max_batch_tokens;
  eo.sched.max_waiting = std::max<int64_t>(4096, a.concurrency * 128);
  eo.sched.target_step_ms = a.target_step_ms;
  eo.max_context = a.max_context;
  eo.load_tokenizer = tok != nullptr;
  a.state_memory.apply(eo);
  auto engine = make_engine(a.model_dir, eo);
  if (!engine.is_ok()) return fail(std::string(engine.status().message()));
  server::ServerConfig sc;
  sc.max_n = 128;
  server::ServerContext ctx(**engine, tok.get(), sc);

  // Validate every line as the API would, before any work.
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string where = a.input + ":" + std::to_string((*lines)[i].line_no) + ": ";
    auto body = server::parse_json_body(jobs[i].body);
    server::ParseError perr;
    Status s = body.is_ok() ? Status::ok() : body.status();
    if (s.is_ok() && jobs[i].chat) {
      auto r = server::parse_chat_request(*body, sc.limits, &perr);
      s = r.is_ok() ? server::check_common(ctx, *r) : r.status();
      if (s.is_ok()) s = r->sampling.validate(ctx.engine.model_info().vocab_size);
      if (s.is_ok() && !tok) s = Status::invalid_argument("chat messages need a tokenizer; this model folder has none");
      EngineRequest probe;  // compiles (and caches) a structured-output constraint now
      if (s.is_ok()) s = server::attach_constraint(ctx, *r, probe);
    } else if (s.is_ok()) {
      auto r = server::parse_completion_request(*body, sc.limits, &perr);
      s = r.is_ok() ? server::check_common(ctx, *r) : r.status();
      if (s.is_ok()) s = r->sampling.validate(ctx.engine.model_info().vocab_size);
      EngineRequest probe;
      if (s.is_ok()) s = server::attach_constraint(ctx, *r, probe);
      for (size_t p = 0; s.is_ok() && p < r->prompts.size(); ++p) {
        const auto& pr = r->prompts[p];
        if (pr.is_text && !tok) s = Status::invalid_argument("text prompts need a tokenizer; use prompt_tokens");
        for (int32_t t : pr.ids)
          if (t >= ctx.engine.model_info().vocab_size)
            s = Status::invalid_argument("token id " + std::to_string(t) + " >= vocab_size " +
                                         std::to_string(ctx.engine.model_info().vocab_size));
      }
    }
    if (!s.is_ok()) return fail(where + std::string(s.message()) + (perr.param.empty() ? "" : " (" + perr.param + ")"));
  }

  auto done = resume_state(a.output);
  if (!done.is_ok()) return fail(std::string(done.status().message()));
  std::vector<size_t> todo;
  for (size_t i = 0; i < jobs.size(); ++i)
    if (!done->count(jobs[i].key)) todo.push_back(i);
  std::FILE* out = std::fopen(a.output.c_str(), "ab");
  if (!out) return fail(a.output + ": cannot open for writing");

  std::atomic<size_t> next{0}, finished{0}, failed{0};
  std::mutex out_mu;
  const bool tty = a.progress && isatty(fileno(stderr));
  const auto t0 = std::chrono::steady_clock::now();
  auto worker = [&] {
    for (size_t k; (k = next++) < todo.size();) {
      const Job& job = jobs[todo[k]];
      server::HttpRequest req{"POST", job.chat ? "/v1/chat/completions" : "/v1/completions", job.body, {}};
      server::HttpResponse resp = job.chat ? server::handle_chat(ctx, req) : server::handle_completions(ctx, req);
      // A slow answer comes back as a deferred body (the server probes the client meanwhile);
      // in-process there is no client to lose.
      if (resp.await_body) resp.body = resp.await_body([] { return true; });
      std::lock_guard<std::mutex> lock(out_mu);
      Json j;
      try {
        j = Json::parse(resp.body);
      } catch (const std::exception&) {
        j = Json::object();
      }
      if (resp.status != 200 || !j.contains("choices") || !j["choices"].is_array()) {
        ++failed;
        std::fprintf(stderr, "\ndeepinfer: id %s failed (%d): %s\n", job.key.c_str(), resp.status,
                     j.contains("error") ? j["error"].value("message", "").c_str() : resp.body.c_str());
        continue;  // not written: a rerun retries it
      }
      const std::string line = result_line(job, j).dump() + "\n";
      std::fwrite(line.data(), 1, line.size(), out);
      std::fflush(out);
      const size_t n = ++finished;
      if (tty) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const int width = 30, filled = static_cast<int>(width * n / todo.size());
        std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu  %.1f req/s", filled, "==============================",
                     width - filled, "", n, todo.size(), n / std::max(secs, 1e-9));
      }
    }
  };
  std::vector<std::thread> workers;
  const int nthreads = static_cast<int>(std::min<size_t>(std::max(1, a.concurrency), std::max<size_t>(1, todo.size())));
  for (int i = 0; i < nthreads; ++i) workers.emplace_back(worker);
  for (auto& w : workers) w.join();
  if (tty) std::fprintf(stderr, "\n");
  std::fclose(out);
  std::fprintf(stderr, "deepinfer generate: %zu done now, %zu already done before, %zu failed\n", finished.load(),
               jobs.size() - todo.size(), failed.load());
  return failed ? 1 : 0;
}

}  // namespace

void register_generate_commands(CLI::App& app, Registry& reg) {
  auto a = std::make_shared<GenArgs>();
  CLI::App* gen = app.add_subcommand("generate", "offline batch inference (JSONL in, JSONL out, resumable)");
  gen->add_option("model_dir", a->model_dir, "model folder")->required();
  gen->add_option("--input", a->input, "JSONL: {\"id\", \"prompt_tokens\" | \"prompt\" | \"messages\", sampling fields}")
      ->required();
  gen->add_option("--output", a->output, "JSONL: {\"id\", \"tokens\", \"finish_reason\", \"text\", ...}; appended")
      ->required();
  gen->add_option("--threads", a->threads, "CPU threads for the model (0: all)");
  add_device_option(gen, a->device);
  gen->add_flag("!--no-overlap", a->overlap,
                "synchronous engine steps (default: step N+1 is launched before step N's tokens are collected)");
  gen->add_option("--concurrency", a->concurrency, "requests in flight");
  gen->add_option("--max-running", a->max_running, "sequences decoded together");
  gen->add_option("--max-batch-tokens", a->max_batch_tokens, "tokens per engine step");
  gen->add_option("--max-context", a->max_context, "prompt + generated tokens per sequence");
  a->state_memory.add_to(gen);
  gen->add_option("--target-step-ms", a->target_step_ms,
                  "target step time (ms): prefill chunks are sized by the fitted step-cost model to stay "
                  "within it (0: token budget only)")
      ->capture_default_str();
  gen->add_flag("!--no-progress", a->progress, "no progress bar");
  gen->add_option("--gpus", a->gpus, "GPUs of this node to spread the experts over (1: single device)");
  reg.add(gen, [a] { return run_generate(*a); });
}

}  // namespace deepinfer::cli
