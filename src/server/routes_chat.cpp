// POST /v1/chat/completions: OpenAI messages through the V4 chat encoding (user, tool and
// document text always in text mode: control tokens are inserted by id, never parsed), tools
// and tool_choice, reasoning_content split from content, DSML tool calls parsed into
// tool_calls, streaming over SSE with stream_options.include_usage.
//
// tool_choice "required" and a named function are enforced by a grammar of DSML tool calls
// (grammar/dsml_grammar.h): the output is one or more calls (exactly one with
// parallel_tool_calls: false) of the allowed tools, parameters following each tool's schema; in
// thinking mode the reasoning stays free and the calls follow </think>. A forced tool call cannot
// be combined with response_format / guided_* constraints (400): both would constrain the same
// output, and OpenAI's required call has no text answer to format.
#include "server/choice_run.h"
#include "server/routes.h"
#include "server/sse.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::server {

namespace {

struct ChatRun final : ChoiceRun {
  explicit ChatRun(ServerContext& c) : ChoiceRun(c) {}
  bool return_token_ids = false;
  bool prompt_logprobs = false;  // vLLM's prompt_logprobs: top-level, of the rendered prompt (choice 0's)
  bool thinking = false;
  std::vector<Json> logprob_content;  // non-streaming: accumulated per choice

  Json usage() const override {
    int64_t reasoning = 0;
    for (const ChoiceOutput& o : outs) reasoning += o.reasoning_tokens();
    return usage_json(gen->prompt_tokens(0), completion_tokens(), cached[0], thinking ? reasoning : -1);
  }

  Json logprobs_json(const std::vector<SampledToken>& toks) const {
    Json content = Json::array();
    for (const SampledToken& t : toks) {
      Json e;
      e["token"] = token_text(ctx, t.id);
      e["logprob"] = t.logprob;
      e["bytes"] = token_bytes_json(ctx, t.id);
      Json top = Json::array();
      for (const auto& [id, lp] : t.top) {
        top.push_back({{"token", token_text(ctx, id)}, {"logprob", lp}, {"bytes", token_bytes_json(ctx, id)}});
      }
      e["top_logprobs"] = std::move(top);
      content.push_back(std::move(e));
    }
    return content;
  }

  std::string call_id(int choice, int index) const {
    return "call_" + id.substr(id.find('-') + 1) + "_" + std::to_string(choice) + "_" + std::to_string(index);
  }

  std::string api_reason(int c, const std::string& engine_reason) const override {
    std::string r = api_finish_reason(engine_reason);
    return r == "stop" && outs[c].has_tool_calls() ? "tool_calls" : r;
  }

  Json delta_json(int c, const ChoiceDelta& d) const {
    Json delta = Json::object();
    if (!d.message.reasoning_content.empty()) {
      delta["reasoning_content"] = d.message.reasoning_content;
      if (ctx.cfg.emit_reasoning_alias) delta["reasoning"] = d.message.reasoning_content;
    }
    if (!d.message.content.empty()) delta["content"] = d.message.content;
    if (!d.message.tool_calls.empty()) {
      Json calls = Json::array();
      for (const auto& tc : d.message.tool_calls) {
        Json j;
        j["index"] = tc.index;
        if (!tc.name.empty()) {
          j["id"] = call_id(c, tc.index);
          j["type"] = "function";
          j["function"] = {{"name", tc.name}, {"arguments", tc.arguments}};
        } else {
          j["function"] = {{"arguments", tc.arguments}};
        }
        calls.push_back(std::move(j));
      }
      delta["tool_calls"] = std::move(calls);
    }
    if (return_token_ids && !d.tokens.empty()) {
      Json ids = Json::array();
      for (const auto& t : d.tokens) ids.push_back(t.id);
      delta["token_ids"] = std::move(ids);
    }
    return delta;
  }

  Json chunk(Json choices) const {
    Json j = frame("chat.completion.chunk", std::move(choices));
    if (include_usage) j["usage"] = continuous_usage ? usage() : Json();
    return j;
  }

  Json choice_chunk(int c, Json delta, const std::vector<SampledToken>* toks, bool with_finish) const {
    Json ch;
    ch["index"] = c;
    ch["delta"] = std::move(delta);
    ch["logprobs"] = (logprobs && toks && !toks->empty()) ? Json{{"content", logprobs_json(*toks)}} : Json();
    ch["finish_reason"] = with_finish ? Json(finish[c]) : Json();
    if (with_finish && stop_reason[c]) ch["stop_reason"] = *stop_reason[c];
    return ch;
  }

