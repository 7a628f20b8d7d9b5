// Pushdown-automaton stepping over a ByteMachine (internal to di_grammar).
//
// A parse position is a Handle: the current state (whose rule is the innermost open rule) plus a
// persistent stack of return states stored as interned nodes (state, parent) in a NodePool. Equal
// stacks are the same node id, so stacks are shared tree-wise between positions, history entries
// (rollback) and mask checks; nodes are never freed while the pool lives.
//
// A set of handles is kept "open" (before closure): closure() expands rule references (push) and
// final states (pop), keeping the handles that can read a byte; step() reads one byte.
//
// For the compile-time token classification a handle also has a `level`: 0 while it is inside the
// state being classified; a pop past the bottom of the stack continues at level 1 in every return
// state that references the finished rule (XGrammar's context expansion, here taken to its
// fixpoint: level-1 pops expand again), so level-1 handles over-approximate every real stack.
// At run time expand_levels is 0 and a pop past the bottom raises kComplete (the whole grammar
// can end here). kHorizon is reserved for a bounded expansion and is not raised by this one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/fsm.h"

namespace deepinfer::grammar {

struct Handle {
  int32_t state = -1;
  int32_t parent = -1;  // node id in the NodePool, -1 = bottom of the stack
  int32_t level = 0;
  bool operator==(const Handle&) const = default;
};

class NodePool {
 public:
  struct Node {
    int32_t state;
    int32_t parent;
  };
  NodePool();
  int32_t intern(int32_t state, int32_t parent);
  const Node& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  size_t size() const { return nodes_.size(); }
  void clear();

 private:
  void grow();
  std::vector<Node> nodes_;
  std::vector<int32_t> slots_;  // open addressing; -1 empty
};

class Pda {
 public:
  static constexpr uint32_t kComplete = 1;  // popped past the bottom at level 0
  static constexpr uint32_t kHorizon = 2;   // popped past the bottom at level expand_levels

  Pda(const ByteMachine& m, NodePool& pool, int32_t expand_levels)
      : m_(m), pool_(pool), expand_levels_(expand_levels) {}

  /// Appends to `out` (cleared first) the handles reachable from `in` without reading that can
  /// read a byte; returns kComplete / kHorizon flags.
  uint32_t closure(std::span<const Handle> in, std::vector<Handle>& out);
  /// Reads `byte` from closed handles into `out` (cleared first).
  void step(std::span<const Handle> closed, uint8_t byte, std::vector<Handle>& out) const;
  /// Reads the special token `token_id` (a token edge) from closed handles into `out`.
  void step_token(std::span<const Handle> closed, int32_t token_id, std::vector<Handle>& out) const;
  /// closure + step for every byte of `bytes`; `set` is updated in place; false (set empty) when
  /// the bytes are rejected.
  bool advance(std::vector<Handle>& set, std::string_view bytes);

  const ByteMachine& machine() const { return m_; }
  NodePool& pool() { return pool_; }

 private:
  const ByteMachine& m_;
  NodePool& pool_;
  int32_t expand_levels_;
  std::vector<Handle> work_;
  std::vector<Handle> seen_;
  std::vector<Handle> tmp_;
};

}  // namespace deepinfer::grammar
