#include "grammar/dsml_grammar.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace deepinfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len && i + static_cast<size_t>(k) < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
    }
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

std::string utf8_of(const std::vector<uint32_t>& cps, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) append_utf8(s, cps[i]);
  return s;
}

CharSet all_but(std::vector<uint32_t> cps) {
  CharSet set;
  for (uint32_t cp : cps) set.push_back({cp, cp});
  return complement_charset(normalize_charset(std::move(set)));
}

// Text that never contains `pattern`, whose first code point occurs nowhere else in it:
//   [^c0]* ( c0 ( q[0..k) ( [^q[k] c0] [^c0]* )? | ... for k < |q| ) )*   with pattern = c0 q.
Expr avoid_substring(std::string_view pattern) {
  std::vector<uint32_t> p = code_points(pattern);
  const uint32_t c0 = p[0];
  std::vector<uint32_t> q(p.begin() + 1, p.end());
  Expr free_run = Expr::repeat(Expr::charset(all_but({c0})), 0, kUnbounded);
  std::vector<Expr> alts;
  for (size_t k = 0; k < q.size(); ++k) {
    alts.push_back(Expr::sequence({Expr::literal(utf8_of(q, k)),
                                   Expr::repeat(Expr::sequence({Expr::charset(all_but({q[k], c0})), free_run}), 0, 1)}));
  }
  Expr block = Expr::sequence({Expr::literal(utf8_of(p, 1)), Expr::choice(std::move(alts))});
  return Expr::sequence({free_run, Expr::repeat(std::move(block), 0, kUnbounded)});
}

// Copies `src`'s rules into `dst` under `prefix`; returns the index of its root there.
int32_t import_rules(Grammar& dst, const Grammar& src, const std::string& prefix) {
  std::vector<int32_t> map;
  for (const Rule& r : src.rules()) map.push_back(dst.add_rule(prefix + r.name).value());
  auto remap = [&](auto&& self, Expr e) -> Expr {
    if (e.kind == Expr::Kind::kRuleRef) e.rule_idx = map[static_cast<size_t>(e.rule_idx)];
    for (Expr& c : e.children) c = self(self, std::move(c));
    return e;
  };
  for (size_t i = 0; i < src.rules().size(); ++i) dst.set_body(map[i], remap(remap, src.rules()[i].body));
  return map[static_cast<size_t>(src.root())];
}

// A plain string schema: raw text (string="true"). Returns false when the schema needs JSON.
bool raw_string_value(const Json& schema, Expr& out, Expr raw_text) {
  if (!schema.is_object() || schema.value("type", Json()) != "string") return false;
  static const char* kAllowed[] = {"type", "description", "title", "default", "examples", "enum", "const",
                                   "$comment", "deprecated", "readOnly", "writeOnly"};
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    if (std::find_if(std::begin(kAllowed), std::end(kAllowed), [&](const char* k) { return it.key() == k; }) ==
        std::end(kAllowed)) {
      return false;
    }
  }
  if (schema.contains("const") || schema.contains("enum")) {
    Json values = schema.contains("const") ? Json::array({schema["const"]}) : schema["enum"];
    if (!values.is_array()) return false;
    std::vector<Expr> alts;
    for (const Json& v : values) {
      if (!v.is_string()) return false;
      alts.push_back(Expr::literal(v.get<std::string>()));
    }
    out = Expr::choice(std::move(alts));
    return true;
  }
  out = std::move(raw_text);
  return true;
}

}  // namespace

