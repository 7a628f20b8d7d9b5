#include "tokenizer/chat_encoding.h"

#include "tokenizer/chat_messages.h"
#include "tokenizer/python_json.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

using chat::get;
using chat::Json;
using chat::py_str;
using chat::truthy;

constexpr const char* kReasoningEffortMaxV4 =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

constexpr const char* kResponseFormatPrefix =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

const std::pair<const char*, const char*> kTaskTokens[] = {
    {"action", "<｜action｜>"}, {"query", "<｜query｜>"},   {"authority", "<｜authority｜>"},
    {"domain", "<｜domain｜>"}, {"title", "<｜title｜>"},   {"read_url", "<｜read_url｜>"},
};

// Accumulates the prompt text and the ranges of control tokens.
class PromptBuilder {
 public:
  void plain(std::string_view s) { out_.text.append(s); }
  void special(std::string_view s) {
    auto b = static_cast<uint32_t>(out_.text.size());
    out_.text.append(s);
    out_.special_ranges.push_back(SpecialRange{b, static_cast<uint32_t>(out_.text.size())});
  }
  /// `<｜DSML｜name` with the tag name of the format (V4.1 adds a leading space).
  void dsml_open(std::string_view lead, std::string_view name, bool v41) {
    plain(lead);
    special(tokens::kDsml);
    if (v41) plain(" ");
    plain(name);
  }
  RenderedPrompt take() { return std::move(out_); }

 private:
  RenderedPrompt out_;
};

struct RenderContext {
  const ChatEncodeOptions& opts;
  const Json& messages;
  bool drop_thinking;
  bool thinking() const { return opts.thinking_mode == ThinkingMode::kThinking; }
  bool v41() const { return opts.format == ChatFormat::kV41; }
};

const char* tool_calls_block_name(bool v41) { return v41 ? "calls" : "tool_calls"; }

void render_tools(const Json& functions, bool v41, PromptBuilder& b) {
  const char* block = tool_calls_block_name(v41);
  b.plain("## Tools\n\nYou have access to a set of tools to help answer the user's question. "
          "You can invoke tools by writing a \"");
  b.dsml_open("<", block, v41);
  b.plain(">\" block like the following:\n\n");
  b.dsml_open("<", block, v41);
  b.plain(">\n");
  b.dsml_open("<", "invoke", v41);
  b.plain(" name=\"$TOOL_NAME\">\n");
  b.dsml_open("<", "parameter", v41);
  b.plain(" name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE");
  b.dsml_open("</", "parameter", v41);
  b.plain(">\n...\n");
  b.dsml_open("</", "invoke", v41);
  b.plain(">\n");
  b.dsml_open("<", "invoke", v41);
  b.plain(" name=\"$TOOL_NAME2\">\n...\n");
  b.dsml_open("</", "invoke", v41);
  b.plain(">\n");
  b.dsml_open("</", block, v41);
  b.plain(">\n\nString parameters should be specified as is and set `string=\"true\"`. For all other types "
          "(numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
          "If thinking_mode is enabled (triggered by ");
  b.special(tokens::kThinkStart);
  b.plain("), you MUST output your complete reasoning inside ");
  b.special(tokens::kThinkStart);
  b.plain("...");
  b.special(tokens::kThinkEnd);
  b.plain(" BEFORE any tool calls or final response.\n\nOtherwise, output directly after ");
  b.special(tokens::kThinkEnd);
  b.plain(" with tool calls or final response.\n\n### Available Tool Schemas\n\n");
  for (size_t i = 0; i < functions.size(); ++i) {
    if (i > 0) b.plain("\n");
    b.plain(python_json_dumps(functions[i]));
  }
  b.plain("\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n");
}

