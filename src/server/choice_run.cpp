#include "server/choice_run.h"

#include <algorithm>

#include "server/sse.h"

namespace deepinfer::server {

void ChoiceRun::init_choices(int choices, int prompts, const ChoiceOutputOptions& opts) {
  outs.clear();
  outs.reserve(static_cast<size_t>(choices));
  for (int c = 0; c < choices; ++c) outs.emplace_back(opts);
  finish.assign(static_cast<size_t>(choices), "");
  stop_reason.assign(static_cast<size_t>(choices), std::nullopt);
  cached.assign(static_cast<size_t>(prompts), 0);
  prompt_lp.assign(static_cast<size_t>(choices), {});
}

std::string ChoiceRun::api_reason(int, const std::string& engine_reason) const {
  return api_finish_reason(engine_reason);
}

void ChoiceRun::set_finish(int c, const std::string& engine_reason) {
  if (finish[c].empty()) finish[c] = api_reason(c, engine_reason);
}

bool ChoiceRun::apply(ChoiceEvent& ce, ChoiceDelta& d, Status& error) {
  const int c = ce.choice;
  StreamEvent& ev = ce.event;
  switch (ev.kind) {
    case StreamEvent::Kind::kError:
      error = ev.error.is_ok() ? Status::internal("the engine failed the request") : ev.error;
      return false;
    case StreamEvent::Kind::kPromptLogprobs: {
      auto& got = prompt_lp[static_cast<size_t>(c)];
      if (ev.prompt_offset != static_cast<int64_t>(got.size()) + 1) {
        error = Status::internal("prompt logprobs arrived out of order");
        return false;
      }
      for (auto& t : ev.tokens) got.push_back(std::move(t));
      return true;
    }
    case StreamEvent::Kind::kTokens:
      d = outs[c].push(ev.tokens);
      if (outs[c].stopped_by_string()) {
        append_delta(d, outs[c].finish());
        stop_reason[c] = outs[c].matched_stop();
        set_finish(c, "stop");
        gen->finish_choice(c);
      }
      return true;
    case StreamEvent::Kind::kFinished: {
      int64_t& hit = cached[static_cast<size_t>(c / gen->n())];
      hit = std::max(hit, ev.cached_prompt_tokens);
      append_delta(d, outs[c].finish());
      if (ev.stop_string) stop_reason[c] = ev.stop_string;
      set_finish(c, ev.finish_reason);
      return true;
    }
  }
  return true;
}

void ChoiceRun::finish_open_choices(std::vector<int>* newly) {
  for (size_t c = 0; c < outs.size(); ++c) {
    if (!finish[c].empty()) continue;
    on_cancelled_tail(static_cast<int>(c), outs[c].finish());
    set_finish(static_cast<int>(c), "cancelled");
    if (newly) newly->push_back(static_cast<int>(c));
  }
}

int64_t ChoiceRun::completion_tokens() const {
  int64_t n = 0;
  for (const ChoiceOutput& o : outs) n += o.num_tokens();
  return n;
}

Json ChoiceRun::prompt_logprobs_json(int c) const {
  Json out = Json::array();
  out.push_back(nullptr);
  for (const SampledToken& t : prompt_lp[static_cast<size_t>(c)]) {
    Json entry = Json::object();
    entry[std::to_string(t.id)] = {{"logprob", t.logprob}, {"rank", t.rank}, {"decoded_token", token_text(ctx, t.id)}};
    for (size_t i = 0; i < t.top.size(); ++i) {
      const auto& [id, lp] = t.top[i];
      if (id != t.id) entry[std::to_string(id)] = {{"logprob", lp}, {"rank", static_cast<int>(i) + 1}, {"decoded_token", token_text(ctx, id)}};
    }
    out.push_back(std::move(entry));
  }
  return out;
}

Json ChoiceRun::frame(const char* object, Json choices) const {
  Json j;
  j["id"] = id;
  j["object"] = object;
  j["created"] = created;
  j["model"] = ctx.model_name;
  j["choices"] = std::move(choices);
  return j;
}

void append_delta(ChoiceDelta& d, ChoiceDelta more) {
  d.text += more.text;
  d.message.append(std::move(more.message));
  for (auto& t : more.tokens) d.tokens.push_back(std::move(t));
}

std::optional<Status> stream_events(ChoiceRun& run, ChunkSink& sink,
                                    const std::function<bool(int, ChoiceDelta&, bool)>& on_delta) {
  Status error;
  while (!run.gen->done()) {
    auto ce = run.gen->next(run.ctx.cfg.heartbeat);
    if (!ce) {
      if (!run.gen->done() && !sink.write(sse_comment("keep-alive"))) {
        run.gen->cancel();
        return std::nullopt;
      }
      continue;
    }
    ChoiceDelta d;
    const int c = ce->choice;
    const bool was_finished = !run.finish[c].empty();
    if (!run.apply(*ce, d, error)) break;
    const bool now_finished = !was_finished && !run.finish[c].empty();
    if (!on_delta(c, d, now_finished)) {
      run.gen->cancel();
      return std::nullopt;
    }
  }
  return error;
}

void end_stream(ChoiceRun& run, ChunkSink& sink, const Status& error, const std::function<bool(Json)>& write,
                const std::function<Json(int)>& final_chunk, const std::function<Json(Json)>& envelope) {
  if (!error.is_ok()) {
    run.gen->cancel();
    sink.write(sse_data(api_error_body(api_error_from_status(error))));
    sink.write(sse_done());
    return;
  }
  std::vector<int> late;
  run.finish_open_choices(&late);
  for (int c : late) {
    if (!write(final_chunk(c))) return;
  }
  run.gen->record_end(run.completion_tokens());
  if (run.include_usage) {
    Json last = envelope(Json::array());
    last["usage"] = run.usage();
    if (!sink.write(sse_data(last.dump(-1, ' ', false, Json::error_handler_t::replace)))) return;
  }
  sink.write(sse_done());
}

HttpResponse sse_response(std::function<void(ChunkSink&)> produce) {
  HttpResponse r;
  r.content_type = kSseContentType;
  r.headers.push_back({"Cache-Control", "no-cache"});
  r.stream = std::move(produce);
  return r;
}

HttpResponse respond_when_done(ServerContext& ctx, std::shared_ptr<ChoiceRun> run,
                               std::function<void(int, ChoiceDelta&)> on_delta, std::function<Json()> build) {
  auto error = std::make_shared<Status>();
  auto pump = [run, error, on_delta = std::move(on_delta)](std::chrono::milliseconds wait) {
    if (run->gen->done()) return true;
    auto ce = run->gen->next(wait);
    if (!ce) return run->gen->done();
    ChoiceDelta d;
    const int c = ce->choice;
    if (!run->apply(*ce, d, *error)) return true;
    on_delta(c, d);
    return run->gen->done();
  };
  auto done = [run, error, build = std::move(build)]() -> HttpResponse {
    if (!error->is_ok()) return status_response(*error);
    run->finish_open_choices(nullptr);
    run->gen->record_end(run->completion_tokens());
    return json_response(build());
  };
  return await_response(ctx, std::move(pump), std::move(done));
}

}  // namespace deepinfer::server
