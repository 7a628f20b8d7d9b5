// Grammar: the intermediate representation every front end (EBNF, regex, JSON Schema) produces and
// the compiler (compiler.h) consumes. A grammar is a list of named rules; each rule's body is a
// regular expression over code points and references to rules (so one rule = one finite automaton
// over bytes and rule references, see fsm.h). Terminals are Unicode code points, matched as UTF-8.
// A Grammar is a plain value: copyable, no hidden state, not thread-safe to mutate.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace deepinfer::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
/// {m,n} with n unbounded.
inline constexpr int32_t kUnbounded = -1;
/// Largest repetition bound accepted by the front ends (the automaton unrolls repetitions).
inline constexpr int32_t kMaxRepeat = 10000;

/// Sorted, disjoint, non-adjacent inclusive code point ranges.
struct CodePointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;
  bool operator==(const CodePointRange&) const = default;
};
using CharSet = std::vector<CodePointRange>;

/// Normalises (sorts, merges) a list of ranges.
CharSet normalize_charset(CharSet ranges);
/// The complement over [0, kMaxCodePoint] (surrogates excluded; they have no UTF-8 form).
CharSet complement_charset(const CharSet& set);
bool charset_contains(const CharSet& set, uint32_t cp);

struct Expr {
  enum class Kind : uint8_t {
    kEmpty,     // matches ""
    kLiteral,   // `text`: UTF-8 bytes matched exactly
    kCharSet,   // one code point from `chars`
    kRuleRef,   // rule `rule_idx`
    kSequence,  // children in order
    kChoice,    // one of children
    kRepeat,    // children[0] repeated [min_repeat, max_repeat] times (kUnbounded = no max)
    kToken,     // the tokenizer's added (special) token whose content is `text`, matched by id,
                // never by bytes; EBNF `<"...">`. When the tokenizer has no such added token the
                // compiler matches `text` as a literal instead (the token is spelled as text).
  };
  Kind kind = Kind::kEmpty;
  std::string text;
  CharSet chars;
  int32_t rule_idx = -1;
  int32_t min_repeat = 0;
  int32_t max_repeat = 0;
  std::vector<Expr> children;

  static Expr empty() { return {}; }
  static Expr literal(std::string bytes);
  static Expr charset(CharSet set);
  static Expr rule_ref(int32_t idx);
  static Expr sequence(std::vector<Expr> items);
  static Expr choice(std::vector<Expr> items);
  static Expr repeat(Expr item, int32_t min, int32_t max);
  static Expr token(std::string content);
};

struct Rule {
  std::string name;
  Expr body;
};

class Grammar {
 public:
  Grammar() = default;

  /// Adds a rule with an empty body (fill it with set_body) and returns its index; fails if the
  /// name is taken.
  Result<int32_t> add_rule(std::string name);
  void set_body(int32_t rule_idx, Expr body) { rules_[static_cast<size_t>(rule_idx)].body = std::move(body); }
  /// -1 when absent.
  int32_t find_rule(std::string_view name) const;

  void set_root(int32_t rule_idx) { root_ = rule_idx; }
  int32_t root() const { return root_; }
  const std::vector<Rule>& rules() const { return rules_; }
  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }

  /// Checks: a root exists, every reference is in range, repetition bounds are sane.
  Status validate() const;

  /// The grammar in the EBNF dialect ebnf_parser.h reads (root first); parse(print(g)) == g up to
  /// rule order. This text is also the compiler's cache key.
  std::string to_ebnf() const;

 private:
  std::vector<Rule> rules_;
  int32_t root_ = -1;
};

/// Prints one expression in EBNF syntax (rule references by name from `g`).
std::string expr_to_ebnf(const Expr& e, const Grammar& g);
/// Appends the EBNF string-literal escape of one code point / byte string.
void append_escaped_literal(std::string& out, std::string_view utf8);

/// Appends the UTF-8 encoding of `cp` (caller guarantees a valid scalar value).
void append_utf8(std::string& out, uint32_t cp);

}  // namespace deepinfer::grammar
