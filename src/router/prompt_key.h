// The text a request's prompt starts with, for routing by prompt prefix (replica_picker.h): what
// the replica's prefix cache will be keyed by, up to tokenization. Completions: the prompt (text,
// or token ids written out), several prompts one after the other. Chat: the tools (rendered into
// the system prompt), then each message's role and content in order. Anything else: "". Only the
// shapes the API accepts are read (a prompt nested deeper than a list of lists adds nothing).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace deepinfer::router {

std::string prompt_key(const nlohmann::ordered_json& body);

}  // namespace deepinfer::router