  Json response() const {
    Json choices = Json::array();
    for (size_t c = 0; c < outs.size(); ++c) {
      const tokenizer::ParsedMessage& m = outs[c].message();
      Json msg;
      msg["role"] = "assistant";
      msg["content"] = (m.content.empty() && !m.tool_calls.empty()) ? Json() : Json(m.content);
      if (thinking || !m.reasoning_content.empty()) {
        msg["reasoning_content"] = m.reasoning_content;
        if (ctx.cfg.emit_reasoning_alias) msg["reasoning"] = m.reasoning_content;
      }
      if (!m.tool_calls.empty()) {
        Json calls = Json::array();
        for (size_t i = 0; i < m.tool_calls.size(); ++i) {
          calls.push_back({{"id", call_id(static_cast<int>(c), static_cast<int>(i))},
                           {"type", "function"},
                           {"function", {{"name", m.tool_calls[i].name}, {"arguments", m.tool_calls[i].arguments}}}});
        }
        msg["tool_calls"] = std::move(calls);
      }
      Json ch;
      ch["index"] = c;
      ch["message"] = std::move(msg);
      ch["logprobs"] = logprobs ? Json{{"content", logprob_content[c]}} : Json();
      ch["finish_reason"] = finish[c];
      if (stop_reason[c]) ch["stop_reason"] = *stop_reason[c];
      if (return_token_ids || !ctx.tok) ch["token_ids"] = outs[c].token_ids();
      choices.push_back(std::move(ch));
    }
    Json j = frame("chat.completion", std::move(choices));
    if (prompt_logprobs) j["prompt_logprobs"] = prompt_logprobs_json(0);
    j["usage"] = usage();
    return j;
  }
};

Json build_messages(const ChatRequest& req) {
  Json msgs = req.messages;
  Json tools = Json::array();
  if (req.tool_choice != ToolChoice::kNone) {
    for (const Json& t : req.tools) {
      if (req.tool_choice != ToolChoice::kNamed || t["function"]["name"] == req.tool_choice_name) tools.push_back(t);
    }
  }
  if (!tools.empty() || !req.response_format.is_null()) {
    if (msgs[0]["role"] != "system") msgs.insert(msgs.begin(), Json{{"role", "system"}, {"content", ""}});
    if (!tools.empty()) msgs[0]["tools"] = std::move(tools);
    if (!req.response_format.is_null()) msgs[0]["response_format"] = req.response_format;
  }
  return msgs;
}

void run_stream(std::shared_ptr<ChatRun> run, ChunkSink& sink) {
  auto write = [&](const Json& j) {
    return sink.write(sse_data(j.dump(-1, ' ', false, Json::error_handler_t::replace)));
  };
  const int nc = static_cast<int>(run->outs.size());
  for (int c = 0; c < nc; ++c) {
    Json role = {{"role", "assistant"}, {"content", ""}};
    if (!write(run->chunk(Json::array({run->choice_chunk(c, role, nullptr, false)})))) return run->gen->cancel();
  }
  auto error = stream_events(*run, sink, [&](int c, ChoiceDelta& d, bool now_finished) {
    Json delta = run->delta_json(c, d);
    if (delta.empty() && !now_finished && !(run->logprobs && !d.tokens.empty())) return true;
    return write(run->chunk(Json::array({run->choice_chunk(c, std::move(delta), &d.tokens, now_finished)})));
  });
  if (!error) return;
  end_stream(
      *run, sink, *error, write,
      [&](int c) { return run->chunk(Json::array({run->choice_chunk(c, Json::object(), nullptr, true)})); },
      [&](Json choices) { return run->chunk(std::move(choices)); });
}

}  // namespace

Result<ChatPrompt> render_chat_prompt(const ServerContext& ctx, const ChatRequest& req) {
  if (!ctx.tok) {
    return Status::invalid_argument(
        "messages need a tokenizer; this model folder has no tokenizer.json, so only /v1/completions with token-id prompts is served");
  }
  ChatPrompt out;
  tokenizer::ChatEncodeOptions opts;
  opts.format = ctx.cfg.chat_format;
  out.thinking = req.thinking.value_or(ctx.cfg.default_thinking);
  opts.thinking_mode = out.thinking ? tokenizer::ThinkingMode::kThinking : tokenizer::ThinkingMode::kChat;
  opts.drop_thinking = req.drop_thinking.value_or(true);
  opts.reasoning_effort = req.reasoning_effort;
  DI_ASSIGN_OR_RETURN(tokenizer::RenderedPrompt rendered, tokenizer::render_chat(build_messages(req), opts));
  // Continuing a final assistant message that has reasoning but no content yet, in thinking mode:
  // the reply continues the reasoning, so the prompt stops before the </think> that closes it.
  const std::string think = tokenizer::tokens::kThinkStart, think_end = tokenizer::tokens::kThinkEnd;
  std::string& text = rendered.text;
  bool continues_reasoning = false;
  if (req.continue_final && out.thinking) {
    const Json& last = req.messages.back();
    const bool no_content = !last.contains("content") || !last["content"].is_string() || last["content"].get<std::string>().empty();
    auto& ranges = rendered.special_ranges;
    if (no_content && !ranges.empty() && ranges.back().end == text.size() &&
        text.compare(ranges.back().begin, std::string::npos, think_end) == 0) {
      text.resize(ranges.back().begin);
      ranges.pop_back();
      continues_reasoning = true;
    }
  }
  out.starts_in_reasoning = continues_reasoning ||
                            (text.size() >= think.size() && text.compare(text.size() - think.size(), think.size(), think) == 0);
  DI_ASSIGN_OR_RETURN(out.ids, tokenizer::encode_rendered(*ctx.tok, rendered));
  return out;
}

