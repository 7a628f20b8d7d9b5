// POST /v1/completions: prompts as a string, a list of strings, token ids or a list of token-id
// lists (one engine request of n samples each; choice index = prompt * n + sample), echo,
// logprobs (OpenAI's completions shape), streaming over SSE. Text prompts are encoded in
// SpecialTokenMode::kText. Without a tokenizer only token-id prompts are served and the
// generated ids come back in choices[i].token_ids (vLLM's --skip-tokenizer-init behaviour).
#include "server/choice_output.h"
#include "server/routes.h"
#include "server/sse.h"

namespace deepinfer::server {

namespace {

struct CompletionRun {
  explicit CompletionRun(ServerContext& c) : ctx(c) {}
  ServerContext& ctx;
  std::unique_ptr<Generation> gen;
  std::string id;
  int64_t created = 0;
  bool logprobs = false;
  bool token_ids = false;
  bool include_usage = false;
  bool continuous_usage = false;
  std::vector<std::string> echo;  // per prompt ("" when not echoing)
  std::vector<ChoiceOutput> outs;
  std::vector<std::string> text;  // non-streaming: accumulated per choice
  std::vector<std::string> finish;
  std::vector<std::optional<std::string>> stop_reason;
  std::vector<Json> lp;            // non-streaming: per choice {tokens, token_logprobs, top_logprobs, text_offset}
  std::vector<int64_t> offset;     // text_offset bookkeeping per choice
  std::vector<int64_t> cached;     // per prompt

  Json usage() const {
    int64_t prompt = 0, completion = 0, hit = 0;
    for (int p = 0; p * gen->n() < gen->num_choices(); ++p) prompt += gen->prompt_tokens(p * gen->n());
    for (const auto& o : outs) completion += o.num_tokens();
    for (int64_t c : cached) hit += c;
    return usage_json(prompt, completion, hit);
  }

  static Json empty_logprobs() {
    return {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
            {"text_offset", Json::array()}};
  }

  void add_logprobs(int c, const std::vector<SampledToken>& toks, Json& into) {
    for (const SampledToken& t : toks) {
      std::string s = token_text(ctx, t.id);
      into["tokens"].push_back(s);
      into["token_logprobs"].push_back(t.logprob);
      Json top = Json::object();
      for (const auto& [id, v] : t.top) top[token_text(ctx, id)] = v;
      into["top_logprobs"].push_back(t.top.empty() ? Json() : std::move(top));
      into["text_offset"].push_back(offset[c]);
      offset[c] += static_cast<int64_t>(ctx.tok ? ctx.tok->token_bytes(t.id).size() : 0);
    }
  }

  void set_finish(int c, const std::string& reason) {
    if (finish[c].empty()) finish[c] = api_finish_reason(reason);
  }

  bool apply(ChoiceEvent& ce, ChoiceDelta& d, Status& error) {
    const int c = ce.choice;
    StreamEvent& ev = ce.event;
    switch (ev.kind) {
      case StreamEvent::Kind::kError:
        error = ev.error.is_ok() ? Status::internal("the engine failed the request") : ev.error;
        return false;
      case StreamEvent::Kind::kTokens:
        d = outs[c].push(ev.tokens);
        if (outs[c].stopped_by_string()) {
          d.text += outs[c].finish().text;
          stop_reason[c] = outs[c].matched_stop();
          set_finish(c, "stop");
          gen->finish_choice(c);
        }
        return true;
      case StreamEvent::Kind::kFinished:
        cached[c / gen->n()] = std::max(cached[c / gen->n()], ev.cached_prompt_tokens);
        d.text += outs[c].finish().text;
        if (ev.stop_string) stop_reason[c] = ev.stop_string;
        set_finish(c, ev.finish_reason);
        return true;
    }
    return true;
  }

  void finish_open_choices(std::vector<int>* newly) {
    for (size_t c = 0; c < outs.size(); ++c) {
      if (finish[c].empty()) {
        text[c] += outs[c].finish().text;
        set_finish(static_cast<int>(c), "cancelled");
        if (newly) newly->push_back(static_cast<int>(c));
      }
    }
  }

