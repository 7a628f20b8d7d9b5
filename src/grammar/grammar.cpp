#include "grammar/grammar.h"

#include <algorithm>
#include <cstdio>

namespace deepinfer::grammar {

CharSet normalize_charset(CharSet ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodePointRange& a, const CodePointRange& b) { return a.lo < b.lo; });
  CharSet out;
  for (const CodePointRange& r : ranges) {
    if (r.lo > r.hi) continue;
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

CharSet complement_charset(const CharSet& set) {
  CharSet out;
  uint32_t next = 0;
  for (const CodePointRange& r : set) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

bool charset_contains(const CharSet& set, uint32_t cp) {
  for (const CodePointRange& r : set) {
    if (cp >= r.lo && cp <= r.hi) return true;
  }
  return false;
}

Expr Expr::literal(std::string bytes) {
  Expr e;
  e.kind = bytes.empty() ? Kind::kEmpty : Kind::kLiteral;
  e.text = std::move(bytes);
  return e;
}

Expr Expr::charset(CharSet set) {
  Expr e;
  e.kind = Kind::kCharSet;
  e.chars = normalize_charset(std::move(set));
  return e;
}

Expr Expr::rule_ref(int32_t idx) {
  Expr e;
  e.kind = Kind::kRuleRef;
  e.rule_idx = idx;
  return e;
}

Expr Expr::sequence(std::vector<Expr> items) {
  if (items.empty()) return empty();
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kSequence;
  e.children = std::move(items);
  return e;
}

Expr Expr::choice(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kChoice;  // an empty choice matches nothing
  e.children = std::move(items);
  return e;
}

Expr Expr::repeat(Expr item, int32_t min, int32_t max) {
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = Kind::kRepeat;
  e.min_repeat = min;
  e.max_repeat = max;
  e.children.push_back(std::move(item));
  return e;
}

Expr Expr::token(std::string content) {
  Expr e;
  e.kind = Kind::kToken;
  e.text = std::move(content);
  return e;
}

Result<int32_t> Grammar::add_rule(std::string name) {
  if (find_rule(name) >= 0) return Status::invalid_argument("rule '" + name + "' is defined twice");
  rules_.push_back(Rule{std::move(name), Expr::empty()});
  return static_cast<int32_t>(rules_.size() - 1);
}

int32_t Grammar::find_rule(std::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

namespace {

Status validate_expr(const Expr& e, const Grammar& g, const std::string& rule) {
  switch (e.kind) {
    case Expr::Kind::kEmpty:
    case Expr::Kind::kLiteral:
      return Status::ok();
    case Expr::Kind::kToken:
      if (e.text.empty()) return Status::invalid_argument("rule '" + rule + "': empty special-token terminal");
      return Status::ok();
    case Expr::Kind::kCharSet:
      for (const CodePointRange& r : e.chars) {
        if (r.lo > r.hi || r.hi > kMaxCodePoint) {
          return Status::invalid_argument("rule '" + rule + "': bad character range");
        }
      }
      return Status::ok();
    case Expr::Kind::kRuleRef:
      if (e.rule_idx < 0 || e.rule_idx >= g.num_rules()) {
        return Status::invalid_argument("rule '" + rule + "': reference to an undefined rule");
      }
      return Status::ok();
    case Expr::Kind::kRepeat:
      if (e.min_repeat < 0 || e.min_repeat > kMaxRepeat ||
          (e.max_repeat != kUnbounded && (e.max_repeat < e.min_repeat || e.max_repeat > kMaxRepeat))) {
        return Status::invalid_argument("rule '" + rule + "': bad repetition bounds {" +
                                        std::to_string(e.min_repeat) + "," +
                                        std::to_string(e.max_repeat) + "} (at most " +
                                        std::to_string(kMaxRepeat) + ")");
      }
      [[fallthrough]];
    case Expr::Kind::kSequence:
    case Expr::Kind::kChoice:
      for (const Expr& c : e.children) DI_TRY(validate_expr(c, g, rule));
      return Status::ok();
  }
  return Status::ok();
}

void append_hex_escape(std::string& out, uint32_t cp) {
  char buf[16];
  if (cp < 0x100) {
    std::snprintf(buf, sizeof(buf), "\\x%02X", cp);
  } else if (cp < 0x10000) {
    std::snprintf(buf, sizeof(buf), "\\u%04X", cp);
  } else {
    std::snprintf(buf, sizeof(buf), "\\U%08X", cp);
  }
  out += buf;
}

void append_class_char(std::string& out, uint32_t cp) {
  if (cp == '\\' || cp == ']' || cp == '-' || cp == '^' || cp == '[') {
    out += '\\';
    out += static_cast<char>(cp);
  } else if (cp == '\n') {
    out += "\\n";
  } else if (cp == '\t') {
    out += "\\t";
  } else if (cp == '\r') {
    out += "\\r";
  } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || (cp >= 0xD800 && cp <= 0xDFFF)) {
    append_hex_escape(out, cp);
  } else {
    append_utf8(out, cp);
  }
}

void print_expr(const Expr& e, const Grammar& g, std::string& out, bool nested) {
  switch (e.kind) {
    case Expr::Kind::kEmpty:
      out += "\"\"";
      return;
    case Expr::Kind::kLiteral:
      out += '"';
      append_escaped_literal(out, e.text);
      out += '"';
      return;
    case Expr::Kind::kToken:
      out += "<\"";
      append_escaped_literal(out, e.text);
      out += "\">";
      return;
    case Expr::Kind::kCharSet:
      out += '[';
      for (const CodePointRange& r : e.chars) {
        append_class_char(out, r.lo);
        if (r.hi != r.lo) {
          out += '-';
          append_class_char(out, r.hi);
        }
      }
      out += ']';
      return;
    case Expr::Kind::kRuleRef:
      out += g.rules()[static_cast<size_t>(e.rule_idx)].name;
      return;
    case Expr::Kind::kSequence:
      if (nested) out += '(';
      for (size_t i = 0; i < e.children.size(); ++i) {
        if (i) out += ' ';
        print_expr(e.children[i], g, out, /*nested=*/e.children[i].kind == Expr::Kind::kChoice);
      }
      if (nested) out += ')';
      return;
    case Expr::Kind::kChoice:
      if (e.children.empty()) {
        out += "[]";  // matches nothing
        return;
      }
      if (nested) out += '(';
      for (size_t i = 0; i < e.children.size(); ++i) {
        if (i) out += " | ";
        print_expr(e.children[i], g, out, /*nested=*/false);
      }
      if (nested) out += ')';
      return;
    case Expr::Kind::kRepeat: {
      const Expr& c = e.children[0];
      bool wrap = c.kind == Expr::Kind::kSequence || c.kind == Expr::Kind::kChoice ||
                  c.kind == Expr::Kind::kRepeat;
      if (wrap) out += '(';
      print_expr(c, g, out, /*nested=*/false);
      if (wrap) out += ')';
      int32_t lo = e.min_repeat, hi = e.max_repeat;
      if (lo == 0 && hi == 1) {
        out += '?';
      } else if (lo == 0 && hi == kUnbounded) {
        out += '*';
      } else if (lo == 1 && hi == kUnbounded) {
        out += '+';
      } else if (hi == kUnbounded) {
        out += "{" + std::to_string(lo) + ",}";
      } else if (lo == hi) {
        out += "{" + std::to_string(lo) + "}";
      } else {
        out += "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
      }
      return;
    }
  }
}

}  // namespace

Status Grammar::validate() const {
  if (root_ < 0 || root_ >= num_rules()) return Status::invalid_argument("grammar has no root rule");
  for (const Rule& r : rules_) DI_TRY(validate_expr(r.body, *this, r.name));
  return Status::ok();
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void append_escaped_literal(std::string& out, std::string_view utf8) {
  for (char ch : utf8) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      append_hex_escape(out, c);
    } else {
      out += ch;  // UTF-8 continuation and lead bytes pass through
    }
  }
}

std::string expr_to_ebnf(const Expr& e, const Grammar& g) {
  std::string out;
  print_expr(e, g, out, /*nested=*/false);
  return out;
}

std::string Grammar::to_ebnf() const {
  std::string out;
  auto print_rule = [&](const Rule& r) {
    out += r.name;
    out += " ::= ";
    print_expr(r.body, *this, out, /*nested=*/false);
    out += '\n';
  };
  if (root_ >= 0 && root_ < num_rules()) print_rule(rules_[static_cast<size_t>(root_)]);
  for (int32_t i = 0; i < num_rules(); ++i) {
    if (i != root_) print_rule(rules_[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace deepinfer::grammar
