// The DeepSeek-V4 chat encoding (prompt side), ported from the official
// `encoding/encoding_dsv4.py::encode_messages` of DeepSeek-V4-Flash/-Pro, plus the V4.1 variant
// (`<｜System｜>`, numeric reasoning effort, DSML tag names with a leading space).
//
// Messages are OpenAI-style JSON objects, as the official encoder takes them: role
// system|developer|user|assistant|tool|latest_reminder, content, reasoning_content,
// tool_calls [{id, type, function{name, arguments}}], tools [{type, function}], tool_call_id,
// response_format, task (action|query|authority|domain|title|read_url), wo_eos.
//
// Injection safety: render_chat() returns the prompt text *and* the byte ranges of the control
// tokens the template inserted. encode_rendered() maps each range to its added-token id and
// encodes everything else in SpecialTokenMode::kText, so `<｜User｜>` typed by a user (or a
// tool, or inside reasoning) stays ordinary text. Never tokenize `text` with kParse.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

enum class ChatFormat { kV4, kV41 };
enum class ThinkingMode { kChat, kThinking };

struct ChatEncodeOptions {
  ChatFormat format = ChatFormat::kV4;
  ThinkingMode thinking_mode = ThinkingMode::kChat;
  /// Drop the reasoning of assistant turns before the last user turn (off when tools exist).
  bool drop_thinking = true;
  bool add_default_bos_token = true;
  /// "" = none. V4: "high" | "max" (only "max" adds a prefix). V4.1: "low" | "high" | "max" or
  /// "1".."100"; in thinking mode V4.1 defaults to "high" (75).
  std::string reasoning_effort;
};

struct SpecialRange {
  uint32_t begin;
  uint32_t end;
};

struct RenderedPrompt {
  std::string text;                          // what encoding_dsv4.encode_messages returns
  std::vector<SpecialRange> special_ranges;  // ascending, non-overlapping control-token spellings
};

/// Renders `messages` (a JSON array) after the optional `context` (messages already in the KV
/// cache: no BOS, and drop_thinking counts them as the official encoder does).
Result<RenderedPrompt> render_chat(const nlohmann::ordered_json& messages, const ChatEncodeOptions& opts,
                                   const nlohmann::ordered_json& context = nlohmann::ordered_json::array());

/// Token ids of a rendered prompt: each special range becomes the added token of that spelling;
/// a spelling the tokenizer has no added token for (e.g. `<think>` in the V3 vocabulary) is
/// encoded as the plain text around it, which is what HF's encode(text) would produce.
Result<std::vector<TokenId>> encode_rendered(const Tokenizer& tok, const RenderedPrompt& prompt);

/// render_chat + encode_rendered.
Result<std::vector<TokenId>> encode_chat(const Tokenizer& tok, const nlohmann::ordered_json& messages,
                                         const ChatEncodeOptions& opts);

/// Spellings of the V4 control tokens the templates use.
namespace tokens {
inline constexpr const char* kBos = "<｜begin▁of▁sentence｜>";
inline constexpr const char* kEos = "<｜end▁of▁sentence｜>";
inline constexpr const char* kUser = "<｜User｜>";
inline constexpr const char* kAssistant = "<｜Assistant｜>";
inline constexpr const char* kSystem = "<｜System｜>";  // V4.1
inline constexpr const char* kLatestReminder = "<｜latest_reminder｜>";
inline constexpr const char* kThinkStart = "<think>";
inline constexpr const char* kThinkEnd = "</think>";
inline constexpr const char* kDsml = "｜DSML｜";
}  // namespace tokens

}  // namespace deepinfer::tokenizer
