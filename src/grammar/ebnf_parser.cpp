#include "grammar/ebnf_parser.h"

#include <map>
#include <string>

namespace deepinfer::grammar {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view root) : s_(text), root_name_(root) {}

  Result<Grammar> run() {
    skip_space();
    if (pos_ >= s_.size()) return error_at(pos_, "empty grammar");
    while (pos_ < s_.size()) {
      DI_TRY(parse_rule());
      skip_space();
    }
    for (const auto& [name, use] : first_use_) {
      int32_t idx = g_.find_rule(name);
      if (!defined_[static_cast<size_t>(idx)]) {
        return error_at(use, "rule '" + name + "' is referenced but not defined");
      }
    }
    int32_t root = g_.find_rule(root_name_);
    if (root < 0 || !defined_[static_cast<size_t>(root)]) {
      return Status::invalid_argument("1:1: the grammar has no rule named '" + std::string(root_name_) + "'");
    }
    g_.set_root(root);
    DI_TRY(g_.validate());
    return std::move(g_);
  }

 private:
  Status error_at(size_t offset, const std::string& msg) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < offset && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return Status::invalid_argument(std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
  }

  void skip_space() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view peek_name(size_t at) const {
    size_t e = at;
    while (e < s_.size() && is_name_char(s_[e])) ++e;
    return s_.substr(at, e - at);
  }

  /// True when a `name ::=` starts at pos_ (the end of the current rule).
  bool at_rule_start() const {
    std::string_view name = peek_name(pos_);
    if (name.empty()) return false;
    size_t p = pos_ + name.size();
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n' || s_[p] == '\r')) ++p;
    return s_.substr(p, 3) == "::=";
  }

  int32_t rule_index(const std::string& name, size_t use_pos) {
    int32_t idx = g_.find_rule(name);
    if (idx < 0) {
      idx = g_.add_rule(name).value();
      defined_.push_back(false);
    }
    if (use_pos != std::string::npos && !first_use_.count(name)) first_use_[name] = use_pos;
    return idx;
  }

  Status parse_rule() {
    size_t start = pos_;
    std::string name(peek_name(pos_));
    if (name.empty()) return error_at(pos_, "expected a rule name");
    pos_ += name.size();
    skip_space();
    if (s_.substr(pos_, 3) != "::=") return error_at(pos_, "expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    int32_t idx = rule_index(name, std::string::npos);
    if (defined_[static_cast<size_t>(idx)]) return error_at(start, "rule '" + name + "' is defined twice");
    defined_[static_cast<size_t>(idx)] = true;
    Expr body;
    DI_TRY(parse_choice(body, /*depth=*/0));
    skip_space();
    if (pos_ < s_.size() && !at_rule_start()) {
      return error_at(pos_, std::string("unexpected '") + s_[pos_] + "'");
    }
    g_.set_body(idx, std::move(body));
    return Status::ok();
  }

  Status parse_choice(Expr& out, int depth) {
    if (depth > 200) return error_at(pos_, "nesting too deep");
    std::vector<Expr> alts;
    while (true) {
      Expr seq;
      DI_TRY(parse_sequence(seq, depth));
      alts.push_back(std::move(seq));
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    out = Expr::choice(std::move(alts));
    return Status::ok();
  }

  Status parse_sequence(Expr& out, int depth) {
    std::vector<Expr> items;
    while (true) {
      skip_space();
      if (pos_ >= s_.size()) break;
      char c = s_[pos_];
      if (c == '|' || c == ')') break;
      if (at_rule_start()) break;
      Expr item;
      DI_TRY(parse_primary(item, depth));
      DI_TRY(parse_postfix(item));
      items.push_back(std::move(item));
    }
    out = Expr::sequence(std::move(items));
    return Status::ok();
  }

  Status parse_postfix(Expr& item) {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '?') {
        item = Expr::repeat(std::move(item), 0, 1);
      } else if (c == '*') {
        item = Expr::repeat(std::move(item), 0, kUnbounded);
      } else if (c == '+') {
        item = Expr::repeat(std::move(item), 1, kUnbounded);
      } else if (c == '{') {
        size_t open = pos_;
        ++pos_;
        int64_t lo = 0, hi = 0;
        if (!parse_int(lo)) return error_at(pos_, "expected a number in {m,n}");
        hi = lo;
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          skip_inline_space();
          if (pos_ < s_.size() && s_[pos_] == '}') {
            hi = kUnbounded;
          } else if (!parse_int(hi)) {
            return error_at(pos_, "expected a number or '}' in {m,n}");
          }
        }
        skip_inline_space();
        if (pos_ >= s_.size() || s_[pos_] != '}') return error_at(pos_, "expected '}'");
        if (lo > kMaxRepeat || hi > kMaxRepeat || (hi != kUnbounded && hi < lo)) {
          return error_at(open, "bad repetition bounds (need m <= n <= " + std::to_string(kMaxRepeat) + ")");
        }
        item = Expr::repeat(std::move(item), static_cast<int32_t>(lo), static_cast<int32_t>(hi));
      } else {
        break;
      }
      ++pos_;
    }
    return Status::ok();
  }

  void skip_inline_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }

  bool parse_int(int64_t& v) {
    skip_inline_space();
    size_t b = pos_;
    v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9' && v <= 1000000) {
      v = v * 10 + (s_[pos_] - '0');
      ++pos_;
    }
    skip_inline_space();
    return pos_ > b;
  }

  // Reads one (possibly escaped) code point of a literal or class at pos_.
  Status read_char(uint32_t& cp) {
    if (pos_ >= s_.size()) return error_at(pos_, "unterminated literal");
    auto c = static_cast<unsigned char>(s_[pos_]);
    if (c != '\\') {
      // Raw UTF-8: decode one code point.
      int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
      if (len == 0 || pos_ + static_cast<size_t>(len) > s_.size()) return error_at(pos_, "invalid UTF-8");
      cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
      for (int i = 1; i < len; ++i) {
        auto cc = static_cast<unsigned char>(s_[pos_ + static_cast<size_t>(i)]);
        if ((cc & 0xC0) != 0x80) return error_at(pos_, "invalid UTF-8");
        cp = (cp << 6) | (cc & 0x3F);
      }
      pos_ += static_cast<size_t>(len);
      return Status::ok();
    }
    size_t at = pos_;
    ++pos_;
    if (pos_ >= s_.size()) return error_at(at, "dangling '\\'");
    char e = s_[pos_++];
    int digits = 0;
    switch (e) {
      case 'n': cp = '\n'; return Status::ok();
      case 'r': cp = '\r'; return Status::ok();
      case 't': cp = '\t'; return Status::ok();
      case 'f': cp = '\f'; return Status::ok();
      case 'v': cp = '\v'; return Status::ok();
      case '0': cp = 0; return Status::ok();
      case 'x': digits = 2; break;
      case 'u': digits = 4; break;
      case 'U': digits = 8; break;
      case '\\': case '"': case '\'': case ']': case '[': case '-': case '^': case '/':
        cp = static_cast<unsigned char>(e);
        return Status::ok();
      default:
        return error_at(at, std::string("unknown escape '\\") + e + "'");
    }
    cp = 0;
    for (int i = 0; i < digits; ++i) {
      int h = pos_ < s_.size() ? hex_value(s_[pos_]) : -1;
      if (h < 0) return error_at(pos_, "expected " + std::to_string(digits) + " hex digits");
      cp = cp * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return error_at(at, "escape is not a Unicode scalar value");
    return Status::ok();
  }

  Status parse_primary(Expr& out, int depth) {
    char c = s_[pos_];
    size_t at = pos_;
    if (c == '<') {
      // Special-token terminal: <"content"> (the added token with that content, matched by id).
      ++pos_;
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) {
        return error_at(at, "expected a quoted token after '<' (special token: <\"...\">)");
      }
      Expr lit;
      DI_TRY(parse_primary(lit, depth));
      if (pos_ >= s_.size() || s_[pos_] != '>') return error_at(at, "expected '>' to close the special token");
      ++pos_;
      if (lit.text.empty()) return error_at(at, "empty special token");
      out = Expr::token(std::move(lit.text));
      return Status::ok();
    }
    if (c == '"' || c == '\'') {
      char quote = c;
      ++pos_;
      std::string bytes;
      while (true) {
        if (pos_ >= s_.size() || s_[pos_] == '\n') return error_at(at, "unterminated string literal");
        if (s_[pos_] == quote) {
          ++pos_;
          break;
        }
        uint32_t cp = 0;
        DI_TRY(read_char(cp));
        append_utf8(bytes, cp);
      }
      out = Expr::literal(std::move(bytes));
      return Status::ok();
    }
    if (c == '[') {
      ++pos_;
      bool negated = false;
      if (pos_ < s_.size() && s_[pos_] == '^') {
        negated = true;
        ++pos_;
      }
      CharSet set;
      while (true) {
        if (pos_ >= s_.size()) return error_at(at, "unterminated character class");
        if (s_[pos_] == ']') {
          ++pos_;
          break;
        }
        uint32_t lo = 0, hi = 0;
        DI_TRY(read_char(lo));
        hi = lo;
        if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
          ++pos_;
          DI_TRY(read_char(hi));
          if (hi < lo) return error_at(at, "character range is out of order");
        }
        set.push_back({lo, hi});
      }
      set = normalize_charset(std::move(set));
      out = Expr::charset(negated ? complement_charset(set) : set);
      return Status::ok();
    }
    if (c == '(') {
      ++pos_;
      DI_TRY(parse_choice(out, depth + 1));
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ')') return error_at(at, "unclosed '('");
      ++pos_;
      return Status::ok();
    }
    if (c == '.') {
      ++pos_;
      out = Expr::charset(complement_charset({}));
      return Status::ok();
    }
    if (is_name_char(c)) {
      std::string name(peek_name(pos_));
      pos_ += name.size();
      out = Expr::rule_ref(rule_index(name, at));
      return Status::ok();
    }
    return error_at(pos_, std::string("unexpected '") + c + "'");
  }

  std::string_view s_;
  std::string_view root_name_;
  size_t pos_ = 0;
  Grammar g_;
  std::vector<bool> defined_;
  std::map<std::string, size_t> first_use_;
};

}  // namespace

Result<Grammar> parse_ebnf(std::string_view text, std::string_view root_rule) {
  return Parser(text, root_rule).run();
}

}  // namespace deepinfer::grammar
