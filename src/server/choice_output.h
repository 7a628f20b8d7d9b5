// ChoiceOutput: one choice's generated tokens -> the text a client sees, incrementally:
// token ids -> UTF-8-safe detokenizer -> stop-string filter -> (chat) reasoning/content/tool
// split. Streaming and one-shot use the same path, so their concatenated deltas are equal.
//
// Stop strings are matched on the decoded text, across token boundaries: text that could still
// become a stop string is held back, the stop string itself is dropped (unless
// include_stop_str_in_output), and tokens after the one that completed it are ignored. This
// holds whether or not the engine also detected the string. Without a tokenizer only token ids
// are produced. One object per choice; not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_client.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

class StopStringFilter {
 public:
  StopStringFilter(std::vector<std::string> stops, bool include_stop)
      : stops_(std::move(stops)), include_(include_stop) {}
  /// Appends `text` (whole UTF-8 characters); returns the text that is now final.
  std::string push(std::string_view text);
  /// End of the output: the held-back text.
  std::string flush();
  bool stopped() const { return matched_.has_value(); }
  const std::optional<std::string>& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  bool include_;
  std::string held_;
  std::optional<std::string> matched_;
};

struct ChoiceOutputOptions {
  const tokenizer::Tokenizer* tok = nullptr;  // nullptr: token ids only
  bool skip_special_tokens = true;
  std::vector<std::string> stop;
  bool include_stop = false;
  int32_t eos_token_id = -1;  // never decoded into text
  bool chat = false;          // split reasoning / content / tool calls
  tokenizer::OutputParserOptions parser;
};

struct ChoiceDelta {
  std::string text;                     // completions: new text
  tokenizer::OutputDelta message;       // chat: new reasoning / content / tool-call pieces
  std::vector<SampledToken> tokens;     // tokens accepted by this push
  bool empty() const { return text.empty() && message.empty() && tokens.empty(); }
};

class ChoiceOutput {
 public:
  explicit ChoiceOutput(const ChoiceOutputOptions& opts);

  /// Feeds newly generated tokens. Tokens after a stop string are dropped.
  ChoiceDelta push(const std::vector<SampledToken>& tokens);
  /// Ends the choice: releases held-back text. Idempotent (later calls return nothing).
  ChoiceDelta finish();

  bool stopped_by_string() const { return stop_.stopped(); }
  const std::optional<std::string>& matched_stop() const { return stop_.matched(); }
  const std::vector<int32_t>& token_ids() const { return ids_; }
  int64_t num_tokens() const { return static_cast<int64_t>(ids_.size()); }
  int64_t reasoning_tokens() const { return reasoning_tokens_; }
  /// Chat: the whole parsed message so far; the parser's error, if the DSML was malformed.
  const tokenizer::ParsedMessage& message() const { return parser_->message(); }
  const Status& parse_status() const { return parser_->status(); }
  bool has_tool_calls() const { return parser_ && !parser_->message().tool_calls.empty(); }
  bool finished() const { return finished_; }

 private:
  void feed_text(std::string_view text, ChoiceDelta& d);

  ChoiceOutputOptions opts_;
  std::optional<tokenizer::IncrementalDecoder> dec_;
  StopStringFilter stop_;
  std::optional<tokenizer::OutputParser> parser_;
  std::vector<int32_t> ids_;
  int32_t think_end_id_ = -1;
  bool in_reasoning_ = false;
  std::string think_tail_;  // last decoded bytes while in reasoning
  int64_t reasoning_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace deepinfer::server
