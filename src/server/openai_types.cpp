#include "server/openai_types.h"

#include "server/structured.h"

#include <cmath>
#include <limits>

#include "tokenizer/utf8.h"

namespace deepinfer::server {

namespace {

Status bad(ParseError* err, std::string param, const std::string& msg) {
  if (err) err->param = param;
  return Status::invalid_argument(msg);
}

std::string type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_float: return "a number";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    default: return "an unsupported value";
  }
}

// Reads the typed fields of one JSON object; null counts as absent (as the OpenAI SDKs send).
class Fields {
 public:
  Fields(const Json& obj, ParseError* err, std::string prefix = {}) : obj_(obj), err_(err), prefix_(std::move(prefix)) {}

  const Json* find(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::string name(const char* key) const { return prefix_ + key; }
  Status type_error(const char* key, const char* want, const Json& got) const {
    return bad(err_, name(key), "'" + name(key) + "' must be " + want + ", got " + type_name(got));
  }

  Status get(const char* key, bool& out) const {
    const Json* v = find(key);
    if (!v) return Status::ok();
    if (!v->is_boolean()) return type_error(key, "a boolean", *v);
    out = v->get<bool>();
    return Status::ok();
  }
  Status get(const char* key, std::optional<bool>& out) const {
    bool b = false;
    if (!find(key)) return Status::ok();
    DI_TRY(get(key, b));
    out = b;
    return Status::ok();
  }
  Status get(const char* key, float& out) const {
    const Json* v = find(key);
    if (!v) return Status::ok();
    if (!v->is_number()) return type_error(key, "a number", *v);
    double d = v->get<double>();
    if (!std::isfinite(d) || std::fabs(d) > 1e30) return bad(err_, name(key), "'" + name(key) + "' is out of range");
    out = static_cast<float>(d);
    return Status::ok();
  }
  Status get(const char* key, std::string& out) const {
    const Json* v = find(key);
    if (!v) return Status::ok();
    if (!v->is_string()) return type_error(key, "a string", *v);
    out = v->get<std::string>();
    return Status::ok();
  }
  // An integer in [lo, hi]; integral floats (3.0) are accepted, as Python's JSON clients send.
  Status get_int(const char* key, int64_t lo, int64_t hi, std::optional<int64_t>& out) const {
    const Json* v = find(key);
    if (!v) return Status::ok();
    return int_value(*v, name(key), lo, hi, out);
  }
  template <class T>
  Status get_int(const char* key, int64_t lo, int64_t hi, T& out) const {
    std::optional<int64_t> o;
    DI_TRY(get_int(key, lo, hi, o));
    if (o) out = static_cast<T>(*o);
    return Status::ok();
  }
  Status int_value(const Json& v, const std::string& param, int64_t lo, int64_t hi, std::optional<int64_t>& out) const {
    int64_t x = 0;
    if (v.is_number_integer() && !v.is_number_unsigned()) {
      x = v.get<int64_t>();
    } else if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return range_error(param, lo, hi);
      x = static_cast<int64_t>(u);
    } else if (v.is_number_float()) {
      double d = v.get<double>();
      if (!std::isfinite(d) || d != std::floor(d)) return bad(err_, param, "'" + param + "' must be an integer, got " + v.dump());
      if (d < -9.2e18 || d > 9.2e18) return range_error(param, lo, hi);
      x = static_cast<int64_t>(d);
    } else {
      return bad(err_, param, "'" + param + "' must be an integer, got " + type_name(v));
    }
    if (x < lo || x > hi) return range_error(param, lo, hi, x);
    out = x;
    return Status::ok();
  }
  Status range_error(const std::string& param, int64_t lo, int64_t hi, std::optional<int64_t> got = {}) const {
    std::string msg = "'" + param + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (got) msg += ", got " + std::to_string(*got);
    return bad(err_, param, msg);
  }
  ParseError* err() const { return err_; }

 private:
  const Json& obj_;
  ParseError* err_;
  std::string prefix_;
};

constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

