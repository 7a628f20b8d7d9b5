// Grammar -> CompiledGrammar, bound to one tokenizer (xgrammar's Grammar / GrammarCompiler /
// CompiledGrammar split).
//
// A CompiledGrammar is immutable and shared (std::shared_ptr<const>) by every Matcher of every
// request using the same grammar. It holds the ByteMachine (per-rule byte automata, fsm.h) and,
// for every automaton state that can be on top of the stack between two tokens, the classification
// of the whole vocabulary computed without knowing the stack below (XGrammar's adaptive token
// mask cache):
//   accepted   - the token is consumed inside the state's rule: valid whatever the stack;
//   rejected   - invalid in every context (also after the rule ends, continuing in every place
//                the rule is referenced from, transitively: context expansion, pda.h);
//   uncertain  - depends on the stack; checked at run time by the Matcher.
// Accepted sets are stored as a bitset when large, else as a sorted id list; uncertain ids are
// kept in trie (lexicographic) order so the run-time check shares work between common prefixes.
//
// GrammarCompiler caches results by (tokenizer fingerprint, canonical EBNF text). It is
// thread-safe; compile() may be called concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "grammar/fsm.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_converter.h"
#include "grammar/tokenizer_info.h"

namespace deepinfer::grammar {

struct StateTokenCache {
  std::vector<uint32_t> accepted_bitset;  // [bitmask_words] or empty (then accepted_ids is used)
  std::vector<int32_t> accepted_ids;      // sorted
  std::vector<int32_t> uncertain_ids;     // trie order
  int32_t num_accepted = 0;
};

struct CompileStats {
  int32_t num_rules = 0;
  int32_t num_states = 0;
  int32_t num_cached_states = 0;
  int64_t num_uncertain = 0;       // summed over cached states
  int64_t max_uncertain = 0;       // largest per state
  int64_t cache_bytes = 0;
  double build_ms = 0;             // grammar -> automata
  double classify_ms = 0;          // token classification
};

class CompiledGrammar {
 public:
  const ByteMachine& machine() const { return machine_; }
  const TokenizerInfo& tokenizer() const { return *tokenizer_; }
  const StateTokenCache& cache(int32_t state) const { return caches_[static_cast<size_t>(state)]; }
  const std::string& ebnf() const { return ebnf_; }
  const CompileStats& stats() const { return stats_; }

 private:
  friend class GrammarCompiler;
  CompiledGrammar() = default;
  ByteMachine machine_;
  std::shared_ptr<const TokenizerInfo> tokenizer_;
  std::vector<StateTokenCache> caches_;  // [num_states]; empty for states never on top
  std::string ebnf_;
  CompileStats stats_;
};

struct CompilerOptions {
  int32_t num_threads = 2;               // classification workers
  bool context_expansion = true;         // reject tokens that fail after the rule in every context
  int32_t max_states = 1 << 19;          // automaton size limit per grammar
  size_t max_cache_entries = 256;        // compiled grammars kept (least recently used evicted)
};

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenizerInfo> tokenizer, CompilerOptions options = {});

  Result<std::shared_ptr<const CompiledGrammar>> compile(const Grammar& g);
  Result<std::shared_ptr<const CompiledGrammar>> compile_ebnf(std::string_view ebnf, std::string_view root = "root");
  Result<std::shared_ptr<const CompiledGrammar>> compile_regex(std::string_view pattern);
  Result<std::shared_ptr<const CompiledGrammar>> compile_json_schema(std::string_view schema,
                                                                     const JsonSchemaOptions& opts = {});
  /// Any JSON value (response_format: json_object uses an object root: `object_only`).
  Result<std::shared_ptr<const CompiledGrammar>> compile_builtin_json(bool object_only, const JsonSchemaOptions& opts = {});

  const TokenizerInfo& tokenizer() const { return *tokenizer_; }
  size_t cache_size() const;
  int64_t cache_hits() const;

 private:
  std::shared_ptr<const TokenizerInfo> tokenizer_;
  CompilerOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::pair<std::shared_ptr<const CompiledGrammar>, uint64_t>> cache_;  // -> (grammar, last use)
  uint64_t clock_ = 0;
  int64_t hits_ = 0;
};

}  // namespace deepinfer::grammar
