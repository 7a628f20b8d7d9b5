#include "server/generation.h"

#include <random>
#include <thread>

#include "core/log.h"

namespace deepinfer::server {

Status ServerConfig::validate() const {
  if (port < 0 || port > 65535) return Status::invalid_argument("port must be in [0, 65535], got " + std::to_string(port));
  if (http_threads < 1) return Status::invalid_argument("http_threads must be >= 1");
  if (max_n < 1 || max_n > kMaxSamplesPerRequest) {
    return Status::invalid_argument("max_n must be in [1, " + std::to_string(kMaxSamplesPerRequest) + "]");
  }
  if (max_body_bytes < 1024) return Status::invalid_argument("max_body_bytes must be at least 1024");
  if (grammar.max_classify_steps < 1 || grammar.max_states < 1 || grammar.max_cache_bytes < 1 ||
      grammar.num_threads < 1)
    return Status::invalid_argument(
        "grammar budgets (classification steps, states, cache bytes) and threads must be positive");
  return Status::ok();
}

ServerContext::ServerContext(EngineClient& e, const tokenizer::Tokenizer* t, ServerConfig c)
    : engine(e), tok(t), cfg(std::move(c)) {
  model_name = cfg.served_model_name.empty() ? engine.model_info().name : cfg.served_model_name;
  if (tok) constraints = std::make_unique<ConstraintCompiler>(*tok, engine.model_info().eos_token_id, cfg.grammar);
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", static_cast<unsigned>(rd()));
  tag_ = buf;
}

std::string ServerContext::make_id(const char* prefix) {
  return std::string(prefix) + "-" + tag_ + std::to_string(counter_.fetch_add(1));
}

void ServerContext::track(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.insert(id);
}
void ServerContext::untrack(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(id);
}
void ServerContext::cancel_all() {
  std::set<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ids = live_;
  }
  for (const auto& id : ids) engine.cancel(id);
}