Status parse_stop(const Fields& f, const ParseLimits& limits, SamplingParams& sp) {
  const Json* v = f.find("stop");
  if (!v) return Status::ok();
  if (v->is_string()) {
    if (v->get<std::string>().empty()) return bad(f.err(), "stop", "'stop' must not be an empty string");
    sp.stop.push_back(v->get<std::string>());
    return Status::ok();
  }
  if (!v->is_array()) return f.type_error("stop", "a string or an array of strings", *v);
  if (v->size() > limits.max_stop) {
    return bad(f.err(), "stop", "'stop' has " + std::to_string(v->size()) + " entries; at most " +
                                     std::to_string(limits.max_stop) + " are allowed");
  }
  for (const Json& s : *v) {
    if (!s.is_string()) return bad(f.err(), "stop", "'stop' entries must be strings, got " + type_name(s));
    if (s.get<std::string>().empty()) return bad(f.err(), "stop", "'stop' entries must not be empty");
    sp.stop.push_back(s.get<std::string>());
  }
  return Status::ok();
}

Status parse_common(const Json& body, const ParseLimits& limits, ParseError* err, CommonRequest& r) {
  Fields f(body, err);
  SamplingParams& sp = r.sampling;
  DI_TRY(f.get("model", r.model));
  DI_TRY(f.get("temperature", sp.temperature));
  DI_TRY(f.get("top_p", sp.top_p));
  DI_TRY(f.get_int("top_k", -1, kI32Max, sp.top_k));
  DI_TRY(f.get("min_p", sp.min_p));
  DI_TRY(f.get("repetition_penalty", sp.repetition_penalty));
  DI_TRY(f.get("presence_penalty", sp.presence_penalty));
  DI_TRY(f.get("frequency_penalty", sp.frequency_penalty));
  DI_TRY(f.get_int("n", 1, kI32Max, sp.n));
  if (const Json* bo = f.find("best_of")) {
    std::optional<int64_t> b;
    DI_TRY(f.int_value(*bo, "best_of", 1, kI32Max, b));
    if (*b != sp.n) return bad(err, "best_of", "'best_of' other than n is not supported");
  }
  std::optional<int64_t> max_tokens;
  DI_TRY(f.get_int("max_tokens", 0, kI64Max, max_tokens));
  if (max_tokens && *max_tokens == 0) {
    r.max_tokens_zero = true;
    max_tokens.reset();
  }
  std::optional<int64_t> max_completion_tokens;
  DI_TRY(f.get_int("max_completion_tokens", 1, kI64Max, max_completion_tokens));
  sp.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  DI_TRY(f.get_int("min_tokens", 0, kI64Max, sp.min_tokens));
  DI_TRY(f.get("ignore_eos", sp.ignore_eos));
  DI_TRY(parse_stop(f, limits, sp));
  if (const Json* ids = f.find("stop_token_ids")) {
    if (!ids->is_array()) return f.type_error("stop_token_ids", "an array of token ids", *ids);
    for (const Json& id : *ids) {
      std::optional<int64_t> x;
      DI_TRY(f.int_value(id, "stop_token_ids", 0, kI32Max, x));
      sp.stop_token_ids.push_back(static_cast<int32_t>(*x));
    }
  }
  if (const Json* seed = f.find("seed")) {
    if (seed->is_number_unsigned()) {
      sp.seed = seed->get<uint64_t>();
    } else {
      std::optional<int64_t> s;
      DI_TRY(f.int_value(*seed, "seed", std::numeric_limits<int64_t>::min(), kI64Max, s));
      sp.seed = static_cast<uint64_t>(*s);
    }
  }
  if (const Json* lb = f.find("logit_bias")) {
    if (!lb->is_object()) return f.type_error("logit_bias", "an object mapping token ids to biases", *lb);
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string& key = it.key();
      char* end = nullptr;
      long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id > kI32Max) {
        return bad(err, "logit_bias", "'logit_bias' keys must be token ids, got '" + key + "'");
      }
      if (!it.value().is_number()) {
        return bad(err, "logit_bias", "'logit_bias' values must be numbers, got " + type_name(it.value()));
      }
      double b = it.value().get<double>();
      if (!std::isfinite(b) || std::fabs(b) > 1e30) return bad(err, "logit_bias", "'logit_bias' value out of range");
      sp.logit_bias[static_cast<int32_t>(id)] = static_cast<float>(b);
    }
  }
  DI_TRY(f.get("stream", r.stream));
  std::optional<int64_t> prompt_logprobs;
  DI_TRY(f.get_int("prompt_logprobs", 0, kMaxTopLogprobs, prompt_logprobs));
  if (prompt_logprobs) {
    if (r.stream) return bad(err, "prompt_logprobs", "'prompt_logprobs' is not supported with 'stream': true");
    sp.prompt_logprobs = static_cast<int32_t>(*prompt_logprobs);
    r.prompt_logprobs = true;
  }
  if (const Json* so = f.find("stream_options")) {
    if (!so->is_object()) return f.type_error("stream_options", "an object", *so);
    Fields s(*so, err, "stream_options.");
    DI_TRY(s.get("include_usage", r.stream_options.include_usage));
    DI_TRY(s.get("continuous_usage_stats", r.stream_options.continuous_usage_stats));
  }
  DI_TRY(f.get("include_stop_str_in_output", r.include_stop_str_in_output));
  DI_TRY(f.get("skip_special_tokens", r.skip_special_tokens));
  DI_TRY(f.get("return_token_ids", r.return_token_ids));
  DI_TRY(f.get_int("priority", -1000000, 1000000, r.priority));
  DI_TRY(f.get("user", r.user));
  DI_TRY(parse_structured_fields(body, err, r.structured));
  return Status::ok();
}