// V4.1 (_tools_from_openai_format of encoding.py): a tool's name is qualified as
// `namespace::name`. The namespace comes from the tool's (or its function's) "namespace" — a
// string or {"name", "description"} — or from a `ns::name` spelling of the name itself; a
// namespace description is prepended to the tool's description; the "namespace" key is not
// rendered.
Result<Json> v41_qualified_function(const Json& tool) {
  Json fn = tool["function"];
  if (!fn.is_object()) return Status::invalid_argument("tool \"function\" must be an object");
  if (!get(tool, "namespace").is_null()) fn["namespace"] = tool["namespace"];
  Json ns = get(fn, "namespace");
  std::string ns_name;
  bool has_ns = false;
  if (ns.is_object()) {
    if (!get(ns, "name").is_string()) return Status::invalid_argument("tool namespace without a string \"name\"");
    ns_name = ns["name"].get<std::string>();
    has_ns = true;
  } else if (ns.is_string()) {
    ns_name = ns.get<std::string>();
    has_ns = true;
  } else if (!ns.is_null()) {
    return Status::invalid_argument("tool namespace must be a string or an object");
  }
  if (!get(fn, "name").is_string()) return Status::invalid_argument("tool without a string \"name\"");
  std::string name = fn["name"].get<std::string>();
  if (size_t sep = name.find("::"); sep != std::string::npos) {
    std::string prefix = name.substr(0, sep);
    if (has_ns && ns_name != prefix) {
      return Status::invalid_argument("conflicting tool namespaces: " + ns_name + " != " + prefix);
    }
    ns_name = prefix;
    has_ns = true;
    name = name.substr(sep + 2);
  }
  if (name.find("::") != std::string::npos) return Status::invalid_argument("tool name must not contain '::': " + name);
  if (has_ns && ns_name.find("::") != std::string::npos) {
    return Status::invalid_argument("tool namespace must not contain '::': " + ns_name);
  }
  fn["name"] = has_ns ? ns_name + "::" + name : name;
  fn.erase("namespace");
  if (ns.is_object() && truthy(get(ns, "description"))) {
    const Json& d = get(fn, "description");
    fn["description"] = py_str(ns["description"]) + "\n" + (truthy(d) ? py_str(d) : std::string());
  }
  return fn;
}

Result<Json> tools_from_openai_format(const Json& tools, bool v41) {
  Json out = Json::array();
  for (const Json& t : tools) {
    if (!t.is_object() || !t.contains("function")) return Status::invalid_argument("tool without \"function\"");
    if (v41) {
      DI_ASSIGN_OR_RETURN(Json fn, v41_qualified_function(t));
      out.push_back(std::move(fn));
    } else {
      out.push_back(t["function"]);
    }
  }
  return out;
}

void render_tools_and_format(const Json& msg, const RenderContext& rc, PromptBuilder& b, const Json& functions) {
  if (truthy(functions)) {
    b.plain("\n\n");
    render_tools(functions, rc.v41(), b);
  }
  const Json& rf = get(msg, "response_format");
  if (truthy(rf)) {
    b.plain("\n\n");
    b.plain(kResponseFormatPrefix);
    b.plain(python_json_dumps(rf));
  }
}

// encode_arguments_to_dsml: one <｜DSML｜parameter ...> line per argument.
Status render_arguments(const Json& arguments, bool v41, PromptBuilder& b) {
  Json args;
  if (arguments.is_string()) {
    try {
      args = Json::parse(arguments.get<std::string>());
    } catch (const std::exception&) {
      args = Json{{"arguments", arguments}};
    }
  } else {
    args = arguments;  // already an object (the official encoder only takes JSON strings)
  }
  if (!args.is_object()) return Status::invalid_argument("tool call arguments must be a JSON object");
  bool first = true;
  for (auto it = args.begin(); it != args.end(); ++it) {
    if (!first) b.plain("\n");
    first = false;
    const bool is_str = it.value().is_string();
    b.dsml_open("<", "parameter", v41);
    b.plain(" name=\"" + it.key() + "\" string=\"" + (is_str ? "true" : "false") + "\">");
    b.plain(is_str ? it.value().get<std::string>() : python_json_dumps(it.value()));
    b.dsml_open("</", "parameter", v41);
    b.plain(">");
  }
  return Status::ok();
}

Status render_tool_calls(const Json& tool_calls, bool v41, PromptBuilder& b) {
  const char* block = tool_calls_block_name(v41);
  b.plain("\n\n");
  b.dsml_open("<", block, v41);
  b.plain(">\n");
  bool first = true;
  for (const Json& tc : tool_calls) {
    const Json& fn = get(tc, "function");
    if (!fn.is_object()) return Status::invalid_argument("tool call without \"function\"");
    if (!first) b.plain("\n");
    first = false;
    b.dsml_open("<", "invoke", v41);
    b.plain(" name=\"" + py_str(get(fn, "name")) + "\">\n");
    DI_TRY(render_arguments(get(fn, "arguments"), v41, b));
    b.plain("\n");
    b.dsml_open("</", "invoke", v41);
    b.plain(">");
  }
  b.plain("\n");
  b.dsml_open("</", block, v41);
  b.plain(">");
  return Status::ok();
}

