// EBNF front end: the W3C-style EBNF that XGrammar accepts and llama.cpp's GBNF dialect.
//
//   # comment to end of line
//   root   ::= "{" ws pair ("," ws pair)* "}"     (rule ::= body; a rule ends where the next
//   pair   ::= name ws ":" ws value                 `name ::=` begins)
//   name   ::= [a-zA-Z_] [a-zA-Z0-9_-]{0,31}
//   value  ::= "\"" [^"\\\x00-\x1F]* "\"" | number | "true" | 'false'
//   number ::= "-"? ([0-9] | [1-9] [0-9]+) ("." [0-9]+)?
//   any    ::= .                                  (any code point)
//
// Terminals are code points: "..." or '...' string literals and [...] classes (ranges `a-z`,
// negation `[^...]`). Escapes in both: \n \r \t \f \v \0 \\ \" \' \] \[ \- \^ \xHH \uHHHH
// \UHHHHHHHH (a code point, written as UTF-8). Postfix operators: ? * + {m} {m,} {m,n}; grouping
// with (...); alternation with |. Errors are kInvalidArgument with "line:column: message".
#pragma once

#include <string_view>

#include "core/result.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

/// Parses `text`; the rule named `root_rule` is the start symbol.
Result<Grammar> parse_ebnf(std::string_view text, std::string_view root_rule = "root");

}  // namespace deepinfer::grammar