// Content of a message: a string, null, or an array of {type: "text", text} parts (joined).
Status normalise_content(const Json& content, const std::string& param, ParseError* err, Json& out) {
  if (content.is_null() || content.is_string()) {
    out = content;
    return Status::ok();
  }
  if (!content.is_array()) return bad(err, param, "'" + param + "' must be a string or an array of content parts");
  std::string text;
  for (const Json& part : content) {
    if (!part.is_object()) return bad(err, param, "'" + param + "' parts must be objects");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) return bad(err, param, "'" + param + "' parts need a string 'type'");
    if (*type != "text") {
      return Status(StatusCode::kUnsupported,
                    "content part type '" + type->get<std::string>() + "' is not supported (text only)");
    }
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) return bad(err, param, "'" + param + "' text parts need a string 'text'");
    if (!text.empty()) text += "\n";
    text += t->get<std::string>();
  }
  out = text;
  return Status::ok();
}

Status normalise_tool_calls(const Json& calls, const std::string& param, ParseError* err, Json& out) {
  if (!calls.is_array()) return bad(err, param, "'" + param + "' must be an array");
  out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const Json& c = calls[i];
    std::string p = param + "[" + std::to_string(i) + "]";
    if (!c.is_object()) return bad(err, p, "'" + p + "' must be an object");
    auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) return bad(err, p, "'" + p + ".function' must be an object");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) return bad(err, p, "'" + p + ".function.name' must be a string");
    Json args = "{}";
    auto a = fn->find("arguments");
    if (a != fn->end() && !a->is_null()) {
      if (a->is_string()) args = *a;
      else if (a->is_object()) args = a->dump();
      else return bad(err, p, "'" + p + ".function.arguments' must be a JSON string");
    }
    Json nc;
    auto id = c.find("id");
    nc["id"] = (id != c.end() && id->is_string()) ? *id : Json("call_" + std::to_string(i));
    nc["type"] = "function";
    nc["function"] = {{"name", *name}, {"arguments", args}};
    out.push_back(std::move(nc));
  }
  return Status::ok();
}

