// Server-sent events framing for streamed completions (OpenAI's format): each chunk is one
// `data: <json>\n\n` event, the stream ends with `data: [DONE]\n\n`, and `: ...\n\n` comment
// lines keep an idle connection alive (and detect a client that has gone).
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::server {

inline constexpr const char* kSseContentType = "text/event-stream";

/// `data: <payload>\n\n`. `payload` is one line of JSON (dump() without indentation never
/// contains a raw newline: newlines inside strings are escaped).
std::string sse_data(std::string_view payload);
/// `data: [DONE]\n\n`.
std::string sse_done();
/// `: <text>\n\n`, ignored by clients.
std::string sse_comment(std::string_view text);

}  // namespace deepinfer::server
