// Regex -> grammar: the ECMAScript-style subset JSON Schema patterns and vLLM `regex` requests
// use. Supported: literals, `.`, classes [a-z] [^...] with escapes, \d \D \w \W \s \S, \n \r \t
// \f \v \0 \xHH \uHHHH \u{H...}, escaped punctuation, groups (...) (?:...) (?<name>...),
// alternation, quantifiers ? * + {m} {m,} {m,n} (lazy `?` suffixes accepted: same language),
// `^` at the start and `$` at the end. The pattern is matched against the whole output.
// Unsupported (an error naming the construct): backreferences, lookaround, \b \B, \p{...},
// anchors elsewhere, possessive quantifiers.
#pragma once

#include <string_view>

#include "core/result.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

/// Parses a regex into an expression over code points (no rule references).
Result<Expr> regex_to_expr(std::string_view pattern);
/// A one-rule grammar ("root") matching exactly the strings the regex matches in full.
Result<Grammar> regex_to_grammar(std::string_view pattern);
/// Rewrites an expression over code points into the JSON string-content encoding of the same
/// strings: `"`, `\` and control characters become their JSON escapes.
Expr escape_for_json_string(const Expr& e);

}  // namespace deepinfer::grammar
