// POST /tokenize and /detokenize (vLLM's): a client counts or inspects the tokens a request will
// run without running it. /tokenize takes a completions prompt (text, encoded as
// /v1/completions encodes it: control-token spellings stay text) or chat messages with any
// /v1/chat/completions field (rendered exactly as that route renders them: thinking mode, tools,
// prefix completion); /detokenize turns ids back into text, control tokens included.
#include "server/routes.h"

namespace deepinfer::server {

namespace {

Status need_tokenizer(const ServerContext& ctx) {
  if (ctx.tok) return Status::ok();
  return Status::invalid_argument("tokenizing needs a tokenizer; this model folder has no tokenizer.json");
}

}  // namespace

HttpResponse handle_tokenize(ServerContext& ctx, const HttpRequest& http) {
  auto parsed = parse_json_body(http.body);
  if (!parsed.is_ok()) return status_response(parsed.status());
  const Json& body = *parsed;
  if (Status s = need_tokenizer(ctx); !s.is_ok()) return status_response(s);
  ParseError perr;
  bool token_strs = false;
  if (auto it = body.find("return_token_strs"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      perr.param = "return_token_strs";
      return status_response(Status::invalid_argument("'return_token_strs' must be a boolean"), &perr);
    }
    token_strs = it->get<bool>();
  }
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    auto req = parse_chat_request(body, ctx.cfg.limits, &perr);
    if (!req.is_ok()) return status_response(req.status(), &perr);
    if (Status s = check_model(ctx, req->model); !s.is_ok()) return status_response(s);
    auto prompt = render_chat_prompt(ctx, *req);
    if (!prompt.is_ok()) return status_response(prompt.status());
    ids = std::move(prompt->ids);
  } else {
    auto p = body.find("prompt");
    if (p == body.end() || !p->is_string()) {
      perr.param = "prompt";
      return status_response(Status::invalid_argument("'prompt' (a string) or 'messages' is required"), &perr);
    }
    auto m = body.find("model");
    if (m != body.end() && !m->is_null()) {
      if (!m->is_string()) {
        perr.param = "model";
        return status_response(Status::invalid_argument("'model' must be a string"), &perr);
      }
      if (Status s = check_model(ctx, m->get<std::string>()); !s.is_ok()) return status_response(s);
    }
    auto enc = ctx.tok->encode(p->get<std::string>(), tokenizer::SpecialTokenMode::kText);
    if (!enc.is_ok()) return status_response(enc.status());
    ids = std::move(enc).value();
  }
  Json out;
  out["count"] = ids.size();
  out["max_model_len"] = ctx.engine.model_info().max_context;
  out["tokens"] = ids;
  if (token_strs) {
    Json strs = Json::array();
    for (int32_t id : ids) strs.push_back(token_text(ctx, id));
    out["token_strs"] = std::move(strs);
  }
  return json_response(out);
}

HttpResponse handle_detokenize(ServerContext& ctx, const HttpRequest& http) {
  auto parsed = parse_json_body(http.body);
  if (!parsed.is_ok()) return status_response(parsed.status());
  const Json& body = *parsed;
  if (Status s = need_tokenizer(ctx); !s.is_ok()) return status_response(s);
  ParseError perr;
  perr.param = "tokens";
  auto t = body.find("tokens");
  if (t == body.end() || !t->is_array())
    return status_response(Status::invalid_argument("'tokens' (an array of token ids) is required"), &perr);
  std::vector<int32_t> ids;
  for (const Json& v : *t) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX ||
        !ctx.tok->is_known(static_cast<int32_t>(v.get<int64_t>()))) {
      return status_response(Status::invalid_argument("'tokens' holds " + v.dump() + ", which is not a token id of this tokenizer"), &perr);
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  auto text = ctx.tok->decode(ids, {false});
  if (!text.is_ok()) return status_response(text.status(), &perr);
  return json_response({{"prompt", json_safe_text(*text)}});
}

}  // namespace deepinfer::server
