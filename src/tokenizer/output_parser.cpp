#include "tokenizer/output_parser.h"

#include "tokenizer/python_json.h"

namespace deepinfer::tokenizer {
namespace {

constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view s, std::string_view marker) {
  size_t max = std::min(s.size(), marker.size() - 1);
  for (size_t n = max; n > 0; --n) {
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
// `s` is a (possibly empty) proper prefix of `p`: more input may still make it `p`.
bool could_become(std::string_view s, std::string_view p) { return s.size() < p.size() && starts_with(p, s); }

std::string json_string_body(std::string_view s) {
  std::string q = python_json_dumps(nlohmann::ordered_json(std::string(s)));
  return q.substr(1, q.size() - 2);
}

}  // namespace

OutputParser::OutputParser(OutputParserOptions opts)
    : opts_(opts), state_(opts.starts_in_reasoning ? State::kReasoning : State::kContent) {
  const bool v41 = opts.format == ChatFormat::kV41;
  const std::string dsml = tokens::kDsml;
  const std::string block = v41 ? " calls" : "tool_calls";
  const std::string invoke = v41 ? " invoke" : "invoke";
  const std::string param = v41 ? " parameter" : "parameter";
  calls_start_ = "\n\n<" + dsml + block;
  invoke_open_ = "<" + dsml + invoke;
  invoke_close_ = "</" + dsml + invoke;
  param_open_ = "<" + dsml + param;
  param_close_ = "</" + dsml + param;
  calls_end_ = "</" + dsml + block + ">";
}

void OutputParser::fail(const std::string& why) {
  status_ = Status::invalid_argument("model output: " + why);
  state_ = State::kError;
}

void OutputParser::emit_text(std::string_view s, OutputDelta& d) {
  if (s.empty()) return;
  if (state_ == State::kReasoning) {
    d.reasoning_content.append(s);
    message_.reasoning_content.append(s);
  } else if (state_ == State::kContent) {
    d.content.append(s);
    message_.content.append(s);
  } else {  // kParamValue
    emit_args(param_is_string_ ? json_string_body(s) : std::string(s), d);
  }
}

void OutputParser::emit_args(std::string_view s, OutputDelta& d) {
  if (s.empty()) return;
  const int32_t index = static_cast<int32_t>(message_.tool_calls.size()) - 1;
  message_.tool_calls.back().arguments.append(s);
  if (!d.tool_calls.empty() && d.tool_calls.back().index == index) {
    d.tool_calls.back().arguments.append(s);
  } else {
    d.tool_calls.push_back(ToolCallDelta{index, "", std::string(s)});
  }
}

// Text states: emit up to the first marker, holding back a possible partial marker.
OutputParser::Step OutputParser::step_text(OutputDelta& d) {
  std::vector<std::string_view> markers;
  if (state_ == State::kReasoning) markers = {kThinkEnd};
  if (state_ == State::kContent) markers = {kEos, calls_start_, kThinkEnd};
  if (state_ == State::kParamValue) markers = {param_close_};
  size_t best = std::string::npos;
  std::string_view hit;
  for (std::string_view m : markers) {
    size_t p = buf_.find(m);
    if (p < best) {
      best = p;
      hit = m;
    }
  }
  if (best == std::string::npos) {
    size_t hold = 0;
    for (std::string_view m : markers) hold = std::max(hold, partial_suffix(buf_, m));
    emit_text(std::string_view(buf_).substr(0, buf_.size() - hold), d);
    buf_.erase(0, buf_.size() - hold);
    return Step::kNeedMore;
  }
  emit_text(std::string_view(buf_).substr(0, best), d);
  buf_.erase(0, best + hit.size());
  if (state_ == State::kReasoning) {
    state_ = State::kContent;
  } else if (state_ == State::kContent) {
    if (hit == kEos) state_ = State::kDone;
    if (hit == calls_start_) state_ = State::kCallsGap;
    // a stray </think> in content is dropped
  } else {
    if (param_is_string_) emit_args("\"", d);
    state_ = State::kParamGap;
  }
  return Step::kProgress;
}

// Structural states: wait until the next piece of markup is complete, then consume it.
OutputParser::Step OutputParser::step_structure(OutputDelta& d) {
  std::string_view b = buf_;
  auto expect_either = [&](std::string_view lead, std::string_view m1, std::string_view m2) -> int {
    // 1 or 2: `lead` + m1/m2 is at the front; 0: need more; -1: malformed.
    if (could_become(b, lead)) return 0;
    if (!starts_with(b, lead)) return -1;
    std::string_view rest = b.substr(lead.size());
    if (starts_with(rest, m1)) return 1;
    if (starts_with(rest, m2)) return 2;
    return (could_become(rest, m1) || could_become(rest, m2)) ? 0 : -1;
  };
  switch (state_) {
    case State::kCallsGap: {
      int r = expect_either(">\n", invoke_open_, calls_end_);
      if (r == 0) return Step::kNeedMore;
      if (r < 0) return fail("expected '>\\n' then an invoke or the end of the tool calls"), Step::kProgress;
      buf_.erase(0, 2 + (r == 1 ? invoke_open_.size() : calls_end_.size()));
      state_ = r == 1 ? State::kInvokeName : State::kAfterCalls;
      return Step::kProgress;
    }
    case State::kInvokeName: {
      size_t i = 0;
      while (i < b.size() && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r')) ++i;
      if (i == b.size() || could_become(b.substr(i), "name=\"")) return Step::kNeedMore;
      if (!starts_with(b.substr(i), "name=\"")) return fail("invoke without name=\"...\""), Step::kProgress;
      size_t end = b.find("\">\n", i + 6);
      if (end == std::string_view::npos) return Step::kNeedMore;
      message_.tool_calls.push_back(ParsedToolCall{std::string(b.substr(i + 6, end - i - 6)), ""});
      d.tool_calls.push_back(ToolCallDelta{static_cast<int32_t>(message_.tool_calls.size()) - 1,
                                           message_.tool_calls.back().name, ""});
      num_params_ = 0;
      buf_.erase(0, end + 3);
      state_ = State::kAfterInvokeName;
      return Step::kProgress;
    }
    case State::kAfterInvokeName:
    case State::kParamGap: {
      int r = expect_either(state_ == State::kParamGap ? ">\n" : "", param_open_, invoke_close_);
      if (r == 0) return Step::kNeedMore;
      if (r < 0) return fail("expected a parameter or the end of the invoke"), Step::kProgress;
      buf_.erase(0, (state_ == State::kParamGap ? 2 : 0) + (r == 1 ? param_open_.size() : invoke_close_.size()));
      if (r == 1) {
        state_ = State::kParamHeader;
      } else {
        emit_args(num_params_ == 0 ? "{}" : "}", d);
        state_ = State::kCallsGap;
      }
      return Step::kProgress;
    }
    case State::kParamHeader: {
      if (could_become(b, " name=\"")) return Step::kNeedMore;
      if (!starts_with(b, " name=\"")) return fail("parameter without name=\"...\""), Step::kProgress;
      size_t q = b.find("\" string=\"", 7);
      if (q == std::string_view::npos) return Step::kNeedMore;
      std::string_view flag = b.substr(q + 10);
      bool is_str;
      size_t flag_len;
      if (starts_with(flag, "true\">")) {
        is_str = true;
        flag_len = 6;
      } else if (starts_with(flag, "false\">")) {
        is_str = false;
        flag_len = 7;
      } else if (could_become(flag, "true\">") || could_become(flag, "false\">")) {
        return Step::kNeedMore;
      } else {
        return fail("parameter string= must be true or false"), Step::kProgress;
      }
      std::string key = std::string(b.substr(7, q - 7));
      std::string head = (num_params_++ == 0 ? "{" : ", ") + python_json_dumps(nlohmann::ordered_json(key)) + ": ";
      if (is_str) head += "\"";
      emit_args(head, d);
      param_is_string_ = is_str;
      buf_.erase(0, q + 10 + flag_len);
      state_ = State::kParamValue;
      return Step::kProgress;
    }
    case State::kAfterCalls:
    case State::kDone: {
      if (state_ == State::kAfterCalls) {
        if (could_become(b, kEos)) return Step::kNeedMore;
        if (starts_with(b, kEos)) {
          buf_.erase(0, kEos.size());
          state_ = State::kDone;
          return Step::kProgress;
        }
      }
      if (b.empty()) return Step::kNeedMore;
      return fail("unexpected text after the end of the message"), Step::kProgress;
    }
    default:
      return Step::kNeedMore;
  }
}

OutputParser::Step OutputParser::step(OutputDelta& d) {
  switch (state_) {
    case State::kReasoning:
    case State::kContent:
    case State::kParamValue:
      return step_text(d);
    case State::kError:
      buf_.clear();
      return Step::kNeedMore;
    default:
      return step_structure(d);
  }
}

OutputDelta OutputParser::push(std::string_view text) {
  OutputDelta d;
  buf_.append(text);
  while (step(d) == Step::kProgress) {
  }
  return d;
}

Result<OutputDelta> OutputParser::finish() {
  OutputDelta d;
  if (state_ == State::kReasoning || state_ == State::kContent) {
    emit_text(buf_, d);
    buf_.clear();
  }
  if (state_ == State::kError) return status_;
  if (state_ != State::kReasoning && state_ != State::kContent && state_ != State::kDone &&
      state_ != State::kAfterCalls) {
    fail("stopped inside a tool-call block");
    return status_;
  }
  return d;
}

Result<ParsedMessage> parse_completion(std::string_view text, const OutputParserOptions& opts) {
  OutputParser p(opts);
  p.push(text);
  auto r = p.finish();
  if (!r.is_ok()) return r.status();
  return p.message();
}

}  // namespace deepinfer::tokenizer
