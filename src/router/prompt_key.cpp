#include "router/prompt_key.h"

namespace deepinfer::router {

namespace {

void append_prompt(const nlohmann::json& p, std::string& out) {
  if (p.is_string()) {
    out += p.get_ref<const std::string&>();
  } else if (p.is_number_integer()) {
    out += std::to_string(p.get<int64_t>());
    out += ',';
  } else if (p.is_array()) {
    for (const auto& e : p) append_prompt(e, out);
    if (!p.empty() && !p[0].is_number_integer()) out += '\x1d';
  }
}

}  // namespace

std::string prompt_key(const nlohmann::json& body) {
  if (!body.is_object()) return {};
  std::string out;
  if (auto p = body.find("prompt"); p != body.end()) {
    append_prompt(*p, out);
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