namespace {

Status validate_request(const EngineRequest& r, const ModelInfo& info) {
  if (r.prompt.empty()) return Status::invalid_argument("prompt must contain at least one token");
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    if (r.prompt[i] < 0 || r.prompt[i] >= info.vocab_size) {
      return Status::invalid_argument("prompt token id " + std::to_string(r.prompt[i]) + " at position " +
                                      std::to_string(i) + " is out of the vocabulary [0, " +
                                      std::to_string(info.vocab_size) + ")");
    }
  }
  DI_TRY(r.sampling.validate(info.vocab_size));
  const int64_t plen = static_cast<int64_t>(r.prompt.size());
  if (info.max_context > 0) {
    if (plen >= info.max_context) {
      return Status::invalid_argument("prompt has " + std::to_string(plen) + " tokens; the model's maximum context length is " +
                                      std::to_string(info.max_context) + " tokens, including at least one generated token");
    }
    if (r.sampling.max_tokens && plen + *r.sampling.max_tokens > info.max_context) {
      return Status::invalid_argument("max_tokens is too large: the model's maximum context length is " +
                                      std::to_string(info.max_context) + " tokens, and the request asks for " +
                                      std::to_string(plen + *r.sampling.max_tokens) + " (" + std::to_string(plen) +
                                      " in the prompt, " + std::to_string(*r.sampling.max_tokens) + " to generate)");
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Generation>> Generation::start(ServerContext& ctx, std::vector<EngineRequest> reqs,
                                                      Clock::time_point arrival) {
  if (reqs.empty()) return Status::invalid_argument("no prompt");
  const ModelInfo& info = ctx.engine.model_info();
  for (const EngineRequest& r : reqs) DI_TRY(validate_request(r, info));
  if (reqs[0].sampling.n > ctx.cfg.max_n) {
    return Status::invalid_argument("n must be at most " + std::to_string(ctx.cfg.max_n) + " on this server, got " +
                                    std::to_string(reqs[0].sampling.n));
  }
  if (ctx.draining.load()) return Status::cancelled("the server is shutting down");
  std::unique_ptr<Generation> g(new Generation(ctx, arrival));
  g->n_ = reqs[0].sampling.n;
  for (EngineRequest& r : reqs) {
    Sub s;
    s.id = r.id;
    s.prompt_len = static_cast<int64_t>(r.prompt.size());
    s.open_samples = r.sampling.n;
    s.server_done.assign(static_cast<size_t>(r.sampling.n), false);
    s.last_token.assign(static_cast<size_t>(r.sampling.n), Clock::time_point{});
    auto stream = ctx.engine.submit(std::move(r));
    if (!stream.is_ok()) {
      g->failed_ = true;  // not a cancellation by the client
      g->cancel();        // the ones already submitted
      return stream.status();
    }
    s.stream = std::move(stream).value();
    ctx.track(s.id);
    g->subs_.push_back(std::move(s));
  }
  ctx.active_generations.fetch_add(1);
  return g;
}

Generation::~Generation() {
  cancel();
  if (client_cancel_) ctx_.metrics.count_cancelled("client_disconnect");
  else if (server_cancel_) ctx_.metrics.count_cancelled("shutdown");
  if (!subs_.empty()) ctx_.active_generations.fetch_sub(1);
}

void Generation::end_sub(Sub& s, bool cancel) {
  if (s.done) return;
  s.done = true;
  if (cancel) ctx_.engine.cancel(s.id);
  ctx_.untrack(s.id);
}

void Generation::cancel() {
  for (Sub& s : subs_) {
    if (!s.done && !failed_) client_cancel_ = true;
    end_sub(s, /*cancel=*/true);
  }
}

bool Generation::done() const {
  for (const Sub& s : subs_) {
    if (!s.done) return false;
  }
  return true;
}

void Generation::finish_choice(int choice) {
  Sub& s = subs_[static_cast<size_t>(choice / n_)];
  const size_t k = static_cast<size_t>(choice % n_);
  if (s.done || s.server_done[k]) return;
  s.server_done[k] = true;
  --s.open_samples;
  if (s.open_samples <= 0) end_sub(s, /*cancel=*/true);
}

std::optional<ChoiceEvent> Generation::poll(size_t i, std::chrono::milliseconds wait) {
  Sub& s = subs_[i];
  while (!s.done) {
    auto ev = s.stream->next(wait);
    if (!ev) {
      if (s.stream->closed_and_drained()) end_sub(s, /*cancel=*/false);
      return std::nullopt;
    }
    const int k = ev->sample_index;
    if (k < 0 || k >= n_) {
      DI_LOG(Warn, "req=%s: event for sample %d of %d ignored", s.id.c_str(), k, n_);
      continue;
    }
    if (ev->kind == StreamEvent::Kind::kError) {
      failed_ = true;
      end_sub(s, /*cancel=*/true);
      return ChoiceEvent{static_cast<int>(i) * n_ + k, std::move(*ev)};
    }
    if (s.server_done[static_cast<size_t>(k)]) continue;
    if (ev->kind == StreamEvent::Kind::kFinished) {
      if (ev->finish_reason == "cancelled") server_cancel_ = true;
      s.server_done[static_cast<size_t>(k)] = true;
      if (--s.open_samples <= 0) end_sub(s, /*cancel=*/false);
    } else if (ev->kind == StreamEvent::Kind::kTokens && !ev->tokens.empty()) {
      const auto now = Clock::now();
      auto& last = s.last_token[static_cast<size_t>(k)];
      if (!first_token_seen_) {
        first_token_seen_ = true;
        ctx_.metrics.observe_ttft(std::chrono::duration<double>(now - arrival_).count());
      }
      if (last != Clock::time_point{}) {
        const double gap = std::chrono::duration<double>(now - last).count() / static_cast<double>(ev->tokens.size());
        for (size_t t = 0; t < ev->tokens.size(); ++t) ctx_.metrics.observe_itl(gap);
      }
      last = now;
    }
    return ChoiceEvent{static_cast<int>(i) * n_ + k, std::move(*ev)};
  }
  return std::nullopt;
}

std::optional<ChoiceEvent> Generation::next(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    for (size_t j = 0; j < subs_.size(); ++j) {
      size_t i = (rr_ + j) % subs_.size();
      if (auto ev = poll(i, std::chrono::milliseconds(0))) {
        rr_ = i + 1;
        return ev;
      }
    }
    if (done()) break;
    const auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    // Block on one open stream; with several, in short slices so the others are seen too.
    size_t open = 0, first = 0;
    for (size_t i = 0; i < subs_.size(); ++i) {
      if (!subs_[i].done && open++ == 0) first = i;
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (open > 1) wait = std::min(wait, std::chrono::milliseconds(2));
    if (wait.count() <= 0) wait = std::chrono::milliseconds(1);
    if (auto ev = poll(first, wait)) {
      rr_ = first + 1;
      return ev;
    }
  }
  return std::nullopt;
}

void Generation::record_end(int64_t completion_tokens) {
  if (recorded_) return;
  recorded_ = true;
  ctx_.metrics.observe_e2e(std::chrono::duration<double>(Clock::now() - arrival_).count());
  int64_t prompt = 0;
  for (const Sub& s : subs_) prompt += s.prompt_len;
  ctx_.metrics.add_tokens(prompt, completion_tokens);
}

}  // namespace deepinfer::server
