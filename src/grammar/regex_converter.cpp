#include "grammar/regex_converter.h"

#include <algorithm>
#include <cstdio>

namespace deepinfer::grammar {
namespace {

CharSet digit_set() { return {{'0', '9'}}; }
CharSet word_set() { return normalize_charset({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}); }
CharSet space_set() {
  return normalize_charset({{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                            {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
                            {0xFEFF, 0xFEFF}});
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view p) : s_(p) {}

  Result<Expr> run() {
    if (!s_.empty() && s_[0] == '^') pos_ = 1;
    Expr e;
    DI_TRY(parse_alt(e, 0));
    if (pos_ < s_.size()) {
      if (s_[pos_] == ')') return err("unmatched ')'");
      return err("unexpected character");
    }
    return e;
  }

 private:
  Status err(const std::string& msg) const {
    return Status::invalid_argument("regex: " + msg + " at offset " + std::to_string(pos_) + " in /" +
                                    std::string(s_) + "/");
  }

  bool at_end_anchor() const { return pos_ + 1 == s_.size() && s_[pos_] == '$'; }

  Status parse_alt(Expr& out, int depth) {
    if (depth > 100) return err("nesting too deep");
    std::vector<Expr> alts;
    while (true) {
      Expr seq;
      DI_TRY(parse_seq(seq, depth));
      alts.push_back(std::move(seq));
      if (pos_ < s_.size() && s_[pos_] == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    out = Expr::choice(std::move(alts));
    return Status::ok();
  }

  Status parse_seq(Expr& out, int depth) {
    std::vector<Expr> items;
    while (pos_ < s_.size() && s_[pos_] != '|' && s_[pos_] != ')') {
      if (at_end_anchor()) {
        ++pos_;
        break;
      }
      Expr atom;
      DI_TRY(parse_atom(atom, depth));
      DI_TRY(parse_quantifier(atom));
      items.push_back(std::move(atom));
    }
    out = Expr::sequence(std::move(items));
    return Status::ok();
  }

  bool read_int(int64_t& v) {
    size_t b = pos_;
    v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9' && v < 1000000) v = v * 10 + (s_[pos_++] - '0');
    return pos_ > b;
  }

  Status parse_quantifier(Expr& atom) {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      int64_t lo = 0, hi = 0;
      if (c == '?') {
        lo = 0, hi = 1;
        ++pos_;
      } else if (c == '*') {
        lo = 0, hi = kUnbounded;
        ++pos_;
      } else if (c == '+') {
        lo = 1, hi = kUnbounded;
        ++pos_;
      } else if (c == '{') {
        size_t save = pos_;
        ++pos_;
        if (!read_int(lo)) {
          pos_ = save;  // a literal '{'
          return Status::ok();
        }
        hi = lo;
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          if (!read_int(hi)) hi = kUnbounded;
        }
        if (pos_ >= s_.size() || s_[pos_] != '}') return err("unterminated {m,n}");
        ++pos_;
        if (lo > kMaxRepeat || hi > kMaxRepeat || (hi != kUnbounded && hi < lo)) {
          return err("bad repetition bounds (need m <= n <= " + std::to_string(kMaxRepeat) + ")");
        }
      } else {
        return Status::ok();
      }
      if (pos_ < s_.size() && s_[pos_] == '?') ++pos_;  // lazy: same language
      if (pos_ < s_.size() && s_[pos_] == '+') return err("possessive quantifiers are not supported");
      atom = Expr::repeat(std::move(atom), static_cast<int32_t>(lo), static_cast<int32_t>(hi));
    }
    return Status::ok();
  }

  Status read_utf8(uint32_t& cp) {
    auto c = static_cast<unsigned char>(s_[pos_]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > s_.size()) return err("invalid UTF-8");
    cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s_[pos_ + static_cast<size_t>(i)]) & 0x3F);
    pos_ += static_cast<size_t>(len);
    return Status::ok();
  }