Status parse_messages(const Json& body, const ParseLimits& limits, ParseError* err, Json& out) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return bad(err, "messages", "'messages' is required");
  if (!it->is_array()) return bad(err, "messages", "'messages' must be an array, got " + type_name(*it));
  if (it->empty()) return bad(err, "messages", "'messages' must not be empty");
  if (it->size() > limits.max_messages) return bad(err, "messages", "too many messages");
  out = Json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(err, p, "'" + p + "' must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return bad(err, p + ".role", "'" + p + ".role' must be a string");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool") {
      return bad(err, p + ".role", "'" + p + ".role' must be system, developer, user, assistant or tool, got '" + r + "'");
    }
    Json nm;
    nm["role"] = r;
    Json content;
    auto c = m.find("content");
    if (c != m.end()) DI_TRY(normalise_content(*c, p + ".content", err, content));
    if (r == "assistant") {
      nm["content"] = content.is_null() ? Json("") : content;
      for (const char* key : {"reasoning_content", "reasoning"}) {
        auto rc = m.find(key);
        if (rc == m.end() || rc->is_null()) continue;
        if (!rc->is_string()) return bad(err, p + "." + key, "'" + p + "." + key + "' must be a string");
        nm["reasoning_content"] = *rc;
        break;
      }
      auto tc = m.find("tool_calls");
      if (tc != m.end() && !tc->is_null()) {
        Json calls;
        DI_TRY(normalise_tool_calls(*tc, p + ".tool_calls", err, calls));
        if (!calls.empty()) nm["tool_calls"] = std::move(calls);
      }
      // DeepSeek's chat prefix completion: the reply continues this message (the last one).
      auto prefix = m.find("prefix");
      if (prefix != m.end() && !prefix->is_null()) {
        if (!prefix->is_boolean()) return bad(err, p + ".prefix", "'" + p + ".prefix' must be a boolean");
        if (prefix->get<bool>()) {
          if (i + 1 != it->size()) return bad(err, p + ".prefix", "only the last message may have 'prefix': true");
          nm["prefix"] = true;
        }
      }
    } else {
      if (!content.is_string()) return bad(err, p + ".content", "'" + p + ".content' is required");
      nm["content"] = content;
    }
    if (r == "tool") {
      auto id = m.find("tool_call_id");
      if (id != m.end() && !id->is_null()) {
        if (!id->is_string()) return bad(err, p + ".tool_call_id", "'" + p + ".tool_call_id' must be a string");
        nm["tool_call_id"] = *id;
      }
    }
    out.push_back(std::move(nm));
  }
  return Status::ok();
}

Status parse_tools(const Json& body, ParseError* err, ChatRequest& r) {
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return bad(err, "tools", "'tools' must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& t = (*it)[i];
      std::string p = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return bad(err, p, "'" + p + "' must be an object");
      auto type = t.find("type");
      if (type != t.end() && *type != "function") return Status(StatusCode::kUnsupported, "'" + p + ".type' must be function");
      auto fn = t.find("function");
      if (fn == t.end() || !fn->is_object()) return bad(err, p + ".function", "'" + p + ".function' must be an object");
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
        return bad(err, p + ".function.name", "'" + p + ".function.name' must be a non-empty string");
      }
      auto params = fn->find("parameters");
      if (params != fn->end() && !params->is_null() && !params->is_object()) {
        return bad(err, p + ".function.parameters", "'" + p + ".function.parameters' must be a JSON schema object");
      }
      Json nt;
      nt["type"] = "function";
      nt["function"] = *fn;
      r.tools.push_back(std::move(nt));
    }
  }
  auto tc = body.find("tool_choice");
  if (tc == body.end() || tc->is_null()) {
    r.tool_choice = r.tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
    return Status::ok();
  }
  if (tc->is_string()) {
    const std::string s = tc->get<std::string>();
    if (s == "auto") r.tool_choice = ToolChoice::kAuto;
    else if (s == "none") r.tool_choice = ToolChoice::kNone;
    else if (s == "required") r.tool_choice = ToolChoice::kRequired;
    else return bad(err, "tool_choice", "'tool_choice' must be auto, none, required or a named function, got '" + s + "'");
  } else if (tc->is_object()) {
    auto fn = tc->find("function");
    if (fn == tc->end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
      return bad(err, "tool_choice", "'tool_choice' object must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    r.tool_choice = ToolChoice::kNamed;
    r.tool_choice_name = (*fn)["name"].get<std::string>();
    bool found = false;
    for (const Json& t : r.tools) found = found || t["function"]["name"] == r.tool_choice_name;
    if (!found) return bad(err, "tool_choice", "'tool_choice' names function '" + r.tool_choice_name + "', which is not in 'tools'");
  } else {
    return bad(err, "tool_choice", "'tool_choice' must be a string or an object");
  }
  if (r.tool_choice != ToolChoice::kNone && r.tools.empty()) {
    return bad(err, "tool_choice", "'tool_choice' needs 'tools'");
  }
  return Status::ok();
}

Status parse_token_ids(const Json& arr, const std::string& param, ParseError* err, std::vector<int32_t>& out) {
  for (const Json& v : arr) {
    if (!v.is_number_integer()) return bad(err, param, "'" + param + "' token ids must be integers");
    if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(kI32Max) : (v.get<int64_t>() < 0 || v.get<int64_t>() > kI32Max)) {
      return bad(err, param, "'" + param + "' token id " + v.dump() + " is out of range");
    }
    out.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return Status::ok();
}

}  // namespace

