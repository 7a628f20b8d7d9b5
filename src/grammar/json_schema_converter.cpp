#include "grammar/json_schema_converter.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "grammar/ebnf_parser.h"
#include "grammar/json_schema_parts.h"
#include "grammar/regex_converter.h"

namespace deepinfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

// One JSON string character (unescaped, or an escape; \u escapes exclude surrogates so that one
// character is one code point, as minLength/maxLength count).
constexpr const char* kChar =
    R"(([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))))";

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                          "definitions", "$anchor"};
  return k;
}

const std::set<std::string>& supported_keywords() {
  static const std::set<std::string> k = {
      "type", "nullable", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required",
      "additionalProperties", "prefixItems", "items", "minItems", "maxItems", "pattern", "format",
      "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  return k;
}

std::string quote_literal(std::string_view bytes) {
  std::string out = "\"";
  append_escaped_literal(out, bytes);
  return out + "\"";
}

bool is_identifier(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}

std::string sanitize(std::string_view s) {
  std::string out;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
    if (out.size() >= 40) break;
  }
  return out.empty() ? "x" : out;
}

Result<Json> parse_schema(std::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    return Status::invalid_argument(std::string("JSON Schema is not valid JSON: ") + e.what());
  }
}

class Converter {
 public:
  Converter(const Json& doc, const JsonSchemaOptions& opts) : doc_(doc), opts_(opts) {
    std::string ws_count = opts.max_whitespace < 0 ? "*" : "{0," + std::to_string(opts.max_whitespace) + "}";
    switch (opts.whitespace) {
      case JsonWhitespace::kCompact:
        ws_ = "";
        comma_ = "\",\"";
        colon_ = "\":\"";
        break;
      case JsonWhitespace::kSpaced:
        ws_ = "";
        comma_ = "\", \"";
        colon_ = "\": \"";
        break;
      case JsonWhitespace::kFlexible:
        ws_ = "[ \\t\\n\\r]" + ws_count;
        comma_ = ws_ + " \",\" " + ws_;
        colon_ = ws_ + " \":\" " + ws_;
        break;
    }
  }

  Result<std::string> run() {
    reserve("root");
    DI_ASSIGN_OR_RETURN(std::string body, visit(doc_, "root", "#"));
    rules_.insert(rules_.begin(), {"root", body});
    std::string out;
    for (const auto& [name, b] : rules_) out += name + " ::= " + b + "\n";
    return out;
  }

  std::string any_value_rule() {
    if (names_.count("json_value")) return "json_value";
    reserve("json_value");
    std::string obj = define("json_object", braces("{", "(" + json_string() + " " + colon_ + " json_value (" +
                                                         comma_ + " " + json_string() + " " + colon_ +
                                                         " json_value)*)?", "}"));
    std::string arr = define("json_array", braces("[", "(json_value (" + comma_ + " json_value)*)?", "]"));
    rules_.push_back({"json_value", obj + " | " + arr + " | " + json_string() + " | " + json_number() +
                                        " | \"true\" | \"false\" | \"null\""});
    return "json_value";
  }

 private:
  Status err(const std::string& where, const std::string& msg) const {
    return Status::invalid_argument("JSON Schema at " + where + ": " + msg);
  }

  void reserve(const std::string& name) { names_.insert(name); }

  std::string fresh(const std::string& hint) {
    std::string base = sanitize(hint);
    std::string name = base;
    for (int i = 2; names_.count(name); ++i) name = base + "_" + std::to_string(i);
    names_.insert(name);
    return name;
  }

  /// A rule with this body (shared when an identical body exists).
  std::string define(const std::string& hint, const std::string& body) {
    auto it = by_body_.find(body);
    if (it != by_body_.end()) return it->second;
    std::string name = fresh(hint);
    rules_.push_back({name, body});
    by_body_[body] = name;
    return name;
  }

  /// An expression usable as one item: the body itself if simple, else a rule.
  std::string as_item(const std::string& hint, const std::string& body) {
    if (is_identifier(body)) return body;
    return define(hint, body);
  }

  std::string braces(const std::string& open, const std::string& inner, const std::string& close) const {
    std::string o = quote_literal(open), c = quote_literal(close);
    if (ws_.empty()) return o + " " + inner + " " + c;
    return o + " " + ws_ + " " + inner + " " + ws_ + " " + c;
  }

