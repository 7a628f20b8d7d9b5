#include "tokenizer/chat_messages.h"

#include <algorithm>
#include <map>

#include "tokenizer/python_json.h"

namespace deepinfer::tokenizer::chat {

const Json& get(const Json& msg, const char* key) {
  static const Json kNull;
  if (!msg.is_object()) return kNull;
  auto it = msg.find(key);
  return it == msg.end() ? kNull : *it;
}

bool truthy(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  if (v.is_array() || v.is_object()) return !v.empty();
  if (v.is_number()) return v.get<double>() != 0.0;
  return true;
}

std::string py_str(const Json& v) {
  if (v.is_null()) return "None";
  if (v.is_string()) return v.get<std::string>();
  return python_json_dumps(v);
}

Result<Json> merge_tool_messages(const Json& messages) {
  if (!messages.is_array()) return Status::invalid_argument("messages must be a JSON array");
  Json merged = Json::array();
  for (const Json& msg : messages) {
    if (!msg.is_object()) return Status::invalid_argument("each message must be a JSON object");
    const Json& role = get(msg, "role");
    if (role == "tool") {
      Json block = {{"type", "tool_result"},
                    {"tool_use_id", msg.contains("tool_call_id") ? msg["tool_call_id"] : Json("")},
                    {"content", msg.contains("content") ? msg["content"] : Json("")}};
      if (!merged.empty() && get(merged.back(), "role") == "user" && merged.back().contains("content_blocks")) {
        merged.back()["content_blocks"].push_back(std::move(block));
      } else {
        merged.push_back(Json{{"role", "user"}, {"content_blocks", Json::array({std::move(block)})}});
      }
    } else if (role == "user") {
      Json content = msg.contains("content") ? msg["content"] : Json("");
      Json text_block = {{"type", "text"}, {"text", content}};
      if (!merged.empty() && get(merged.back(), "role") == "user" && merged.back().contains("content_blocks") &&
          get(merged.back(), "task").is_null()) {
        merged.back()["content_blocks"].push_back(std::move(text_block));
      } else {
        Json m = {{"role", "user"}, {"content", content}, {"content_blocks", Json::array({std::move(text_block)})}};
        for (const char* key : {"task", "wo_eos", "mask"}) {
          if (msg.contains(key)) m[key] = msg[key];
        }
        merged.push_back(std::move(m));
      }
    } else {
      merged.push_back(msg);
    }
  }
  return merged;
}

void sort_tool_results_by_call_order(Json& messages) {
  std::map<std::string, int64_t> order;
  for (Json& msg : messages) {
    const Json& role = get(msg, "role");
    if (role == "assistant" && truthy(get(msg, "tool_calls"))) {
      order.clear();
      int64_t idx = 0;
      for (const Json& tc : msg["tool_calls"]) {
        Json id = get(tc, "id");
        if (!truthy(id)) id = get(get(tc, "function"), "id");
        if (truthy(id) && id.is_string()) order[id.get<std::string>()] = idx;
        ++idx;
      }
    } else if (role == "user" && truthy(get(msg, "content_blocks"))) {
      Json& blocks = msg["content_blocks"];
      std::vector<Json> tool_blocks;
      for (const Json& b : blocks) {
        if (get(b, "type") == "tool_result") tool_blocks.push_back(b);
      }
      if (tool_blocks.size() <= 1 || order.empty()) continue;
      auto key = [&](const Json& b) -> int64_t {
        const Json& id = get(b, "tool_use_id");
        if (!id.is_string()) return 0;
        auto it = order.find(id.get<std::string>());
        return it == order.end() ? 0 : it->second;
      };
      std::stable_sort(tool_blocks.begin(), tool_blocks.end(),
                       [&](const Json& a, const Json& b) { return key(a) < key(b); });
      size_t k = 0;
      for (Json& b : blocks) {
        if (get(b, "type") == "tool_result") b = tool_blocks[k++];
      }
    }
  }
}

int64_t find_last_user_index(const Json& messages, bool v41) {
  for (int64_t i = static_cast<int64_t>(messages.size()) - 1; i >= 0; --i) {
    const Json& role = get(messages[static_cast<size_t>(i)], "role");
    if (v41 ? (role == "user" || (role == "system" && i > 0)) : (role == "user" || role == "developer")) return i;
  }
  return -1;
}

Json drop_thinking_messages(const Json& messages, bool v41) {
  const int64_t last_user = find_last_user_index(messages, v41);
  Json result = Json::array();
  int64_t idx = 0;
  for (const Json& msg : messages) {
    const Json& role = get(msg, "role");
    bool keep = role == "user" || role == "system" || role == "tool" || role == "latest_reminder" ||
                role == "direct_search_results" || idx >= last_user;
    if (keep) {
      result.push_back(msg);
    } else if (role == "assistant") {
      Json m = msg;
      m.erase("reasoning_content");
      result.push_back(std::move(m));
    }
    ++idx;
  }
  return result;
}

}  // namespace deepinfer::tokenizer::chat