  // After a '\': either a class escape (sets `set`, returns true in is_class) or one code point.
  Status read_escape(uint32_t& cp, CharSet& set, bool& is_class, bool in_class) {
    if (pos_ >= s_.size()) return err("dangling '\\'");
    char e = s_[pos_++];
    is_class = false;
    switch (e) {
      case 'd': set = digit_set(); is_class = true; return Status::ok();
      case 'D': set = complement_charset(digit_set()); is_class = true; return Status::ok();
      case 'w': set = word_set(); is_class = true; return Status::ok();
      case 'W': set = complement_charset(word_set()); is_class = true; return Status::ok();
      case 's': set = space_set(); is_class = true; return Status::ok();
      case 'S': set = complement_charset(space_set()); is_class = true; return Status::ok();
      case 'n': cp = '\n'; return Status::ok();
      case 'r': cp = '\r'; return Status::ok();
      case 't': cp = '\t'; return Status::ok();
      case 'f': cp = '\f'; return Status::ok();
      case 'v': cp = '\v'; return Status::ok();
      case '0': cp = 0; return Status::ok();
      case 'b':
        if (in_class) {
          cp = '\b';
          return Status::ok();
        }
        return err("word boundary \\b is not supported");
      case 'B': return err("\\B is not supported");
      case 'p': case 'P': return err("unicode property escapes \\p{...} are not supported");
      case 'k': return err("named backreferences are not supported");
      case 'x': case 'u': {
        if (e == 'u' && pos_ < s_.size() && s_[pos_] == '{') {
          ++pos_;
          cp = 0;
          int n = 0;
          while (pos_ < s_.size() && hex_value(s_[pos_]) >= 0 && n < 7) cp = cp * 16 + static_cast<uint32_t>(hex_value(s_[pos_++])), ++n;
          if (n == 0 || pos_ >= s_.size() || s_[pos_] != '}') return err("bad \\u{...} escape");
          ++pos_;
        } else {
          int digits = e == 'x' ? 2 : 4;
          cp = 0;
          for (int i = 0; i < digits; ++i) {
            int h = pos_ < s_.size() ? hex_value(s_[pos_]) : -1;
            if (h < 0) return err(std::string("bad \\") + e + " escape");
            cp = cp * 16 + static_cast<uint32_t>(h);
            ++pos_;
          }
        }
        if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return err("escape is not a Unicode scalar value");
        return Status::ok();
      }
      default:
        if (e >= '1' && e <= '9') return err("backreferences are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) return err(std::string("unknown escape \\") + e);
        --pos_;
        return read_utf8(cp);  // escaped punctuation or any other literal character
    }
  }

  Status parse_class(Expr& out) {
    ++pos_;  // '['
    bool negated = false;
    if (pos_ < s_.size() && s_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    CharSet set;
    bool first = true;
    while (true) {
      if (pos_ >= s_.size()) return err("unterminated character class");
      if (s_[pos_] == ']' && !first) {
        ++pos_;
        break;
      }
      if (s_[pos_] == ']' && first) {  // JS: [] matches nothing, []] is not special-cased
        ++pos_;
        out = Expr::charset(negated ? complement_charset({}) : CharSet{});
        return Status::ok();
      }
      first = false;
      uint32_t lo = 0;
      CharSet cls;
      bool is_class = false;
      if (s_[pos_] == '\\') {
        ++pos_;
        DI_TRY(read_escape(lo, cls, is_class, /*in_class=*/true));
      } else {
        DI_TRY(read_utf8(lo));
      }
      if (is_class) {
        set.insert(set.end(), cls.begin(), cls.end());
        continue;
      }
      uint32_t hi = lo;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        if (s_[pos_] == '\\') {
          ++pos_;
          DI_TRY(read_escape(hi, cls, is_class, /*in_class=*/true));
          if (is_class) return err("a class escape cannot end a range");
        } else {
          DI_TRY(read_utf8(hi));
        }
        if (hi < lo) return err("character range out of order");
      }
      set.push_back({lo, hi});
    }
    set = normalize_charset(std::move(set));
    out = Expr::charset(negated ? complement_charset(set) : set);
    return Status::ok();
  }

  Status parse_atom(Expr& out, int depth) {
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      if (pos_ < s_.size() && s_[pos_] == '?') {
        ++pos_;
        if (pos_ < s_.size() && s_[pos_] == ':') {
          ++pos_;
        } else if (pos_ < s_.size() && (s_[pos_] == '<' || s_[pos_] == 'P')) {
          if (s_[pos_] == 'P') ++pos_;
          if (pos_ + 1 < s_.size() && s_[pos_] == '<' && (s_[pos_ + 1] == '=' || s_[pos_ + 1] == '!')) {
            return err("lookbehind is not supported");
          }
          size_t close = s_.find('>', pos_);
          if (s_[pos_] != '<' || close == std::string_view::npos) return err("bad named group");
          pos_ = close + 1;
        } else {
          return err("lookahead and inline flags are not supported");
        }
      }
      DI_TRY(parse_alt(out, depth + 1));
      if (pos_ >= s_.size() || s_[pos_] != ')') return err("missing ')'");
      ++pos_;
      return Status::ok();
    }
    if (c == '[') return parse_class(out);
    if (c == '.') {
      ++pos_;
      out = Expr::charset(complement_charset({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
      return Status::ok();
    }
    if (c == '^') return err("'^' is only supported at the start");
    if (c == '$') return err("'$' is only supported at the end");
    if (c == '*' || c == '+' || c == '?') return err("nothing to repeat");
    uint32_t cp = 0;
    if (c == '\\') {
      ++pos_;
      CharSet cls;
      bool is_class = false;
      DI_TRY(read_escape(cp, cls, is_class, /*in_class=*/false));
      if (is_class) {
        out = Expr::charset(std::move(cls));
        return Status::ok();
      }
    } else {
      DI_TRY(read_utf8(cp));
    }
    std::string bytes;
    append_utf8(bytes, cp);
    out = Expr::literal(std::move(bytes));
    return Status::ok();
  }

  std::string_view s_;
  size_t pos_ = 0;
};

std::string json_escape_cp(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      return buf;
    }
  }
}

bool needs_json_escape(uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\'; }

}  // namespace

Result<Expr> regex_to_expr(std::string_view pattern) { return RegexParser(pattern).run(); }

Result<Grammar> regex_to_grammar(std::string_view pattern) {
  DI_ASSIGN_OR_RETURN(Expr e, regex_to_expr(pattern));
  Grammar g;
  int32_t root = g.add_rule("root").value();
  g.set_body(root, std::move(e));
  g.set_root(root);
  DI_TRY(g.validate());
  return g;
}

Expr escape_for_json_string(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral: {
      std::string out;
      for (char ch : e.text) {
        auto c = static_cast<unsigned char>(ch);
        if (needs_json_escape(c)) {
          out += json_escape_cp(c);
        } else {
          out += ch;
        }
      }
      return Expr::literal(std::move(out));
    }
    case Expr::Kind::kCharSet: {
      CharSet safe;
      std::vector<Expr> alts;
      for (const CodePointRange& r : e.chars) {
        for (uint32_t cp = r.lo; cp <= r.hi && cp < 0x5D; ++cp) {
          if (needs_json_escape(cp)) alts.push_back(Expr::literal(json_escape_cp(cp)));
        }
        // Keep the range minus the characters that need escapes.
        static constexpr CodePointRange kPlain[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodePoint}};
        for (const CodePointRange& p : kPlain) {
          uint32_t lo = std::max(r.lo, p.lo), hi = std::min(r.hi, p.hi);
          if (lo <= hi) safe.push_back({lo, hi});
        }
      }
      if (!safe.empty()) alts.insert(alts.begin(), Expr::charset(std::move(safe)));
      return Expr::choice(std::move(alts));
    }
    case Expr::Kind::kEmpty:
    case Expr::Kind::kRuleRef:
    case Expr::Kind::kToken:
      return e;
    case Expr::Kind::kSequence:
    case Expr::Kind::kChoice:
    case Expr::Kind::kRepeat: {
      Expr out = e;
      for (Expr& c : out.children) c = escape_for_json_string(c);
      return out;
    }
  }
  return e;
}

}  // namespace deepinfer::grammar
