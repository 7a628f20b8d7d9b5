// POST /v1/completions: prompts as a string, a list of strings, token ids or a list of token-id
// lists (one engine request of n samples each; choice index = prompt * n + sample), echo,
// logprobs (OpenAI's completions shape; with echo the prompt's tokens come first, the first with a
// null logprob), echo with max_tokens 0 (the prompt alone), vLLM's prompt_logprobs (non-streaming),
// streaming over SSE. Text prompts are encoded in
// SpecialTokenMode::kText. Without a tokenizer only token-id prompts are served and the
// generated ids come back in choices[i].token_ids (vLLM's --skip-tokenizer-init behaviour).
#include "server/choice_run.h"
#include "server/routes.h"
#include "server/sse.h"

namespace deepinfer::server {

namespace {

struct CompletionRun final : ChoiceRun {
  explicit CompletionRun(ServerContext& c) : ChoiceRun(c) {}
  bool token_ids = false;
  bool echo_logprobs = false;     // echo + logprobs: the logprobs list the prompt's tokens first
  bool echo_only = false;         // max_tokens 0: the completion's one token is left out
  bool prompt_logprobs = false;   // vLLM's prompt_logprobs on each choice
  int32_t top_n = 0;              // alternatives per token (the request's `logprobs`)
  std::vector<std::string> echo;  // per prompt ("" when not echoing)
  std::vector<std::vector<int32_t>> prompt_ids;  // per prompt (echo_logprobs)
  std::vector<bool> echo_sent;    // streaming with echo_logprobs: per choice
  std::vector<std::string> text;  // non-streaming: accumulated per choice
  std::vector<Json> lp;            // non-streaming: per choice {tokens, token_logprobs, top_logprobs, text_offset}
  std::vector<int64_t> offset;     // text_offset bookkeeping per choice

  Json usage() const override {
    int64_t prompt = 0, hit = 0;
    for (int p = 0; p * gen->n() < gen->num_choices(); ++p) prompt += gen->prompt_tokens(p * gen->n());
    for (int64_t c : cached) hit += c;
    return usage_json(prompt, echo_only ? 0 : completion_tokens(), hit);
  }

  std::string api_reason(int c, const std::string& engine_reason) const override {
    return echo_only && engine_reason != "cancelled" ? "length" : ChoiceRun::api_reason(c, engine_reason);
  }

  void on_cancelled_tail(int c, ChoiceDelta tail) override { text[c] += tail.text; }

  static Json empty_logprobs() {
    return {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
            {"text_offset", Json::array()}};
  }

  /// A token's bytes in the text (text offsets count them); 0 without a tokenizer.
  int64_t token_len(int32_t id) const { return static_cast<int64_t>(ctx.tok ? ctx.tok->token_bytes(id).size() : 0); }

  void add_logprobs(int c, const std::vector<SampledToken>& toks, Json& into) {
    for (const SampledToken& t : toks) {
      std::string s = token_text(ctx, t.id);
      into["tokens"].push_back(s);
      into["token_logprobs"].push_back(t.logprob);
      Json top = Json::object();
      for (const auto& [id, v] : t.top) top[token_text(ctx, id)] = v;
      into["top_logprobs"].push_back(t.top.empty() ? Json() : std::move(top));
      into["text_offset"].push_back(offset[c]);
      offset[c] += token_len(t.id);
    }
  }