void render_user(const Json& msg, PromptBuilder& b) {
  b.special(tokens::kUser);
  const Json& blocks = get(msg, "content_blocks");
  if (!truthy(blocks)) {
    if (truthy(get(msg, "content"))) b.plain(py_str(get(msg, "content")));
    return;
  }
  bool first = true;
  for (const Json& block : blocks) {
    if (!first) b.plain("\n\n");
    first = false;
    const Json& type = get(block, "type");
    if (type == "text") {
      const Json& t = get(block, "text");
      b.plain(t.is_null() ? std::string() : py_str(t));
    } else if (type == "tool_result") {
      const Json& content = get(block, "content");
      std::string text;
      if (content.is_array()) {
        for (size_t i = 0; i < content.size(); ++i) {
          if (i > 0) text += "\n\n";
          const Json& part = content[i];
          text += get(part, "type") == "text" ? py_str(get(part, "text"))
                                              : "[Unsupported " + py_str(get(part, "type")) + "]";
        }
      } else {
        text = py_str(content);
      }
      b.plain("<tool_result>" + text + "</tool_result>");
    } else {
      b.plain("[Unsupported " + py_str(type) + "]");
    }
  }
}

Status render_assistant(size_t index, const Json& msg, const RenderContext& rc, int64_t last_user, PromptBuilder& b) {
  const bool prev_has_task = index >= 1 && !get(rc.messages[index - 1], "task").is_null();
  if (rc.thinking() && !prev_has_task && (!rc.drop_thinking || static_cast<int64_t>(index) > last_user)) {
    const Json& r = get(msg, "reasoning_content");
    if (truthy(r)) b.plain(py_str(r));
    b.special(tokens::kThinkEnd);
  }
  if (truthy(get(msg, "content"))) b.plain(py_str(get(msg, "content")));
  if (truthy(get(msg, "tool_calls"))) DI_TRY(render_tool_calls(msg["tool_calls"], rc.v41(), b));
  if (!truthy(get(msg, "wo_eos"))) b.special(tokens::kEos);
  return Status::ok();
}

// V4.1: the effort prefix text, or "" (V4.1's effort is numeric: low 50, high 75, max 100).
Result<std::string> v41_effort_prefix(const ChatEncodeOptions& opts) {
  if (opts.thinking_mode != ThinkingMode::kThinking) return std::string();
  std::string e = opts.reasoning_effort.empty() ? "high" : opts.reasoning_effort;
  int value = 0;
  if (e == "low") value = 50;
  else if (e == "high") value = 75;
  else if (e == "max") value = 100;
  else {
    char* end = nullptr;
    long v = std::strtol(e.c_str(), &end, 10);
    if (end == e.c_str() || *end != '\0' || v < 1 || v > 100) {
      return Status::invalid_argument("reasoning_effort must be low|high|max or 1..100, got '" + e + "'");
    }
    value = static_cast<int>(v);
  }
  return "Reasoning Effort: " + std::to_string(value) +
         " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";
}

// The transition after a message: the generation prompt or a task token (render_message's tail).
Status render_transition(size_t index, const Json& msg, const RenderContext& rc, int64_t last_user, PromptBuilder& b) {
  const Json& msgs = rc.messages;
  if (index + 1 < msgs.size()) {
    const Json& next_role = get(msgs[index + 1], "role");
    if (next_role != "assistant" && next_role != "latest_reminder") return Status::ok();
  }
  const Json& task = get(msg, "task");
  const Json& role = get(msg, "role");
  if (!task.is_null()) {
    const char* token = nullptr;
    for (const auto& [name, spelling] : kTaskTokens) {
      if (task == name) token = spelling;
    }
    if (token == nullptr) return Status::invalid_argument("invalid task '" + py_str(task) + "'");
    if (task != "action") {
      b.special(token);
    } else {
      b.special(tokens::kAssistant);
      b.special(rc.thinking() ? tokens::kThinkStart : tokens::kThinkEnd);
      b.special(token);
    }
  } else if (role == "user" || (rc.v41() ? role == "system" && index > 0 : role == "developer")) {
    // V4.1: a mid-conversation system message is a generation boundary like a user turn.
    b.special(tokens::kAssistant);
    bool think = rc.thinking() && (!rc.drop_thinking || static_cast<int64_t>(index) >= last_user);
    b.special(think ? tokens::kThinkStart : tokens::kThinkEnd);
  }
  return Status::ok();
}

