#include "router/prompt_key.h"

namespace deepinfer::router {

namespace {

using Json = nlohmann::ordered_json;

// One prompt: text, or token ids written out.
void append_one(const Json& p, std::string& out) {
  if (p.is_string()) {
    out += p.get_ref<const std::string&>();
    return;
  }
  if (!p.is_array()) return;
  for (const auto& e : p)
    if (e.is_number_integer()) out += std::to_string(e.get<int64_t>()) + ',';
}

}  // namespace

std::string prompt_key(const Json& body) {
  if (!body.is_object()) return {};
  std::string out;
  if (auto p = body.find("prompt"); p != body.end()) {
    // A list of prompts (texts or id lists) one after the other; else one prompt.
    if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array())) {
      for (const auto& one : *p) {
        append_one(one, out);
        out += '\x1d';
      }
    } else {
      append_one(*p, out);
    }
    return out;
  }
  auto m = body.find("messages");
  if (m == body.end() || !m->is_array()) return {};
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) out += t->dump() + '\x1e';
  for (const auto& msg : *m) {
    if (!msg.is_object()) continue;
    if (auto r = msg.find("role"); r != msg.end() && r->is_string()) out += r->get_ref<const std::string&>();
    out += '\x1f';
    if (auto c = msg.find("content"); c != msg.end()) out += c->is_string() ? c->get_ref<const std::string&>() : c->dump();
    out += '\x1e';
  }
  return out;
}

}  // namespace deepinfer::router