Result<Json> parse_json_body(std::string_view body) {
  // nlohmann's parser recurses per nesting level: bound the depth first.
  int depth = 0;
  bool in_string = false, escape = false;
  for (char c : body) {
    if (in_string) {
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > 128) return Status::invalid_argument("request body nests deeper than 128 levels");
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  Json j;
  try {
    j = Json::parse(body);
  } catch (const Json::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> the part after "]".
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    return Status::invalid_argument("request body is not valid JSON: " + what);
  }
  if (!j.is_object()) return Status::invalid_argument("request body must be a JSON object, got " + type_name(j));
  return j;
}

Result<ChatRequest> parse_chat_request(const Json& body, const ParseLimits& limits, ParseError* err) {
  ChatRequest r;
  DI_TRY(parse_common(body, limits, err, r));
  if (r.max_tokens_zero) return bad(err, "max_tokens", "'max_tokens' must be at least 1");
  DI_TRY(parse_messages(body, limits, err, r.messages));
  DI_TRY(parse_tools(body, err, r));
  Fields f(body, err);
  // The reply continues the last (assistant) message: its "prefix": true, or vLLM's continue_final_message.
  bool continue_final = false;
  DI_TRY(f.get("continue_final_message", continue_final));
  Json& last = r.messages.back();
  if (last.contains("prefix")) {
    last.erase("prefix");
    continue_final = true;
  }
  if (continue_final) {
    if (last["role"] != "assistant")
      return bad(err, "continue_final_message", "continuing the final message needs the last message to be the assistant's");
    if (last.contains("tool_calls"))
      return bad(err, "messages", "the continued final assistant message must not have tool_calls");
    last["wo_eos"] = true;  // the encoder's spelling: no end-of-sentence after it
    r.continue_final = true;
  }
  bool logprobs = false;
  DI_TRY(f.get("logprobs", logprobs));
  r.sampling.logprobs = logprobs;
  DI_TRY(f.get_int("top_logprobs", 0, kMaxTopLogprobs, r.sampling.top_logprobs));
  if (r.sampling.top_logprobs > 0 && !logprobs) return bad(err, "top_logprobs", "'top_logprobs' requires 'logprobs': true");
  DI_TRY(f.get("reasoning_effort", r.reasoning_effort));
  if (const Json* rf = f.find("response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      return bad(err, "response_format", "'response_format' must be an object with a string 'type'");
    }
    const std::string t = (*rf)["type"].get<std::string>();
    if (t != "text" && t != "json_object" && t != "json_schema") {
      return bad(err, "response_format", "'response_format.type' must be text, json_object or json_schema");
    }
    if (t != "text") r.response_format = *rf;
    DI_TRY(structured_from_response_format(r.response_format, err, r.structured));
  }
  if (const Json* th = f.find("thinking")) {  // DeepSeek API: {"type": "enabled" | "disabled"}
    if (th->is_boolean()) r.thinking = th->get<bool>();
    else if (th->is_object() && th->contains("type") && (*th)["type"].is_string()) r.thinking = (*th)["type"] == "enabled";
    else return bad(err, "thinking", "'thinking' must be {\"type\": \"enabled\" | \"disabled\"}");
  }
  if (const Json* kw = f.find("chat_template_kwargs")) {
    if (!kw->is_object()) return f.type_error("chat_template_kwargs", "an object", *kw);
    Fields k(*kw, err, "chat_template_kwargs.");
    std::optional<bool> thinking, enable_thinking;
    DI_TRY(k.get("thinking", thinking));
    DI_TRY(k.get("enable_thinking", enable_thinking));
    if (thinking) r.thinking = thinking;
    else if (enable_thinking) r.thinking = enable_thinking;
    DI_TRY(k.get("drop_thinking", r.drop_thinking));
    if (r.reasoning_effort.empty()) DI_TRY(k.get("reasoning_effort", r.reasoning_effort));
  }
  return r;
}

Result<CompletionRequest> parse_completion_request(const Json& body, const ParseLimits& limits, ParseError* err) {
  CompletionRequest r;
  DI_TRY(parse_common(body, limits, err, r));
  Fields f(body, err);
  if (const Json* rf = f.find("response_format")) {  // vLLM accepts it on completions too
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      return bad(err, "response_format", "'response_format' must be an object with a string 'type'");
    DI_TRY(structured_from_response_format(*rf, err, r.structured));
  }
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad(err, "prompt", "'prompt' is required");
  const Json& p = *it;
  auto too_many = [&](size_t n) -> Status {
    if (n > limits.max_prompts) {
      return bad(err, "prompt", "'prompt' has " + std::to_string(n) + " prompts; at most " + std::to_string(limits.max_prompts) + " are allowed");
    }
    return Status::ok();
  };
  if (p.is_string()) {
    r.prompts.push_back({true, p.get<std::string>(), {}});
  } else if (p.is_array()) {
    if (p.empty()) return bad(err, "prompt", "'prompt' must not be empty");
    if (p[0].is_string()) {
      DI_TRY(too_many(p.size()));
      for (const Json& s : p) {
        if (!s.is_string()) return bad(err, "prompt", "'prompt' mixes strings and other values");
        r.prompts.push_back({true, s.get<std::string>(), {}});
      }
    } else if (p[0].is_number()) {
      PromptInput in;
      DI_TRY(parse_token_ids(p, "prompt", err, in.ids));
      r.prompts.push_back(std::move(in));
    } else if (p[0].is_array()) {
      DI_TRY(too_many(p.size()));
      for (const Json& ids : p) {
        if (!ids.is_array()) return bad(err, "prompt", "'prompt' mixes token-id lists and other values");
        PromptInput in;
        DI_TRY(parse_token_ids(ids, "prompt", err, in.ids));
        r.prompts.push_back(std::move(in));
      }
    } else {
      return bad(err, "prompt", "'prompt' must be a string, an array of strings, an array of token ids or an array of token-id arrays");
    }
  } else {
    return bad(err, "prompt", "'prompt' must be a string, an array of strings, an array of token ids or an array of token-id arrays, got " + type_name(p));
  }
  for (const PromptInput& in : r.prompts) {
    if (in.is_text ? in.text.empty() : in.ids.empty()) return bad(err, "prompt", "'prompt' must not be empty");
  }
  DI_TRY(f.get("echo", r.echo));
  std::optional<int64_t> logprobs;
  if (const Json* lp = f.find("logprobs"); lp && lp->is_boolean()) {
    return bad(err, "logprobs", "'logprobs' of /v1/completions is an integer (the number of alternatives)");
  }
  DI_TRY(f.get_int("logprobs", 0, limits.max_completion_logprobs, logprobs));
  if (logprobs) {
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = static_cast<int32_t>(*logprobs);
  }
  std::string suffix;
  DI_TRY(f.get("suffix", suffix));
  if (!suffix.empty()) return Status(StatusCode::kUnsupported, "'suffix' is not supported");
  if (r.max_tokens_zero) {
    if (!r.echo) return bad(err, "max_tokens", "'max_tokens' must be at least 1 (0 only with 'echo': true)");
    if (r.sampling.n != 1) return bad(err, "n", "'max_tokens': 0 (the prompt only) needs n = 1");
    r.echo_only = true;
    r.sampling.max_tokens = 1;
  }
  // echo with logprobs lists the prompt's tokens first, with as many alternatives as the completion's.
  if (r.echo && r.sampling.logprobs)
    r.sampling.prompt_logprobs = std::max(r.sampling.prompt_logprobs, r.sampling.top_logprobs);
  return r;
}

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens, int64_t reasoning_tokens) {
  Json u;
  u["prompt_tokens"] = prompt_tokens;
  u["completion_tokens"] = completion_tokens;
  u["total_tokens"] = prompt_tokens + completion_tokens;
  u["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
  if (reasoning_tokens >= 0) u["completion_tokens_details"] = {{"reasoning_tokens", reasoning_tokens}};
  u["prompt_cache_hit_tokens"] = cached_tokens;
  u["prompt_cache_miss_tokens"] = prompt_tokens - cached_tokens;
  return u;
}

std::string json_safe_text(std::string_view bytes) {
  if (tokenizer::validate_utf8(bytes).is_ok()) return std::string(bytes);
  return tokenizer::utf8_lossy(bytes);
}

}  // namespace deepinfer::server