  std::string json_string() {
    if (!names_.count("json_string")) {
      reserve("json_string");
      rules_.push_back({"json_string", std::string("\"\\\"\" ") + kChar + "* \"\\\"\""});
    }
    return "json_string";
  }
  std::string json_number() {
    if (!names_.count("json_number")) {
      reserve("json_number");
      rules_.push_back({"json_number", R"("-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?)"});
    }
    return "json_number";
  }
  std::string json_integer() {
    if (!names_.count("json_integer")) {
      reserve("json_integer");
      rules_.push_back({"json_integer", R"("-"? ("0" | [1-9] [0-9]*))"});
    }
    return "json_integer";
  }

  Result<std::string> regex_body(const std::string& regex, const std::string& where) {
    Result<Expr> e = regex_to_expr(regex);
    if (!e.is_ok()) return err(where, std::string(e.status().message()));
    Grammar empty;
    return "\"\\\"\" (" + expr_to_ebnf(escape_for_json_string(*e), empty) + ") \"\\\"\"";
  }

  Result<const Json*> resolve(const std::string& ref, const std::string& where) {
    if (ref.empty() || ref[0] != '#') return err(where, "only local $ref (\"#...\") is supported, got '" + ref + "'");
    try {
      Json::json_pointer ptr(ref.substr(1));
      return &doc_.at(ptr);
    } catch (const std::exception& e) {
      return err(where, "$ref '" + ref + "' does not resolve: " + e.what());
    }
  }

  Result<std::string> visit_ref(const std::string& ref, const std::string& where) {
    auto it = ref_rules_.find(ref);
    if (it != ref_rules_.end()) return it->second;
    DI_ASSIGN_OR_RETURN(const Json* target, resolve(ref, where));
    std::string name = fresh("ref_" + ref.substr(ref.find_last_of('/') + 1));
    ref_rules_[ref] = name;
    if (++depth_ > 64) return err(where, "$ref chain too deep");
    DI_ASSIGN_OR_RETURN(std::string body, visit(*target, name, ref));
    --depth_;
    rules_.push_back({name, body});
    return name;
  }

  // Merges allOf members into one schema (objects: properties and required united).
  Result<Json> merge_all_of(const Json& schema, const std::string& where) {
    Json merged = Json::object();
    std::vector<Json> parts;
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      if (it.key() != "allOf") merged[it.key()] = it.value();
    }
    if (!schema["allOf"].is_array()) return err(where, "'allOf' must be an array");
    for (const Json& sub : schema["allOf"]) {
      const Json* s = &sub;
      for (int i = 0; i < 32 && s->is_object() && s->contains("$ref"); ++i) {
        DI_ASSIGN_OR_RETURN(s, resolve((*s)["$ref"].get<std::string>(), where));
      }
      if (!s->is_object()) return err(where, "'allOf' members must be objects");
      Json part = *s;
      if (part.contains("allOf")) {
        DI_ASSIGN_OR_RETURN(part, merge_all_of(part, where));
      }
      for (auto it = part.begin(); it != part.end(); ++it) {
        const std::string& k = it.key();
        if (annotation_keywords().count(k)) continue;
        if (!merged.contains(k)) {
          merged[k] = it.value();
        } else if (k == "properties") {
          for (auto p = it.value().begin(); p != it.value().end(); ++p) {
            if (merged[k].contains(p.key())) {
              merged[k][p.key()] = Json{{"allOf", Json::array({merged[k][p.key()], p.value()})}};
            } else {
              merged[k][p.key()] = p.value();
            }
          }
        } else if (k == "required") {
          for (const Json& r : it.value()) {
            if (std::find(merged[k].begin(), merged[k].end(), r) == merged[k].end()) merged[k].push_back(r);
          }
        } else if (merged[k] != it.value()) {
          return err(where, "allOf members disagree on '" + k + "' (only objects are merged)");
        }
      }
    }
    return merged;
  }

