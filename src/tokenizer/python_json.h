// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it (separators
// ", " and ": ", keys in insertion order, non-ASCII kept, control characters \uXXXX-escaped).
// The official DeepSeek encoders embed tool schemas and arguments this way, so the prompt bytes
// depend on it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace deepinfer::tokenizer {

std::string python_json_dumps(const nlohmann::ordered_json& value);
void append_python_json(const nlohmann::ordered_json& value, std::string& out);

}  // namespace deepinfer::tokenizer