  Json choice(int c, const std::string& t, Json logprobs_obj, const std::vector<int32_t>* ids, bool with_finish) const {
    Json ch;
    ch["index"] = c;
    ch["text"] = t;
    ch["logprobs"] = std::move(logprobs_obj);
    ch["finish_reason"] = with_finish ? Json(finish[c]) : Json();
    if (with_finish && stop_reason[c]) ch["stop_reason"] = *stop_reason[c];
    if (ids) ch["token_ids"] = *ids;
    return ch;
  }

  Json envelope(Json choices) const {
    Json j;
    j["id"] = id;
    j["object"] = "text_completion";
    j["created"] = created;
    j["model"] = ctx.model_name;
    j["choices"] = std::move(choices);
    return j;
  }
};

void run_stream(std::shared_ptr<CompletionRun> run, ChunkSink& sink) {
  auto write = [&](Json j) {
    if (run->include_usage) j["usage"] = run->continuous_usage ? run->usage() : Json();
    return sink.write(sse_data(j.dump(-1, ' ', false, Json::error_handler_t::replace)));
  };
  const int nc = static_cast<int>(run->outs.size());
  for (int c = 0; c < nc; ++c) {
    const std::string& e = run->echo[c / run->gen->n()];
    if (!e.empty() && !write(run->envelope(Json::array({run->choice(c, e, Json(), nullptr, false)})))) {
      return run->gen->cancel();
    }
  }
  Status error;
  while (!run->gen->done()) {
    auto ce = run->gen->next(run->ctx.cfg.heartbeat);
    if (!ce) {
      if (!run->gen->done() && !sink.write(sse_comment("keep-alive"))) return run->gen->cancel();
      continue;
    }
    ChoiceDelta d;
    const int c = ce->choice;
    const bool was_finished = !run->finish[c].empty();
    if (!run->apply(*ce, d, error)) break;
    const bool now_finished = !was_finished && !run->finish[c].empty();
    if (d.text.empty() && !now_finished && !((run->logprobs || run->token_ids) && !d.tokens.empty())) continue;
    Json lp;
    if (run->logprobs) {
      lp = CompletionRun::empty_logprobs();
      run->add_logprobs(c, d.tokens, lp);
    }
    std::vector<int32_t> ids;
    for (const auto& t : d.tokens) ids.push_back(t.id);
    if (!write(run->envelope(Json::array({run->choice(c, d.text, std::move(lp), run->token_ids ? &ids : nullptr, now_finished)})))) {
      return run->gen->cancel();
    }
  }
  if (!error.is_ok()) {
    run->gen->cancel();
    sink.write(sse_data(api_error_body(api_error_from_status(error))));
    sink.write(sse_done());
    return;
  }
  std::vector<int> late;
  run->finish_open_choices(&late);
  for (int c : late) {
    if (!write(run->envelope(Json::array({run->choice(c, "", Json(), nullptr, true)})))) return;
  }
  int64_t completion = 0;
  for (const auto& o : run->outs) completion += o.num_tokens();
  run->gen->record_end(completion);
  if (run->include_usage) {
    Json last = run->envelope(Json::array());
    last["usage"] = run->usage();
    if (!sink.write(sse_data(last.dump(-1, ' ', false, Json::error_handler_t::replace)))) return;
  }
  sink.write(sse_done());
}

}  // namespace

HttpResponse handle_completions(ServerContext& ctx, const HttpRequest& http) {
  const auto arrival = Clock::now();
  HttpResponse refused;
  if (refuse_when_draining(ctx, refused)) return refused;
  auto body = parse_json_body(http.body);
  if (!body.is_ok()) return status_response(body.status());
  ParseError perr;
  auto parsed = parse_completion_request(*body, ctx.cfg.limits, &perr);
  if (!parsed.is_ok()) return status_response(parsed.status(), &perr);
  CompletionRequest& req = *parsed;
  if (Status s = check_common(ctx, req); !s.is_ok()) return status_response(s);

  auto run = std::make_shared<CompletionRun>(ctx);
  run->id = ctx.make_id("cmpl");
  run->created = unix_time();
  run->logprobs = req.sampling.logprobs;
  run->token_ids = req.return_token_ids || !ctx.tok;
  run->include_usage = req.stream && req.stream_options.include_usage;
  run->continuous_usage = req.stream_options.continuous_usage_stats;

  const int n = req.sampling.n;
  const size_t np = req.prompts.size();
  std::vector<EngineRequest> reqs;
  for (size_t p = 0; p < np; ++p) {
    PromptInput& in = req.prompts[p];
    EngineRequest er;
    er.id = np == 1 ? run->id : run->id + "-" + std::to_string(p);
    if (Status s = attach_constraint(ctx, req, er); !s.is_ok()) return status_response(s);
    if (in.is_text) {
      if (!ctx.tok) {
        return status_response(Status::invalid_argument(
            "text prompts need a tokenizer; this model folder has no tokenizer.json, so send token ids "
            "(\"prompt\": [1, 2, 3] or a list of such lists)"), nullptr);
      }
      auto ids = ctx.tok->encode(in.text, tokenizer::SpecialTokenMode::kText);
      if (!ids.is_ok()) return status_response(ids.status());
      er.prompt = std::move(ids).value();
      if (req.echo) run->echo.push_back(in.text);
      else run->echo.emplace_back();
    } else {
      er.prompt = in.ids;
      if (req.echo && ctx.tok) {
        bool known = true;
        for (int32_t id : in.ids) known = known && ctx.tok->is_known(id);
        auto text = known ? ctx.tok->decode(in.ids, {req.skip_special_tokens.value_or(true)}) : Result<std::string>(Status::invalid_argument("unknown id"));
        run->echo.push_back(text.is_ok() ? *text : std::string());
      } else {
        run->echo.emplace_back();
      }
    }
    er.sampling = req.sampling;
    er.priority = req.priority;
    reqs.push_back(std::move(er));
  }
  auto gen = Generation::start(ctx, std::move(reqs), arrival);
  if (!gen.is_ok()) return status_response(gen.status());
  run->gen = std::move(gen).value();

  ChoiceOutputOptions co;
  co.tok = ctx.tok;
  co.skip_special_tokens = req.skip_special_tokens.value_or(true);
  co.stop = req.sampling.stop;
  co.include_stop = req.include_stop_str_in_output;
  co.eos_token_id = req.sampling.ignore_eos ? -1 : ctx.engine.model_info().eos_token_id;
  const int nc = run->gen->num_choices();
  run->outs.reserve(nc);
  for (int c = 0; c < nc; ++c) run->outs.emplace_back(co);
  run->text.assign(nc, "");
  run->finish.assign(nc, "");
  run->stop_reason.assign(nc, std::nullopt);
  run->lp.assign(nc, CompletionRun::empty_logprobs());
  run->offset.assign(nc, 0);
  run->cached.assign(np, 0);
  for (int c = 0; c < nc; ++c) run->offset[c] = static_cast<int64_t>(run->echo[c / n].size());

  if (req.stream) {
    HttpResponse r;
    r.content_type = kSseContentType;
    r.headers.push_back({"Cache-Control", "no-cache"});
    r.stream = [run](ChunkSink& sink) { run_stream(run, sink); };
    return r;
  }
  auto error = std::make_shared<Status>();
  auto pump = [run, error](std::chrono::milliseconds wait) {
    if (run->gen->done()) return true;
    auto ce = run->gen->next(wait);
    if (!ce) return run->gen->done();
    ChoiceDelta d;
    const int c = ce->choice;
    if (!run->apply(*ce, d, *error)) return true;
    run->text[c] += d.text;
    if (run->logprobs) run->add_logprobs(c, d.tokens, run->lp[c]);
    return run->gen->done();
  };
  auto build = [run, error, n, nc]() -> HttpResponse {
    if (!error->is_ok()) return status_response(*error);
    run->finish_open_choices(nullptr);
    int64_t completion = 0;
    for (const auto& o : run->outs) completion += o.num_tokens();
    run->gen->record_end(completion);
    Json choices = Json::array();
    for (int c = 0; c < nc; ++c) {
      choices.push_back(run->choice(c, run->echo[c / n] + run->text[c], run->logprobs ? run->lp[c] : Json(),
                                    run->token_ids ? &run->outs[c].token_ids() : nullptr, true));
    }
    Json resp = run->envelope(std::move(choices));
    resp["usage"] = run->usage();
    return json_response(resp);
  };
  return await_response(ctx, std::move(pump), std::move(build));
}

}  // namespace deepinfer::server
