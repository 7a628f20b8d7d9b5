// ByteMachine: a Grammar lowered to one deterministic byte automaton per rule (internal to
// di_grammar). Each rule's body (a regular expression over code points and rule references) is
// built into a Thompson NFA over bytes (code point classes become UTF-8 byte-range sequences) and
// determinised with rule references as ordinary symbols. The states of all rules share one id
// space. Together with a stack of return states this is a pushdown automaton: a reference edge
// (rule R, return state t) pushes t and enters R's start state; a final state pops.
//
// Built once per grammar by the compiler; immutable afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "grammar/grammar.h"
#include "grammar/tokenizer_info.h"

namespace deepinfer::grammar {

inline constexpr int64_t kInfDist = INT64_MAX / 4;

struct RuleRefEdge {
  int32_t rule = -1;
  int32_t return_state = -1;
};

struct TokenEdge {
  int32_t token = -1;  // special token id (Expr::kToken resolved against the tokenizer)
  int32_t to = -1;
};

struct ByteMachine {
  int32_t num_states = 0;
  std::vector<int32_t> next;        // [num_states * 256]: byte transition or -1
  std::vector<int32_t> state_rule;  // [num_states]
  std::vector<uint8_t> is_final;    // [num_states]
  std::vector<uint8_t> has_bytes;   // [num_states]: any byte or special-token transition
  std::vector<std::vector<TokenEdge>> token_edges;  // [num_states]: special-token transitions
  std::vector<int32_t> special_ids;  // sorted: every special token id some state reads
  std::vector<std::vector<RuleRefEdge>> refs;  // [num_states]
  std::vector<int64_t> dist;        // [num_states]: fewest bytes from here to this rule's end
  std::vector<uint8_t> needs_cache;  // [num_states]: can be a stack top between bytes
  std::vector<int32_t> rule_start;  // [num_rules]
  std::vector<std::vector<int32_t>> follow;  // [num_rules]: return states of edges referencing it
  std::vector<std::string> rule_names;
  int32_t root_rule = -1;

  int32_t step(int32_t state, uint8_t byte) const { return next[static_cast<size_t>(state) * 256 + byte]; }
};

/// Fails on left recursion (the pushdown automaton would push forever without reading) and when
/// the automata exceed `max_states` states in total. A special-token terminal (Expr::kToken)
/// becomes a token edge when `tokenizer` has an added token of that content, else (and when
/// `tokenizer` is null) its content is matched as a literal.
Result<ByteMachine> build_byte_machine(const Grammar& g, int32_t max_states = 1 << 19,
                                       const TokenizerInfo* tokenizer = nullptr);

}  // namespace deepinfer::grammar