  Result<std::string> visit(const Json& schema, const std::string& hint, const std::string& where) {
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return any_value_rule();
      return err(where, "the schema 'false' matches nothing");
    }
    if (!schema.is_object()) return err(where, "a schema must be an object or a boolean");
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      const std::string& k = it.key();
      if (!supported_keywords().count(k) && !annotation_keywords().count(k)) {
        return err(where, "unsupported keyword '" + k + "'");
      }
    }
    if (schema.contains("allOf")) {
      DI_ASSIGN_OR_RETURN(Json merged, merge_all_of(schema, where));
      return visit(merged, hint, where);
    }
    if (schema.contains("$ref")) {
      if (!schema["$ref"].is_string()) return err(where, "'$ref' must be a string");
      for (auto it = schema.begin(); it != schema.end(); ++it) {
        if (it.key() != "$ref" && !annotation_keywords().count(it.key())) {
          Json rest = schema;
          rest.erase("$ref");
          return visit(Json{{"allOf", Json::array({Json{{"$ref", schema["$ref"]}}, rest})}}, hint, where);
        }
      }
      return visit_ref(schema["$ref"].get<std::string>(), where);
    }
    std::string body;
    bool nullable = schema.value("nullable", false);
    if (schema.contains("const") || schema.contains("enum")) {
      // The values are emitted literally: keep those the keywords beside them accept.
      const char* key = schema.contains("const") ? "const" : "enum";
      std::vector<Json> values;
      if (schema.contains("const")) {
        values.push_back(schema["const"]);
      } else {
        if (!schema["enum"].is_array() || schema["enum"].empty()) return err(where, "'enum' must be a non-empty array");
        for (const Json& v : schema["enum"]) values.push_back(v);
      }
      std::string first_reject;
      for (const Json& v : values) {
        DI_ASSIGN_OR_RETURN(std::string rejected_by, check_value(v, schema, where, key, 0));
        if (rejected_by.empty()) {
          body += (body.empty() ? "" : " | ") + quote_literal(v.dump());
        } else if (first_reject.empty()) {
          first_reject = "value " + v.dump() + " fails '" + rejected_by + "'";
        }
      }
      if (body.empty()) {
        return err(where, std::string("no '") + key + "' value satisfies the keywords beside it (" + first_reject + ")");
      }
      body = "(" + body + ")";
    } else if (schema.contains("anyOf") || schema.contains("oneOf")) {
      const char* key = schema.contains("anyOf") ? "anyOf" : "oneOf";
      if (schema.contains("anyOf") && schema.contains("oneOf")) return err(where, "both anyOf and oneOf");
      const Json& alts = schema[key];
      if (!alts.is_array() || alts.empty()) return err(where, std::string("'") + key + "' must be a non-empty array");
      Json rest = schema;
      rest.erase(key);
      bool has_rest = false;
      for (auto it = rest.begin(); it != rest.end(); ++it) has_rest = has_rest || !annotation_keywords().count(it.key());
      for (size_t i = 0; i < alts.size(); ++i) {
        std::string w = where + "/" + key + "/" + std::to_string(i);
        Result<std::string> alt = has_rest ? visit(Json{{"allOf", Json::array({rest, alts[i]})}}, hint, w)
                                           : visit(alts[i], hint + "_" + std::to_string(i), w);
        if (!alt.is_ok()) return alt.status();
        body += (body.empty() ? "" : " | ") + as_item(hint + "_" + std::to_string(i), *alt);
      }
      body = "(" + body + ")";
    } else {
      std::vector<std::string> types;
      if (schema.contains("type")) {
        const Json& t = schema["type"];
        if (t.is_string()) {
          types.push_back(t.get<std::string>());
        } else if (t.is_array()) {
          for (const Json& x : t) {
            if (!x.is_string()) return err(where, "'type' entries must be strings");
            types.push_back(x.get<std::string>());
          }
        } else {
          return err(where, "'type' must be a string or an array");
        }
      } else if (schema.contains("properties") || schema.contains("additionalProperties") || schema.contains("required")) {
        types.push_back("object");
      } else if (schema.contains("items") || schema.contains("prefixItems") || schema.contains("minItems") ||
                 schema.contains("maxItems")) {
        types.push_back("array");
      } else if (schema.contains("pattern") || schema.contains("format") || schema.contains("minLength") ||
                 schema.contains("maxLength")) {
        types.push_back("string");
      } else if (schema.contains("minimum") || schema.contains("maximum") || schema.contains("exclusiveMinimum") ||
                 schema.contains("exclusiveMaximum")) {
        types.push_back("number");
      } else {
        body = any_value_rule();
      }
      for (const std::string& t : types) {
        std::string one;
        DI_ASSIGN_OR_RETURN(one, visit_type(schema, t, types.size() > 1 ? hint + "_" + t : hint, where));
        if (types.size() > 1) one = as_item(hint + "_" + t, one);
        body += (body.empty() ? "" : " | ") + one;
      }
      if (types.size() > 1) body = "(" + body + ")";
    }
    if (nullable) body = "(" + as_item(hint + "_v", body) + " | \"null\")";
    return body;
  }

  static bool type_matches(const Json& v, const std::string& t) {
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_boolean();
    if (t == "string") return v.is_string();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "number") return v.is_number();
    if (t == "integer") {
      if (v.is_number_integer()) return true;
      return v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>();
    }
    return false;
  }

  static int64_t code_point_count(const std::string& s) {
    int64_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }

  // Whether the JSON value `v` (an enum / const value, emitted literally) satisfies schema `s`
  // under JSON Schema semantics: "" when it does, else the keyword that rejects it. Keywords it
  // cannot check are an error naming them (never silently passed).
  Result<std::string> check_value(const Json& v, const Json& s, const std::string& where, const char* what, int depth) {
    if (depth > 64) return err(where, std::string("schema too deep while checking '") + what + "' values");
    if (s.is_boolean()) return std::string(s.get<bool>() ? "" : "false");
    if (!s.is_object()) return err(where, "a schema must be an object or a boolean");
    auto num = [&](const Json& x, const std::string& k) -> Result<double> {
      if (!x.is_number()) return err(where, "'" + k + "' must be a number");
      return x.get<double>();
    };
    auto count = [&](const Json& x, const std::string& k) -> Result<int64_t> {
      if (!x.is_number_integer() || x.get<int64_t>() < 0) return err(where, "'" + k + "' must be a non-negative integer");
      return x.get<int64_t>();
    };
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      const Json& x = it.value();
      if (annotation_keywords().count(k) || k == "nullable") continue;
      bool ok = true;
      if (k == "type") {
        std::vector<std::string> types;
        if (x.is_string()) types.push_back(x.get<std::string>());
        else if (x.is_array()) {
          for (const Json& t : x) {
            if (!t.is_string()) return err(where, "'type' entries must be strings");
            types.push_back(t.get<std::string>());
          }
        } else return err(where, "'type' must be a string or an array");
        ok = v.is_null() && s.value("nullable", false) == true;
        for (const std::string& t : types) ok = ok || type_matches(v, t);
      } else if (k == "enum") {
        if (!x.is_array()) return err(where, "'enum' must be a non-empty array");
        ok = std::find(x.begin(), x.end(), v) != x.end();
      } else if (k == "const") {
        ok = x == v;
      } else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
        DI_ASSIGN_OR_RETURN(double b, num(x, k));
        if (v.is_number()) {
          double d = v.get<double>();
          ok = k == "minimum" ? d >= b : k == "maximum" ? d <= b : k == "exclusiveMinimum" ? d > b : d < b;
        }
      } else if (k == "minLength" || k == "maxLength") {
        DI_ASSIGN_OR_RETURN(int64_t b, count(x, k));
        if (v.is_string()) {
          int64_t n = code_point_count(v.get<std::string>());
          ok = k == "minLength" ? n >= b : n <= b;
        }
      } else if (k == "pattern") {
        if (!x.is_string()) return err(where, "'pattern' must be a string");
        if (v.is_string()) {
          try {
            ok = std::regex_search(v.get<std::string>(), std::regex(x.get<std::string>(), std::regex::ECMAScript));
          } catch (const std::regex_error& e) {
            return err(where, std::string("cannot check '") + what + "' values against 'pattern': " + e.what());
          }
        }
      } else if (k == "format") {
        return err(where, std::string("'") + what + "' together with 'format' is not supported");
      } else if (k == "minItems" || k == "maxItems") {
        DI_ASSIGN_OR_RETURN(int64_t b, count(x, k));
        if (v.is_array()) ok = k == "minItems" ? static_cast<int64_t>(v.size()) >= b : static_cast<int64_t>(v.size()) <= b;
      } else if (k == "prefixItems") {
        if (!x.is_array()) return err(where, "'prefixItems' must be an array");
        for (size_t i = 0; ok && v.is_array() && i < std::min(v.size(), x.size()); ++i) {
          DI_ASSIGN_OR_RETURN(std::string r, check_value(v[i], x[i], where + "/prefixItems/" + std::to_string(i), what, depth + 1));
          ok = r.empty();
        }
      } else if (k == "items") {
        if (x.is_array()) return err(where, "array-form 'items' is not supported; use 'prefixItems'");
        size_t start = s.contains("prefixItems") && s["prefixItems"].is_array() ? s["prefixItems"].size() : 0;
        for (size_t i = start; ok && v.is_array() && i < v.size(); ++i) {
          DI_ASSIGN_OR_RETURN(std::string r, check_value(v[i], x, where + "/items", what, depth + 1));
          ok = r.empty();
        }
      } else if (k == "properties") {
        if (!x.is_object()) return err(where, "'properties' must be an object");
        for (auto p = x.begin(); ok && v.is_object() && p != x.end(); ++p) {
          if (!v.contains(p.key())) continue;
          DI_ASSIGN_OR_RETURN(std::string r, check_value(v[p.key()], p.value(), where + "/properties/" + p.key(), what, depth + 1));
          ok = r.empty();
        }
      } else if (k == "required") {
        if (!x.is_array()) return err(where, "'required' must be an array");
        for (const Json& r : x) {
          if (!r.is_string()) return err(where, "'required' entries must be strings");
          if (v.is_object() && !v.contains(r.get<std::string>())) ok = false;
        }
      } else if (k == "additionalProperties") {
        const Json* props = s.contains("properties") && s["properties"].is_object() ? &s["properties"] : nullptr;
        for (auto p = v.begin(); ok && v.is_object() && p != v.end(); ++p) {
          if (props && props->contains(p.key())) continue;
          DI_ASSIGN_OR_RETURN(std::string r, check_value(p.value(), x, where + "/additionalProperties", what, depth + 1));
          ok = r.empty();
        }
      } else if (k == "anyOf" || k == "oneOf" || k == "allOf") {
        if (!x.is_array() || x.empty()) return err(where, "'" + k + "' must be a non-empty array");
        int matched = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          DI_ASSIGN_OR_RETURN(std::string r, check_value(v, x[i], where + "/" + k + "/" + std::to_string(i), what, depth + 1));
          matched += r.empty();
        }
        ok = k == "anyOf" ? matched > 0 : k == "oneOf" ? matched == 1 : matched == static_cast<int>(x.size());
      } else if (k == "$ref") {
        if (!x.is_string()) return err(where, "'$ref' must be a string");
        DI_ASSIGN_OR_RETURN(const Json* target, resolve(x.get<std::string>(), where));
        DI_ASSIGN_OR_RETURN(std::string r, check_value(v, *target, x.get<std::string>(), what, depth + 1));
        ok = r.empty();
      } else {
        return err(where, "unsupported keyword '" + k + "'");
      }
      if (!ok) return k;
    }
    return std::string();
  }

  Result<std::string> visit_type(const Json& s, const std::string& type, const std::string& hint,
                                 const std::string& where) {
    if (type == "null") return std::string("\"null\"");
    if (type == "boolean") return std::string("(\"true\" | \"false\")");
    if (type == "string") return visit_string(s, hint, where);
    if (type == "integer" || type == "number") return visit_number(s, type == "integer", hint, where);
    if (type == "object") return visit_object(s, hint, where);
    if (type == "array") return visit_array(s, hint, where);
    return err(where, "unknown type '" + type + "'");
  }

  Result<std::string> visit_string(const Json& s, const std::string& hint, const std::string& where) {
    bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern") || s.contains("format")) {
      if (has_len) return err(where, "'minLength'/'maxLength' together with 'pattern'/'format' is not supported");
      if (s.contains("pattern") && s.contains("format")) return err(where, "'pattern' together with 'format' is not supported");
      std::string regex;
      if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) return err(where, "'pattern' must be a string");
        regex = s["pattern"].get<std::string>();
      } else {
        if (!s["format"].is_string()) return err(where, "'format' must be a string");
        std::optional<std::string> r = json_parts::format_regex(s["format"].get<std::string>());
        if (!r) return err(where, "unsupported format '" + s["format"].get<std::string>() + "'");
        regex = *r;
      }
      DI_ASSIGN_OR_RETURN(std::string body, regex_body(regex, where));
      return define(hint + "_str", body);
    }
    if (!has_len) return json_string();
    int64_t lo = s.value("minLength", int64_t{0});
    int64_t hi = s.contains("maxLength") ? s["maxLength"].get<int64_t>() : -1;
    if (lo < 0 || (hi >= 0 && hi < lo) || lo > kMaxRepeat || hi > kMaxRepeat) {
      return err(where, "bad minLength/maxLength (at most " + std::to_string(kMaxRepeat) + ")");
    }
    std::string rep = hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    return define(hint + "_str", std::string("\"\\\"\" ") + kChar + rep + " \"\\\"\"");
  }

  Result<std::string> visit_number(const Json& s, bool integer, const std::string& hint, const std::string& where) {
    std::optional<double> lo, hi;
    bool lo_ex = false, hi_ex = false;
    auto num = [&](const char* key, std::optional<double>& out) -> Status {
      if (!s.contains(key)) return Status::ok();
      if (!s[key].is_number()) return err(where, std::string("'") + key + "' must be a number");
      out = s[key].get<double>();
      return Status::ok();
    };
    std::optional<double> exlo, exhi;
    DI_TRY(num("minimum", lo));
    DI_TRY(num("maximum", hi));
    DI_TRY(num("exclusiveMinimum", exlo));
    DI_TRY(num("exclusiveMaximum", exhi));
    if (exlo && (!lo || *exlo >= *lo)) lo = exlo, lo_ex = true;
    if (exhi && (!hi || *exhi <= *hi)) hi = exhi, hi_ex = true;
    if (!lo && !hi) return integer ? json_integer() : json_number();
    constexpr double kLimit = 9.0e15;
    std::optional<int64_t> ilo, ihi;
    if (lo && std::abs(*lo) < kLimit) {
      double c = std::ceil(*lo);
      if (c != *lo) lo_ex = false;  // rounded inwards
      ilo = static_cast<int64_t>(c);
    }
    if (hi && std::abs(*hi) < kLimit) {
      double f = std::floor(*hi);
      if (f != *hi) hi_ex = false;
      ihi = static_cast<int64_t>(f);
    }
    if (integer) {
      if (ilo && lo_ex) *ilo += 1;
      if (ihi && hi_ex) *ihi -= 1;
      if (ilo && ihi && *ilo > *ihi) return err(where, "the integer range is empty");
      return define(hint + "_int", regex_to_ebnf(json_parts::integer_range_regex(ilo, ihi)));
    }
    if (ilo && ihi && (*ilo > *ihi || (*ilo == *ihi && (lo_ex || hi_ex)))) {
      return err(where, "the number range is empty (non-integer bounds are rounded inwards)");
    }
    return define(hint + "_num", regex_to_ebnf(json_parts::number_range_regex(ilo, lo_ex, ihi, hi_ex)));
  }

  static std::string regex_to_ebnf(const std::string& regex) {
    Grammar empty;
    return "(" + expr_to_ebnf(regex_to_expr(regex).value(), empty) + ")";
  }

  // A JSON string whose (unescaped) value is none of `keys`: a walk of the keys' trie that must
  // leave it (by a character no key continues with, or by ending where no key ends).
  std::string key_not_in(const std::vector<std::string>& keys) {
    struct Node {
      std::map<uint32_t, int> kids;
      bool end = false;
    };
    std::vector<Node> t(1);
    for (const std::string& k : keys) {
      int cur = 0;
      for (size_t i = 0; i < k.size();) {
        auto c = static_cast<unsigned char>(k[i]);
        int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
        for (int j = 1; j < len && i + static_cast<size_t>(j) < k.size(); ++j) cp = (cp << 6) | (k[i + static_cast<size_t>(j)] & 0x3F);
        i += static_cast<size_t>(len);
        auto it = t[static_cast<size_t>(cur)].kids.find(cp);
        if (it == t[static_cast<size_t>(cur)].kids.end()) {
          t.push_back({});
          int id = static_cast<int>(t.size() - 1);
          t[static_cast<size_t>(cur)].kids[cp] = id;
          cur = id;
        } else {
          cur = it->second;
        }
      }
      t[static_cast<size_t>(cur)].end = true;
    }
    std::string tail = std::string(kChar) + "*";
    std::function<std::string(int)> build = [&](int n) -> std::string {
      const Node& node = t[static_cast<size_t>(n)];
      std::vector<std::string> alts;
      if (!node.end) alts.push_back("\"\"");
      CharSet kids;
      for (const auto& [cp, id] : node.kids) kids.push_back({cp, cp});
      CharSet other = complement_charset(normalize_charset(kids));
      Grammar empty;
      Expr diverge = escape_for_json_string(Expr::charset(other));
      alts.push_back("(" + expr_to_ebnf(diverge, empty) + ") " + tail);
      for (const auto& [cp, id] : node.kids) {
        std::string ch;
        append_utf8(ch, cp);
        Expr lit = escape_for_json_string(Expr::literal(ch));
        alts.push_back(expr_to_ebnf(lit, empty) + " " + build(id));
      }
      return "(" + [&] {
        std::string s;
        for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
        return s;
      }() + ")";
    };
    return "\"\\\"\" " + build(0) + " \"\\\"\"";
  }

  Result<std::string> visit_object(const Json& s, const std::string& hint, const std::string& where) {
    std::vector<std::pair<std::string, std::string>> props;  // key literal, value item
    std::vector<bool> required;
    std::vector<std::string> names;
    std::set<std::string> req;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return err(where, "'required' must be an array");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return err(where, "'required' entries must be strings");
        req.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return err(where, "'properties' must be an object");
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
        std::string w = where + "/properties/" + it.key();
        DI_ASSIGN_OR_RETURN(std::string v, visit(it.value(), hint + "_" + it.key(), w));
        v = as_item(hint + "_" + it.key(), v);
        names.push_back(it.key());
        props.push_back({quote_literal(Json(it.key()).dump()), v});
        required.push_back(req.count(it.key()) > 0);
      }
    }
    for (const std::string& r : req) {
      if (std::find(names.begin(), names.end(), r) == names.end() && s.contains("additionalProperties") &&
          s["additionalProperties"].is_boolean() && !s["additionalProperties"].get<bool>()) {
        return err(where, "required property '" + r + "' is not in 'properties'");
      }
      if (std::find(names.begin(), names.end(), r) == names.end()) {
        return err(where, "required property '" + r + "' must be listed in 'properties'");
      }
    }
    std::string extra_kv;
    bool additional = !opts_.strict;
    Json extra_schema = true;
    if (s.contains("additionalProperties")) {
      const Json& a = s["additionalProperties"];
      if (a.is_boolean()) {
        additional = a.get<bool>();
      } else {
        additional = true;
        extra_schema = a;
      }
    }
    if (additional) {
      DI_ASSIGN_OR_RETURN(std::string v, visit(extra_schema, hint + "_extra", where + "/additionalProperties"));
      v = as_item(hint + "_extra", v);
      std::string key = names.empty() ? json_string() : define(hint + "_key", key_not_in(names));
      extra_kv = key + " " + colon_ + " " + v;
    }
    if (opts_.key_order == JsonKeyOrder::kAny && props.size() > 1) {
      return any_order_object(props, required, additional, extra_kv, hint, where);
    }
    // F_i: properties i.. with nothing emitted yet; S_i: with something emitted (comma first).
    size_t n = props.size();
    std::vector<std::string> f(n + 1), sn(n + 1);
    std::string base = fresh(hint + "_obj");
    sn[n] = additional ? "(" + comma_ + " " + extra_kv + ")*" : "\"\"";
    f[n] = additional ? "(" + extra_kv + " (" + comma_ + " " + extra_kv + ")*)?" : "\"\"";
    std::string s_next = sn[n] == "\"\"" ? "" : define(base + "_s" + std::to_string(n), sn[n]);
    std::string f_next = f[n] == "\"\"" ? "" : define(base + "_f" + std::to_string(n), f[n]);
    for (size_t i = n; i-- > 0;) {
      std::string kv = props[i].first + " " + colon_ + " " + props[i].second;
      std::string s_body = comma_ + " " + kv + (s_next.empty() ? "" : " " + s_next);
      std::string f_body = kv + (s_next.empty() ? "" : " " + s_next);
      if (!required[i]) {
        s_body = "(" + s_body + ")" + (s_next.empty() ? "?" : " | " + s_next);
        f_body = "(" + f_body + ")" + (f_next.empty() ? "?" : " | " + f_next);
      }
      s_next = define(base + "_s" + std::to_string(i), s_body);
      f_next = define(base + "_f" + std::to_string(i), f_body);
    }
    return braces("{", f_next.empty() ? "" : f_next, "}");
  }

  // Properties in any order, each at most once: one rule per set S of properties already
  // emitted, T_S = (comma (kv_i T_{S+i} | ... | extra T_S))  optional once S holds every
  // required property. The first member has no comma: F = kv_i T_{i} | ... | extra T_{}.
  Result<std::string> any_order_object(const std::vector<std::pair<std::string, std::string>>& props,
                                       const std::vector<bool>& required, bool additional,
                                       const std::string& extra_kv, const std::string& hint, const std::string& where) {
    const size_t n = props.size();
    if (n > static_cast<size_t>(kMaxAnyOrderProperties)) {
      return err(where, "key order 'any' supports objects of at most " + std::to_string(kMaxAnyOrderProperties) +
                            " properties, this one has " + std::to_string(n) + " (use key order 'schema')");
    }
    const std::string base = fresh(hint + "_any");
    std::vector<std::string> kv(n);
    uint32_t req = 0;
    for (size_t i = 0; i < n; ++i) {
      kv[i] = define(base + "_kv" + std::to_string(i), props[i].first + " " + colon_ + " " + props[i].second);
      if (required[i]) req |= 1u << i;
    }
    const std::string comma = as_item("json_comma", comma_);
    const std::string extra = additional ? define(base + "_x", extra_kv) : "";
    const uint32_t full = (1u << n) - 1;
    std::vector<std::string> t(full + 1);
    for (uint32_t set = full + 1; set-- > 0;) {
      if (set == 0 && !additional) break;  // T_{} is only reached through an extra key
      std::string name = fresh(base + "_t" + std::to_string(set));
      t[set] = name;
      std::string alts;
      for (size_t i = 0; i < n; ++i) {
        if (set & (1u << i)) continue;
        alts += (alts.empty() ? "" : " | ") + kv[i] + " " + t[set | (1u << i)];
      }
      if (additional) alts += (alts.empty() ? "" : " | ") + extra + " " + name;
      std::string body = alts.empty() ? "\"\"" : comma + " (" + alts + ")";
      if (!alts.empty() && (set & req) == req) body = "(" + body + ")?";
      rules_.push_back({name, body});
    }
    std::string first;
    for (size_t i = 0; i < n; ++i) first += (first.empty() ? "" : " | ") + kv[i] + " " + t[1u << i];
    if (additional) first += " | " + extra + " " + t[0];
    first = "(" + first + ")";
    if (req == 0) first += "?";
    return braces("{", define(base + "_f", first), "}");
  }

  Result<std::string> visit_array(const Json& s, const std::string& hint, const std::string& where) {
    int64_t lo = s.value("minItems", int64_t{0});
    int64_t hi = s.contains("maxItems") ? s["maxItems"].get<int64_t>() : -1;
    if (lo < 0 || (hi >= 0 && hi < lo) || lo > kMaxRepeat || hi > kMaxRepeat) {
      return err(where, "bad minItems/maxItems (at most " + std::to_string(kMaxRepeat) + ")");
    }
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) return err(where, "'prefixItems' must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        std::string w = where + "/prefixItems/" + std::to_string(i);
        DI_ASSIGN_OR_RETURN(std::string v, visit(s["prefixItems"][i], hint + "_" + std::to_string(i), w));
        prefix.push_back(as_item(hint + "_" + std::to_string(i), v));
      }
    }
    std::string item;
    bool items_allowed = true;
    if (s.contains("items")) {
      const Json& it = s["items"];
      if (it.is_array()) return err(where, "array-form 'items' is not supported; use 'prefixItems'");
      if (it.is_boolean() && !it.get<bool>()) {
        items_allowed = false;
      } else {
        DI_ASSIGN_OR_RETURN(std::string v, visit(it, hint + "_item", where + "/items"));
        item = as_item(hint + "_item", v);
      }
    } else {
      item = any_value_rule();
    }
    auto k = static_cast<int64_t>(prefix.size());
    if (!items_allowed) hi = hi < 0 ? k : std::min(hi, k);
    if (lo > k && !items_allowed) return err(where, "minItems exceeds the number of prefixItems");
    if (hi == 0) return braces("[", "", "]");
    // Tail after the prefix: items k.. (count [max(0, lo-k), hi-k]).
    std::string tail;
    if (items_allowed && (hi < 0 || hi > k)) {
      int64_t tlo = std::max<int64_t>(0, lo - k), thi = hi < 0 ? -1 : hi - k;
      if (k == 0) {
        // First item has no comma.
        std::string rest_rep = thi < 0 ? "{" + std::to_string(std::max<int64_t>(0, tlo - 1)) + ",}"
                                       : "{" + std::to_string(std::max<int64_t>(0, tlo - 1)) + "," + std::to_string(thi - 1) + "}";
        tail = item + " (" + comma_ + " " + item + ")" + rest_rep;
        if (tlo == 0) tail = "(" + tail + ")?";
      } else {
        std::string rep = thi < 0 ? "{" + std::to_string(tlo) + ",}" : "{" + std::to_string(tlo) + "," + std::to_string(thi) + "}";
        tail = "(" + comma_ + " " + item + ")" + rep;
      }
    }
    // Prefix items, nested so that the first `lo` are mandatory.
    std::string inner = tail;
    for (int64_t i = k; i-- > 0;) {
      std::string cur = (i == 0 ? "" : comma_ + " ") + prefix[static_cast<size_t>(i)] + (inner.empty() ? "" : " " + inner);
      inner = i < lo ? cur : "(" + cur + ")?";
    }
    return braces("[", inner, "]");
  }

  const Json& doc_;
  JsonSchemaOptions opts_;
  std::string ws_, comma_, colon_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  std::map<std::string, std::string> by_body_;
  std::map<std::string, std::string> ref_rules_;
  int depth_ = 0;
};

}  // namespace

Result<std::string> json_schema_to_ebnf(std::string_view schema, const JsonSchemaOptions& opts) {
  DI_ASSIGN_OR_RETURN(Json doc, parse_schema(schema));
  try {
    Converter c(doc, opts);
    return c.run();
  } catch (const std::exception& e) {  // nlohmann type errors on malformed keyword values
    return Status::invalid_argument(std::string("JSON Schema: ") + e.what());
  }
}

Result<Grammar> json_schema_to_grammar(std::string_view schema, const JsonSchemaOptions& opts) {
  DI_ASSIGN_OR_RETURN(std::string ebnf, json_schema_to_ebnf(schema, opts));
  Result<Grammar> g = parse_ebnf(ebnf, "root");
  if (!g.is_ok()) return Status::internal("JSON Schema converter produced bad EBNF: " + std::string(g.status().message()));
  return g;
}

std::string builtin_json_ebnf(bool object_only, const JsonSchemaOptions& opts) {
  Json doc = object_only ? Json{{"type", "object"}, {"additionalProperties", true}} : Json(true);
  Converter c(doc, opts);
  return c.run().value();
}

}  // namespace deepinfer::grammar