HttpResponse handle_chat(ServerContext& ctx, const HttpRequest& http) {
  const auto arrival = Clock::now();
  Json body;
  ChatRequest req;
  if (auto early = open_request(ctx, http, &parse_chat_request, body, req)) return *early;
  ParseError perr;  // names the field of a later error
  auto prompt = render_chat_prompt(ctx, req);
  if (!prompt.is_ok()) return status_response(prompt.status(), nullptr);
  const bool thinking = prompt->thinking;
  const bool forced_call = req.tool_choice == ToolChoice::kRequired || req.tool_choice == ToolChoice::kNamed;
  if (req.continue_final && (req.structured.any() || forced_call)) {
    perr.param = "messages";
    return status_response(Status::invalid_argument(
        "a continued final assistant message (prefix / continue_final_message) cannot be combined with a "
        "structured-output constraint or a forced tool call"), &perr);
  }

  auto run = std::make_shared<ChatRun>(ctx);
  run->id = ctx.make_id("chatcmpl");
  run->created = unix_time();
  run->logprobs = req.sampling.logprobs;
  run->return_token_ids = req.return_token_ids;
  run->prompt_logprobs = req.prompt_logprobs;
  run->include_usage = req.stream && req.stream_options.include_usage;
  run->continuous_usage = req.stream_options.continuous_usage_stats;
  run->thinking = thinking;

  ChoiceOutputOptions co;
  co.tok = ctx.tok;
  co.skip_special_tokens = false;  // <think>, </think> and DSML tokens carry the structure
  co.stop = req.sampling.stop;
  co.include_stop = req.include_stop_str_in_output;
  co.eos_token_id = ctx.engine.model_info().eos_token_id;
  co.chat = true;
  co.parser.format = ctx.cfg.chat_format;
  co.parser.starts_in_reasoning = prompt->starts_in_reasoning;

  const int n = req.sampling.n;
  EngineRequest er;
  er.id = run->id;
  er.prompt = std::move(prompt->ids);
  er.sampling = req.sampling;
  er.priority = req.priority;
  const std::optional<int32_t> think_end = ctx.tok->added_token_id(tokenizer::tokens::kThinkEnd);
  if (forced_call) {
    if (req.structured.any()) {
      perr.param = "tool_choice";
      return status_response(Status::invalid_argument(
          "tool_choice 'required' or a named function cannot be combined with response_format or another "
          "structured-output constraint"), &perr);
    }
    if (!ctx.constraints) return status_response(Status::invalid_argument("tool_choice needs a tokenizer"));
    ToolCallConstraint tc;
    tc.tools = req.tools;
    if (req.tool_choice == ToolChoice::kNamed) tc.named = req.tool_choice_name;
    auto ptc = body.find("parallel_tool_calls");
    if (ptc != body.end() && !ptc->is_null()) {
      if (!ptc->is_boolean()) {
        perr.param = "parallel_tool_calls";
        return status_response(Status::invalid_argument("'parallel_tool_calls' must be a boolean"), &perr);
      }
      tc.parallel = ptc->get<bool>();
    }
    tc.v41 = ctx.cfg.chat_format == tokenizer::ChatFormat::kV41;
    // Thinking mode without an added </think> token: the grammar itself lets the reasoning run
    // to the first </think> (with the token, grammar_start_token below starts it there).
    tc.after_reasoning = co.parser.starts_in_reasoning && !think_end;
    auto g = ctx.constraints->compile_tool_calls(tc);
    if (!g.is_ok()) {
      perr.param = "tools";
      return status_response(g.status(), &perr);
    }
    er.grammar = std::move(g).value();
  } else {
    // Thinking mode: the reasoning is free and the constraint starts after </think>: at the
    // added token (grammar_start_token below), else the grammar itself runs the reasoning to the
    // first </think> text (the tool-call grammar's after_reasoning, above).
    req.structured.after_reasoning = co.parser.starts_in_reasoning && !think_end;
    if (Status s = attach_constraint(ctx, req, er); !s.is_ok()) return status_response(s);
  }
  if (er.grammar && co.parser.starts_in_reasoning && think_end) er.grammar_start_token = *think_end;
  std::vector<EngineRequest> reqs;
  reqs.push_back(std::move(er));
  auto gen = Generation::start(ctx, std::move(reqs), arrival);
  if (!gen.is_ok()) return status_response(gen.status());
  run->gen = std::move(gen).value();
  run->init_choices(n, 1, co);
  run->logprob_content.assign(n, Json::array());

  if (req.stream) return sse_response([run](ChunkSink& sink) { run_stream(run, sink); });
  return respond_when_done(
      ctx, run,
      [run](int c, ChoiceDelta& d) {
        if (!run->logprobs) return;
        for (auto& e : run->logprobs_json(d.tokens)) run->logprob_content[c].push_back(std::move(e));
      },
      [run] { return run->response(); });
}

}  // namespace deepinfer::server
