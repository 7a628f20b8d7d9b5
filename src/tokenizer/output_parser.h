// OutputParser: turns the model's generated text (V4 / V4.1 format) into OpenAI response fields:
// reasoning_content, content and tool_calls (DSML markup -> JSON arguments), incrementally.
//
// It follows the official `parse_message_from_completion_text` of encoding_dsv4.py: reasoning
// ends at `</think>`; content ends at EOS or at `\n\n<｜DSML｜tool_calls` (V4.1: `｜DSML｜ calls`);
// each `<｜DSML｜invoke name="f">` is a call whose parameters become
// `{"k": <value>}` (string="true": a JSON string of the raw value; else the raw JSON text),
// joined with ", " as the official decoder does. A stray `</think>` in content is dropped.
//
// Streaming-safe: push() may split the text anywhere (on UTF-8 boundaries); text that could be
// the start of a marker is held back until it is decided, so no marker byte ever reaches
// content, and the concatenated deltas of any chunking equal the one-shot result. Malformed
// DSML sets an error (see status()) and stops the parse. One object per response; not
// thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::tokenizer {

struct ToolCallDelta {
  int32_t index = 0;      // position of the call in the response
  std::string name;       // set in the first delta of a call only
  std::string arguments;  // a piece of the JSON arguments text
};

struct OutputDelta {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning_content.empty() && content.empty() && tool_calls.empty(); }
  /// Appends a later delta's pieces.
  void append(OutputDelta more) {
    reasoning_content += more.reasoning_content;
    content += more.content;
    for (auto& tc : more.tool_calls) tool_calls.push_back(std::move(tc));
  }
};

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON object text
};

struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
};

struct OutputParserOptions {
  ChatFormat format = ChatFormat::kV4;
  /// The prompt ended with `<think>`: output starts in the reasoning.
  bool starts_in_reasoning = false;
};

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions opts);

  /// Feeds generated text; returns what became final.
  OutputDelta push(std::string_view text);
  /// Ends the stream, releasing held-back text. Fails if the output is malformed or stopped
  /// inside a tool-call block; a response cut inside reasoning or content is fine.
  Result<OutputDelta> finish();
  /// Everything parsed so far.
  const ParsedMessage& message() const { return message_; }
  const Status& status() const { return status_; }

 private:
  enum class State {
    kReasoning, kContent, kCallsGap, kInvokeName, kAfterInvokeName, kParamHeader, kParamValue,
    kParamGap, kAfterCalls, kDone, kError,
  };
  enum class Step { kProgress, kNeedMore };
  Step step(OutputDelta& d);
  Step step_text(OutputDelta& d);
  Step step_structure(OutputDelta& d);
  void emit_text(std::string_view s, OutputDelta& d);
  void emit_args(std::string_view s, OutputDelta& d);
  void fail(const std::string& why);

  OutputParserOptions opts_;
  State state_;
  std::string buf_;  // received, not yet consumed
  ParsedMessage message_;
  Status status_;
  bool param_is_string_ = false;
  int32_t num_params_ = 0;
  // Markers of the format.
  std::string calls_start_, invoke_open_, invoke_close_, param_open_, param_close_, calls_end_;
};

/// One-shot: push(text) + finish().
Result<ParsedMessage> parse_completion(std::string_view text, const OutputParserOptions& opts);

}  // namespace deepinfer::tokenizer
