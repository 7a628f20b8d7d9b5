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
#include <deque>
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
  int32_t num_cached_states = 0;   // states that can be a stack top between bytes
  int32_t num_classified_states = 0;  // one per class of equivalent states (state_classes.h)
  int64_t num_uncertain = 0;       // summed over cached states
  int64_t max_uncertain = 0;       // largest per state
  int64_t cache_bytes = 0;
  double build_ms = 0;             // grammar -> automata
  double classify_ms = 0;          // token classification
  int64_t classify_steps = 0;      // vocabulary-trie nodes walked by the classification, all states
};

class CompiledGrammar {
 public:
  const ByteMachine& machine() const { return machine_; }
  const TokenizerInfo& tokenizer() const { return *tokenizer_; }
  const StateTokenCache& cache(int32_t state) const {
    return caches_[static_cast<size_t>(cache_of_[static_cast<size_t>(state)])];
  }
  const std::string& ebnf() const { return ebnf_; }
  const CompileStats& stats() const { return stats_; }

 private:
  friend class GrammarCompiler;
  CompiledGrammar() = default;
  ByteMachine machine_;
  std::shared_ptr<const TokenizerInfo> tokenizer_;
  std::vector<StateTokenCache> caches_;  // [1 + classified states]; [0] empty (states never on top)
  std::vector<int32_t> cache_of_;        // [num_states]: index into caches_
  std::string ebnf_;
  CompileStats stats_;
};

struct CompilerOptions {
  int32_t num_threads = 2;               // classification workers
  bool context_expansion = true;         // reject tokens that fail after the rule in every context
  int32_t max_states = 1 << 18;          // automaton size limit per grammar (1 KB of transitions each)
  /// Classify one state per class of equivalent states (state_classes.h); off only to test it.
  bool share_equivalent_states = true;
  /// Token classification budget per grammar, in vocabulary-trie nodes walked over all classified
  /// states (about 10 ns a node with 2 workers; the 17 schemas of tests/data/grammar walk at most
  /// 25M at DeepSeek's 129k vocabulary). Past it, or past max_cache_bytes of token caches, the
  /// compile fails with kInvalidArgument, so a pathological pattern (`.*a.{12}`: 100k states, each
  /// its own class) costs about 2 s and a bounded amount of memory, not minutes and gigabytes.
  int64_t max_classify_steps = int64_t{256} << 20;
  int64_t max_cache_bytes = int64_t{256} << 20;
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
  /// Compiles answered from the cache: a compiled grammar, or a remembered build failure.
  int64_t cache_hits() const;

 private:
  std::shared_ptr<const TokenizerInfo> tokenizer_;
  CompilerOptions options_;
  mutable std::mutex mu_;
  /// Builds the automata and the token caches (no cache lookup).
  Result<std::shared_ptr<const CompiledGrammar>> build(const Grammar& g, std::string ebnf) const;

  static constexpr size_t kFailedKept = 16;
  std::map<std::string, std::pair<std::shared_ptr<const CompiledGrammar>, uint64_t>> cache_;  // -> (grammar, last use)
  std::deque<std::pair<std::string, Status>> failed_;  // the last kFailedKept keys that failed to build
  uint64_t clock_ = 0;
  int64_t hits_ = 0;
};

}  // namespace deepinfer::grammar
