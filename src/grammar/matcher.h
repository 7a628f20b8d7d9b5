// Matcher: the per-request grammar state (xgrammar's GrammarMatcher). Owns a node pool of
// persistent stacks; holds a shared CompiledGrammar. Not thread-safe: one matcher per request,
// used by one thread at a time (different matchers may run in parallel).
//
// Bitmask layout: bit (id % 32) of word (id / 32) is set when token `id` is allowed (the int32
// [ceil(V/32)] layout vLLM, SGLang and XGrammar apply on the GPU).
//
// Mutating methods: accept_token, accept_string, rollback, reset. fill_next_token_bitmask and
// find_jump_forward_string do not change the parse state (they may add interned stack nodes).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/pda.h"

namespace deepinfer::grammar {

class Matcher {
 public:
  /// Keeps the states of the last `max_rollback_tokens` accepted tokens for rollback().
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar, int32_t max_rollback_tokens = 16);

  /// Advances by one token; returns false (state unchanged) when the token is not allowed. A stop
  /// token is allowed exactly when the output is complete; it terminates the matcher.
  bool accept_token(int32_t token_id);
  /// Advances by raw bytes (jump-forward text, tests); one rollback step. False = unchanged.
  bool accept_string(std::string_view bytes);
  /// Writes the allowed next tokens; `bitmask` needs at least tokenizer().bitmask_words() words.
  void fill_next_token_bitmask(std::span<uint32_t> bitmask);
  /// Undoes the last `num_tokens` accept_token/accept_string calls; false when fewer are kept.
  bool rollback(int32_t num_tokens);
  /// Bytes every continuation must start with (empty when there is a choice or the output may end).
  std::string find_jump_forward_string();

  /// A stop token was accepted.
  bool is_terminated() const { return terminated_; }
  /// The output so far is a complete match (a stop token would be accepted).
  bool can_terminate();
  /// Fewest bytes that complete the output (0 when can_terminate()).
  int64_t min_completion_bytes() const;
  void reset();

  int32_t num_rollback_available() const { return static_cast<int32_t>(history_.size()); }
  const CompiledGrammar& grammar() const { return *grammar_; }
  /// Interned stack nodes (grows with distinct parse contexts seen).
  size_t num_stack_nodes() const { return pool_.size(); }

 private:
  struct Snapshot {
    std::vector<Handle> handles;
    bool terminated;
  };
  void push_history();
  void check_uncertain(const Handle& h, std::span<const int32_t> ids, std::span<uint32_t> bitmask);

  std::shared_ptr<const CompiledGrammar> grammar_;
  int32_t max_rollback_;
  NodePool pool_;
  Pda pda_;
  std::vector<Handle> handles_;  // open (pre-closure) handles
  bool terminated_ = false;
  std::deque<Snapshot> history_;
  // Scratch for the uncertain-token walk, indexed by depth.
  std::vector<std::vector<Handle>> open_;
  std::vector<std::vector<Handle>> closed_;
  std::vector<Handle> tmp_;
};

}  // namespace deepinfer::grammar
