// OpenAI request bodies -> typed, validated requests (and the JSON helpers the routes share).
// This is where client JSON ends: the routes and the engine see ChatRequest / CompletionRequest
// with SamplingParams filled in. Unknown fields are ignored (as OpenAI does); known fields with
// the wrong type or an invalid value are rejected with kInvalidArgument and the field named in
// `ParseError::param`. Values whose range the sampler defines are checked by
// SamplingParams::validate (called by the routes before submit, with the model's vocab size).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sample/sampling_params.h"

namespace deepinfer::server {

using Json = nlohmann::ordered_json;

/// Which field a parse failure is about ("" = the body as a whole).
struct ParseError {
  std::string param;
};

struct StreamOptions {
  bool include_usage = false;
  bool continuous_usage_stats = false;  // vLLM: usage on every chunk
};

/// A structured-output constraint (structured.h compiles it).
struct StructuredOutput {
  enum class Kind : uint8_t { kNone, kJsonObject, kJsonSchema, kRegex, kEbnf };
  enum class Whitespace : uint8_t { kFlexible, kCompact, kSpaced };  // grammar::JsonWhitespace
  enum class KeyOrder : uint8_t { kSchema, kAny };                   // grammar::JsonKeyOrder
  Kind kind = Kind::kNone;
  std::string spec;  // schema JSON text, regex or EBNF
  // JSON options (json_object / json_schema): structured_outputs.whitespace / key_order /
  // disable_any_whitespace; `json_options_set` when one was given (an error with regex / grammar).
  Whitespace whitespace = Whitespace::kFlexible;
  KeyOrder key_order = KeyOrder::kSchema;
  bool json_options_set = false;
  /// additionalProperties absent = false (OpenAI strict, XGrammar's and vLLM's guided_json
  /// default); response_format.json_schema without `strict: true` follows JSON Schema (absent =
  /// any extra key).
  bool strict = true;
  /// Set by the chat route in thinking mode when `</think>` is no added token: the constraint is
  /// preceded by free reasoning up to `</think>` (grammar::after_reasoning_grammar).
  bool after_reasoning = false;
  bool any() const { return kind != Kind::kNone; }
};

/// Fields shared by chat and completions.
struct CommonRequest {
  std::string model;  // "" when absent
  SamplingParams sampling;
  bool stream = false;
  StreamOptions stream_options;
  bool include_stop_str_in_output = false;
  std::optional<bool> skip_special_tokens;  // default depends on the endpoint
  bool return_token_ids = false;            // vLLM: token_ids on choices
  int priority = 0;
  std::string user;
  StructuredOutput structured;  // response_format / guided_* / structured_outputs
  bool max_tokens_zero = false;  // "max_tokens": 0 (only completions with echo accept it)
  bool prompt_logprobs = false;  // the request has vLLM's prompt_logprobs (sampling.prompt_logprobs)
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ChatRequest : CommonRequest {
  /// Normalised OpenAI messages for the V4 encoder: only known fields, text-part arrays joined
  /// into one string, `reasoning` accepted as reasoning_content.
  Json messages = Json::array();
  Json tools = Json::array();          // OpenAI tool objects ({type: function, function: {...}})
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;        // kNamed
  Json response_format;                // null, or {type: json_object | json_schema, ...}
  std::optional<bool> thinking;        // chat_template_kwargs.thinking / thinking.type
  std::optional<bool> drop_thinking;   // chat_template_kwargs.drop_thinking
  std::string reasoning_effort;        // as given ("" = none)
  /// The reply continues the last message, an assistant's (DeepSeek's "prefix": true on it, or
  /// vLLM's continue_final_message): rendered without its end-of-sentence (`wo_eos`).
  bool continue_final = false;
};

struct PromptInput {
  bool is_text = false;
  std::string text;             // is_text
  std::vector<int32_t> ids;     // !is_text
};

struct CompletionRequest : CommonRequest {
  std::vector<PromptInput> prompts;  // one engine request (of n samples) each
  bool echo = false;
  /// echo with "max_tokens": 0: the prompt only (and its logprobs), no completion. The engine
  /// runs one token (sampling.max_tokens = 1) that the response leaves out, as vLLM does.
  bool echo_only = false;
};

/// Limits the parser enforces itself (the rest is SamplingParams::validate and the engine).
struct ParseLimits {
  size_t max_prompts = 64;        // completions: prompts per request
  size_t max_stop = 16;           // stop strings
  size_t max_messages = 4096;
  int32_t max_completion_logprobs = 5;  // completions `logprobs` (OpenAI: 5; vLLM allows 20)
};

/// Parses the request body text. Malformed JSON, a non-object body or nesting deeper than 128
/// levels are kInvalidArgument. The nesting check runs before nlohmann's recursive parser.
Result<Json> parse_json_body(std::string_view body);

Result<ChatRequest> parse_chat_request(const Json& body, const ParseLimits& limits, ParseError* err);
Result<CompletionRequest> parse_completion_request(const Json& body, const ParseLimits& limits, ParseError* err);

/// Usage object: prompt/completion/total tokens, prompt_tokens_details.cached_tokens (always),
/// DeepSeek's prompt_cache_hit_tokens / prompt_cache_miss_tokens, and reasoning_tokens when >= 0.
Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens,
                int64_t reasoning_tokens = -1);

/// JSON string for bytes that may not be valid UTF-8 (invalid bytes become U+FFFD).
std::string json_safe_text(std::string_view bytes);

}  // namespace deepinfer::server
