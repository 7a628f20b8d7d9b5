// Message preprocessing of the official V4 encoder (internal to chat_encoding.cpp, exposed for
// tests): tool results merged into user turns, reordered to the assistant's call order, and
// earlier reasoning dropped. Messages are nlohmann::ordered_json objects; these functions copy.
#pragma once

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace deepinfer::tokenizer::chat {

using Json = nlohmann::ordered_json;

/// `tool` messages become `tool_result` content blocks of a user message (merge_tool_messages).
Result<Json> merge_tool_messages(const Json& messages);
/// Reorders tool_result blocks to the order of the preceding assistant's tool_calls.
void sort_tool_results_by_call_order(Json& messages);
/// Drops reasoning_content of assistant turns before the last user turn, and developer turns
/// there (_drop_thinking_messages). `v41`: the V4.1 notion of the last user turn (below).
Json drop_thinking_messages(const Json& messages, bool v41 = false);
/// Index of the last generation boundary, or -1: V4, the last user/developer message; V4.1, the
/// last user message or system message at an index > 0 (mid-conversation system messages are
/// generation boundaries in V4.1's encoding.py).
int64_t find_last_user_index(const Json& messages, bool v41 = false);

/// Python truthiness of a JSON value (null, "", [], {}, false, 0 are false).
bool truthy(const Json& v);
/// msg.get(key) with a null default.
const Json& get(const Json& msg, const char* key);
/// str(value) for the values the templates format: null -> "None", strings as-is, else JSON.
std::string py_str(const Json& v);

}  // namespace deepinfer::tokenizer::chat