Status render_message(size_t index, const RenderContext& rc, PromptBuilder& b) {
  const Json& msg = rc.messages[index];
  const int64_t last_user = chat::find_last_user_index(rc.messages, rc.v41());
  const Json& role = get(msg, "role");
  Json functions = Json::array();
  if (truthy(get(msg, "tools"))) {
    DI_ASSIGN_OR_RETURN(functions, tools_from_openai_format(msg["tools"], rc.v41()));
  }
  if (!rc.v41() && index == 0 && rc.thinking()) {
    const std::string& e = rc.opts.reasoning_effort;
    if (!e.empty() && e != "high" && e != "max") {
      return Status::invalid_argument("V4 reasoning_effort must be high or max, got '" + e + "'");
    }
    if (e == "max") b.plain(kReasoningEffortMaxV4);
  }
  if (rc.v41() && index == 0) {
    DI_ASSIGN_OR_RETURN(std::string prefix, v41_effort_prefix(rc.opts));
    if (role == "system" || !prefix.empty()) b.special(tokens::kSystem);
    b.plain(prefix);
  } else if (rc.v41() && role == "system") {
    b.special(tokens::kSystem);  // V4.1 allows system messages mid-conversation
  }
  if (role == "system") {
    if (truthy(get(msg, "content"))) b.plain(py_str(get(msg, "content")));
    render_tools_and_format(msg, rc, b, functions);
  } else if (role == "developer") {
    if (rc.v41()) return Status::invalid_argument("V4.1 has no developer role");
    if (!truthy(get(msg, "content"))) return Status::invalid_argument("developer message without content");
    b.special(tokens::kUser);
    b.plain(py_str(get(msg, "content")));
    render_tools_and_format(msg, rc, b, functions);
  } else if (role == "user") {
    render_user(msg, b);
  } else if (role == "latest_reminder") {
    b.special(tokens::kLatestReminder);
    b.plain(py_str(get(msg, "content")));
  } else if (role == "assistant") {
    DI_TRY(render_assistant(index, msg, rc, last_user, b));
  } else {
    return Status::invalid_argument("unknown role '" + py_str(role) + "'");
  }
  return render_transition(index, msg, rc, last_user, b);
}

}  // namespace

Result<RenderedPrompt> render_chat(const Json& messages, const ChatEncodeOptions& opts, const Json& context) {
  try {
    if (!context.is_array()) return Status::invalid_argument("context must be a JSON array");
    DI_ASSIGN_OR_RETURN(Json merged, chat::merge_tool_messages(messages));
    // The official encoder orders tool results using the calls seen in context + messages.
    Json all = context;
    for (const Json& m : merged) all.push_back(m);
    chat::sort_tool_results_by_call_order(all);
    Json msgs = Json::array();
    for (size_t i = context.size(); i < all.size(); ++i) msgs.push_back(all[i]);
    DI_ASSIGN_OR_RETURN(Json ctx, chat::merge_tool_messages(context));
    chat::sort_tool_results_by_call_order(ctx);

    Json full = ctx;
    for (const Json& m : msgs) full.push_back(m);
    PromptBuilder b;
    if (opts.add_default_bos_token && ctx.empty()) b.special(tokens::kBos);
    bool drop = opts.drop_thinking;
    for (const Json& m : full) {
      if (truthy(get(m, "tools"))) drop = false;
    }
    size_t num_to_render = msgs.size(), context_len = ctx.size();
    if (opts.thinking_mode == ThinkingMode::kThinking && drop) {
      const bool v41 = opts.format == ChatFormat::kV41;
      full = chat::drop_thinking_messages(full, v41);
      num_to_render = full.size() - chat::drop_thinking_messages(ctx, v41).size();
      context_len = full.size() - num_to_render;
    }
    RenderContext rc{opts, full, drop};
    for (size_t i = 0; i < num_to_render; ++i) DI_TRY(render_message(i + context_len, rc, b));
    RenderedPrompt out = b.take();
    DI_TRY(validate_utf8(out.text).with_context("rendered prompt"));
    return out;
  } catch (const std::exception& e) {
    return Status::invalid_argument(std::string("chat messages: ") + e.what());
  }
}

Result<std::vector<TokenId>> encode_rendered(const Tokenizer& tok, const RenderedPrompt& p) {
  DI_TRY(validate_utf8(p.text));
  std::vector<TokenId> ids;
  ids.reserve(p.text.size() / 3 + p.special_ranges.size());
  size_t plain_begin = 0;
  for (const SpecialRange& r : p.special_ranges) {
    if (r.begin < plain_begin || r.end > p.text.size() || r.begin >= r.end) {
      return Status::invalid_argument("special ranges must be ascending and inside the text");
    }
    auto id = tok.added_token_id(std::string_view(p.text).substr(r.begin, r.end - r.begin));
    if (!id) continue;  // not a control token of this vocabulary: stays part of the plain text
    tok.append_plain(std::string_view(p.text).substr(plain_begin, r.begin - plain_begin), ids);
    ids.push_back(*id);
    plain_begin = r.end;
  }
  tok.append_plain(std::string_view(p.text).substr(plain_begin), ids);
  return ids;
}

Result<std::vector<TokenId>> encode_chat(const Tokenizer& tok, const Json& messages, const ChatEncodeOptions& opts) {
  DI_ASSIGN_OR_RETURN(RenderedPrompt p, render_chat(messages, opts));
  return encode_rendered(tok, p);
}

}  // namespace deepinfer::tokenizer