  /// The prompt's part of choice c's logprobs (echo_logprobs): its first token with null, then the
  /// prompt logprobs that came; text offsets from 0 over the tokens' bytes.
  Json echo_logprobs_json(int c) const {
    Json into = empty_logprobs();
    const std::vector<int32_t>& ids = prompt_ids[static_cast<size_t>(c / gen->n())];
    int64_t at = 0;
    auto add = [&](int32_t id, Json lp, Json top) {
      into["tokens"].push_back(token_text(ctx, id));
      into["token_logprobs"].push_back(std::move(lp));
      into["top_logprobs"].push_back(std::move(top));
      into["text_offset"].push_back(at);
      at += token_len(id);
    };
    add(ids.front(), Json(), Json());
    for (const SampledToken& t : prompt_lp[static_cast<size_t>(c)]) {
      Json top = Json::object();
      for (size_t i = 0; i < t.top.size() && static_cast<int32_t>(i) < top_n; ++i) top[token_text(ctx, t.top[i].first)] = t.top[i].second;
      add(t.id, t.logprob, top_n > 0 ? std::move(top) : Json());
    }
    return into;
  }
  bool prompt_logprobs_complete(int c) const {
    return prompt_lp[static_cast<size_t>(c)].size() + 1 >= prompt_ids[static_cast<size_t>(c / gen->n())].size();
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

  Json envelope(Json choices) const { return frame("text_completion", std::move(choices)); }
};

void run_stream(std::shared_ptr<CompletionRun> run, ChunkSink& sink) {
  auto write = [&](Json j) {
    if (run->include_usage) j["usage"] = run->continuous_usage ? run->usage() : Json();
    return sink.write(sse_data(j.dump(-1, ' ', false, Json::error_handler_t::replace)));
  };
  const int nc = static_cast<int>(run->outs.size());
  // The echo comes first; with logprobs, once the prompt's logprobs are in (before the choice's first token).
  auto send_echo = [&](int c) {
    const std::string& e = run->echo[c / run->gen->n()];
    if (e.empty() && !run->echo_logprobs) return true;
    return write(run->envelope(
        Json::array({run->choice(c, e, run->echo_logprobs ? run->echo_logprobs_json(c) : Json(), nullptr, false)})));
  };
  if (!run->echo_logprobs) {
    for (int c = 0; c < nc; ++c)
      if (!send_echo(c)) return run->gen->cancel();
  }
  auto error = stream_events(*run, sink, [&](int c, ChoiceDelta& d, bool now_finished) {
    if (run->echo_logprobs && !run->echo_sent[c]) {
      // Wait for the prompt's logprobs, unless something else of this choice must go out first
      // (an end before the prompt was done: the echo then carries what came).
      if (!run->prompt_logprobs_complete(c) && !now_finished && d.text.empty() && d.tokens.empty()) return true;
      run->echo_sent[c] = true;
      if (!send_echo(c)) return false;
    }
    if (run->echo_only) d = ChoiceDelta{};
    if (d.text.empty() && !now_finished && !((run->logprobs || run->token_ids) && !d.tokens.empty())) return true;
    Json lp;
    if (run->logprobs) {
      lp = CompletionRun::empty_logprobs();
      run->add_logprobs(c, d.tokens, lp);
    }
    std::vector<int32_t> ids;
    for (const auto& t : d.tokens) ids.push_back(t.id);
    return write(
        run->envelope(Json::array({run->choice(c, d.text, std::move(lp), run->token_ids ? &ids : nullptr, now_finished)})));
  });
  if (!error) return;
  end_stream(
      *run, sink, *error, write,
      [&](int c) { return run->envelope(Json::array({run->choice(c, "", Json(), nullptr, true)})); },
      [&](Json choices) { return run->envelope(std::move(choices)); });
}

}  // namespace

HttpResponse handle_completions(ServerContext& ctx, const HttpRequest& http) {
  const auto arrival = Clock::now();
  Json body;
  CompletionRequest req;
  if (auto early = open_request(ctx, http, &parse_completion_request, body, req)) return *early;

  auto run = std::make_shared<CompletionRun>(ctx);
  run->id = ctx.make_id("cmpl");
  run->created = unix_time();
  run->logprobs = req.sampling.logprobs;
  run->top_n = req.sampling.top_logprobs;
  run->echo_logprobs = req.echo && req.sampling.logprobs;
  run->echo_only = req.echo_only;
  run->prompt_logprobs = req.prompt_logprobs;
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
    run->prompt_ids.push_back(er.prompt);
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
  run->init_choices(nc, static_cast<int>(np), co);
  run->text.assign(nc, "");
  run->lp.assign(nc, CompletionRun::empty_logprobs());
  run->offset.assign(nc, 0);
  run->echo_sent.assign(nc, false);
  for (int c = 0; c < nc; ++c) {
    // Generated tokens' text offsets follow the echoed prompt: its tokens' bytes when they are listed too.
    if (run->echo_logprobs) {
      for (int32_t id : run->prompt_ids[c / n]) run->offset[c] += run->token_len(id);
    } else {
      run->offset[c] = static_cast<int64_t>(run->echo[c / n].size());
    }
  }

  if (req.stream) return sse_response([run](ChunkSink& sink) { run_stream(run, sink); });
  return respond_when_done(
      ctx, run,
      [run](int c, ChoiceDelta& d) {
        if (run->echo_only) return;
        run->text[c] += d.text;
        if (run->logprobs) run->add_logprobs(c, d.tokens, run->lp[c]);
      },
      [run, n, nc] {
        Json choices = Json::array();
        const std::vector<int32_t> none;
        for (int c = 0; c < nc; ++c) {
          Json lp;
          if (run->echo_logprobs) {
            lp = run->echo_logprobs_json(c);
            for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
              for (auto& v : run->lp[c][k]) lp[k].push_back(std::move(v));
          } else if (run->logprobs) {
            lp = run->lp[c];
          }
          const std::vector<int32_t>* ids = run->echo_only ? &none : &run->outs[c].token_ids();
          Json ch = run->choice(c, run->echo[c / n] + run->text[c], std::move(lp), run->token_ids ? ids : nullptr, true);
          if (run->prompt_logprobs) ch["prompt_logprobs"] = run->prompt_logprobs_json(c);
          choices.push_back(std::move(ch));
        }
        Json resp = run->envelope(std::move(choices));
        resp["usage"] = run->usage();
        return resp;
      });
}

}  // namespace deepinfer::server