Result<Grammar> dsml_tool_calls_grammar(std::string_view tools_json, const DsmlGrammarOptions& opts) {
  Json tools;
  try {
    tools = Json::parse(tools_json);
  } catch (const std::exception& e) {
    return Status::invalid_argument(std::string("tools are not valid JSON: ") + e.what());
  }
  if (!tools.is_array()) return Status::invalid_argument("tools must be a JSON array");
  if (opts.min_calls < 1 || (opts.max_calls != kUnbounded && opts.max_calls < opts.min_calls)) {
    return Status::invalid_argument("bad tool-call count bounds");
  }
  const std::string sp = opts.v41 ? " " : "";
  const std::string block = opts.v41 ? " calls" : "tool_calls";
  const std::string invoke = sp + "invoke";
  const std::string param = sp + "parameter";
  auto dsml = [] { return Expr::token(kDsmlToken); };
  // "<" DSML tag  /  "</" DSML tag
  auto open = [&](const std::string& tag) { return Expr::sequence({Expr::literal("<"), dsml(), Expr::literal(tag)}); };
  auto close = [&](const std::string& tag) { return Expr::sequence({Expr::literal("</"), dsml(), Expr::literal(tag + ">")}); };

  Grammar g;
  DI_ASSIGN_OR_RETURN(int32_t root, g.add_rule("root"));
  DI_ASSIGN_OR_RETURN(int32_t invoke_rule, g.add_rule("invoke"));
  DI_ASSIGN_OR_RETURN(int32_t raw_rule, g.add_rule("raw_text"));
  g.set_body(raw_rule, avoid_substring("</" + std::string(kDsmlToken) + param));

  std::vector<Expr> invokes;
  int32_t tool_idx = 0;
  for (const Json& t : tools) {
    const Json& fn = t.is_object() && t.contains("function") ? t["function"] : t;
    if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string()) {
      return Status::invalid_argument("tools[" + std::to_string(tool_idx) + "]: a function needs a string 'name'");
    }
    const std::string name = fn["name"].get<std::string>();
    const int32_t ti = tool_idx++;
    if (!opts.only.empty() && std::find(opts.only.begin(), opts.only.end(), name) == opts.only.end()) continue;
    const std::string where = "tool '" + name + "'";
    Json params = fn.contains("parameters") ? fn["parameters"] : Json::object();
    if (params.is_null()) params = Json::object();
    if (!params.is_object()) return Status::invalid_argument(where + ": 'parameters' must be a JSON Schema object");
    Json props = params.contains("properties") ? params["properties"] : Json::object();
    if (!props.is_object()) return Status::invalid_argument(where + ": 'properties' must be an object");
    std::vector<std::string> required;
    if (params.contains("required")) {
      if (!params["required"].is_array()) return Status::invalid_argument(where + ": 'required' must be an array");
      for (const Json& r : params["required"]) {
        if (!r.is_string()) return Status::invalid_argument(where + ": 'required' must list names");
        if (!props.contains(r.get<std::string>())) {
          return Status::invalid_argument(where + ": required parameter '" + r.get<std::string>() + "' is not in 'properties'");
        }
        required.push_back(r.get<std::string>());
      }
    }
    // One expression per parameter, and whether it is required.
    std::vector<Expr> items;
    std::vector<bool> req;
    int32_t pi = 0;
    for (auto it = props.begin(); it != props.end(); ++it, ++pi) {
      const std::string& key = it.key();
      Expr value;
      bool is_raw = raw_string_value(it.value(), value, Expr::rule_ref(raw_rule));
      if (!is_raw) {
        Json sub = it.value();
        if (sub.is_object()) {
          for (const char* defs : {"$defs", "definitions"}) {
            if (params.contains(defs) && !sub.contains(defs)) sub[defs] = params[defs];
          }
        }
        auto sg = json_schema_to_grammar(sub.dump(), opts.json);
        if (!sg.is_ok()) {
          return Status::invalid_argument(where + ", parameter '" + key + "': " + std::string(sg.status().message()));
        }
        value = Expr::rule_ref(import_rules(g, *sg, "t" + std::to_string(ti) + "_p" + std::to_string(pi) + "_"));
      }
      items.push_back(Expr::sequence({open(param), Expr::literal(" name=\"" + key + "\" string=\"" +
                                                                 (is_raw ? "true" : "false") + "\">"),
                                      std::move(value), close(param)}));
      req.push_back(std::find(required.begin(), required.end(), key) != required.end());
    }
    // Parameter lists in schema order, joined by "\n". tail_i: params i.. after one was written;
    // head_i: params i.. with none written yet (at least one when any is required).
    const std::string tp = "t" + std::to_string(ti) + "_";
    const auto n = static_cast<int32_t>(items.size());
    std::vector<int32_t> tail(static_cast<size_t>(n) + 1), head(static_cast<size_t>(n) + 1);
    for (int32_t i = 0; i <= n; ++i) {
      DI_ASSIGN_OR_RETURN(tail[static_cast<size_t>(i)], g.add_rule(tp + "tail" + std::to_string(i)));
      DI_ASSIGN_OR_RETURN(head[static_cast<size_t>(i)], g.add_rule(tp + "head" + std::to_string(i)));
    }
    g.set_body(tail[static_cast<size_t>(n)], Expr::empty());
    g.set_body(head[static_cast<size_t>(n)], Expr::empty());
    bool any_required_after = false;
    std::vector<bool> required_from(static_cast<size_t>(n) + 1, false);
    for (int32_t i = n - 1; i >= 0; --i) {
      any_required_after = any_required_after || req[static_cast<size_t>(i)];
      required_from[static_cast<size_t>(i)] = any_required_after;
    }
    for (int32_t i = n - 1; i >= 0; --i) {
      auto iu = static_cast<size_t>(i);
      Expr one = Expr::sequence({Expr::literal("\n"), items[iu]});
      g.set_body(tail[iu], Expr::sequence({req[iu] ? one : Expr::repeat(one, 0, 1), Expr::rule_ref(tail[iu + 1])}));
      std::vector<Expr> alts{Expr::sequence({items[iu], Expr::rule_ref(tail[iu + 1])})};
      if (!req[iu]) alts.push_back(Expr::rule_ref(head[iu + 1]));  // skip it; still nothing written
      g.set_body(head[iu], Expr::choice(std::move(alts)));
    }
    // head_i with i == n (nothing written) is only reachable when every parameter is optional.
    Expr body_params;
    if (n == 0) {
      body_params = Expr::empty();
    } else if (required_from[0]) {
      body_params = Expr::sequence({Expr::rule_ref(head[0]), Expr::literal("\n")});
    } else {
      // Nothing at all, or a non-empty list: the empty list must not leave a stray "\n".
      std::vector<Expr> alts;
      for (int32_t i = 0; i < n; ++i) {
        alts.push_back(Expr::sequence({items[static_cast<size_t>(i)], Expr::rule_ref(tail[static_cast<size_t>(i) + 1])}));
      }
      body_params = Expr::repeat(Expr::sequence({Expr::choice(std::move(alts)), Expr::literal("\n")}), 0, 1);
    }
    DI_ASSIGN_OR_RETURN(int32_t tool_rule, g.add_rule("tool" + std::to_string(ti)));
    g.set_body(tool_rule, Expr::sequence({open(invoke), Expr::literal(" name=\"" + name + "\">\n"),
                                          std::move(body_params), close(invoke)}));
    invokes.push_back(Expr::rule_ref(tool_rule));
  }
  if (invokes.empty()) {
    return Status::invalid_argument(opts.only.empty() ? "no tools to call" : "the named tool is not in 'tools'");
  }
  g.set_body(invoke_rule, Expr::choice(std::move(invokes)));
  const int32_t more_min = opts.min_calls - 1;
  const int32_t more_max = opts.max_calls == kUnbounded ? kUnbounded : opts.max_calls - 1;
  Expr more = Expr::sequence({Expr::literal("\n"), Expr::rule_ref(invoke_rule)});
  g.set_body(root, Expr::sequence({Expr::literal("\n\n"), open(block), Expr::literal(">\n"), Expr::rule_ref(invoke_rule),
                                   more_max == 0 ? Expr::empty() : Expr::repeat(std::move(more), more_min, more_max),
                                   Expr::literal("\n"), close(block)}));
  g.set_root(root);
  DI_TRY(g.validate());
  if (opts.after_reasoning) return after_reasoning_grammar(g);
  return g;
}

Result<Grammar> after_reasoning_grammar(const Grammar& g) {
  DI_TRY(g.validate());
  Grammar out;
  DI_ASSIGN_OR_RETURN(int32_t root, out.add_rule("root"));
  DI_ASSIGN_OR_RETURN(int32_t think_rule, out.add_rule("reasoning"));
  out.set_body(think_rule, avoid_substring("</think>"));
  const int32_t answer = import_rules(out, g, "answer_");
  out.set_body(root, Expr::sequence({Expr::rule_ref(think_rule), Expr::token("</think>"), Expr::rule_ref(answer)}));
  out.set_root(root);
  DI_TRY(out.validate());
  return out;
}

}  // namespace deepinfer::grammar
