#include "grammar/pda.h"

#include <algorithm>

namespace deepinfer::grammar {
namespace {

inline uint64_t hash_key(int32_t state, int32_t parent) {
  uint64_t k = (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) | static_cast<uint32_t>(parent);
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

inline bool contains(const std::vector<Handle>& v, const Handle& h) {
  for (const Handle& x : v) {
    if (x == h) return true;
  }
  return false;
}

}  // namespace

NodePool::NodePool() : slots_(1024, -1) {}

void NodePool::clear() {
  nodes_.clear();
  std::fill(slots_.begin(), slots_.end(), -1);
}

void NodePool::grow() {
  slots_.assign(slots_.size() * 2, -1);
  size_t mask = slots_.size() - 1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    size_t p = hash_key(nodes_[i].state, nodes_[i].parent) & mask;
    while (slots_[p] >= 0) p = (p + 1) & mask;
    slots_[p] = static_cast<int32_t>(i);
  }
}

int32_t NodePool::intern(int32_t state, int32_t parent) {
  if ((nodes_.size() + 1) * 2 > slots_.size()) grow();
  size_t mask = slots_.size() - 1;
  size_t p = hash_key(state, parent) & mask;
  while (slots_[p] >= 0) {
    const Node& n = nodes_[static_cast<size_t>(slots_[p])];
    if (n.state == state && n.parent == parent) return slots_[p];
    p = (p + 1) & mask;
  }
  slots_[p] = static_cast<int32_t>(nodes_.size());
  nodes_.push_back({state, parent});
  return slots_[p];
}

uint32_t Pda::closure(std::span<const Handle> in, std::vector<Handle>& out) {
  out.clear();
  // Fast path: one handle in a state that neither references rules nor ends its rule.
  if (in.size() == 1) {
    auto s = static_cast<size_t>(in[0].state);
    if (m_.refs[s].empty() && !m_.is_final[s]) {
      if (m_.has_bytes[s]) out.push_back(in[0]);
      return 0;
    }
  }
  uint32_t flags = 0;
  work_.assign(in.begin(), in.end());
  seen_.clear();
  for (const Handle& h : in) {
    if (!contains(seen_, h)) seen_.push_back(h);
  }
  auto visit = [&](const Handle& h) {
    if (!contains(seen_, h)) {
      seen_.push_back(h);
      work_.push_back(h);
    }
  };
  while (!work_.empty()) {
    Handle h = work_.back();
    work_.pop_back();
    auto s = static_cast<size_t>(h.state);
    if (m_.has_bytes[s] && !contains(out, h)) out.push_back(h);
    for (const RuleRefEdge& e : m_.refs[s]) {
      int32_t parent = pool_.intern(e.return_state, h.parent);
      visit(Handle{m_.rule_start[static_cast<size_t>(e.rule)], parent, h.level});
    }
    if (!m_.is_final[s]) continue;
    if (h.parent >= 0) {
      const NodePool::Node& n = pool_.node(h.parent);
      visit(Handle{n.state, n.parent, h.level});
    } else {
      if (h.level == 0) flags |= kComplete;
      // Context expansion: continue in every place the finished rule is referenced from. Level 1
      // pops re-expand (the set of (state, bottom, 1) handles is finite, `seen_` ends the walk), so
      // the union covers every real stack: a token dead here is dead in every context.
      if (expand_levels_ > 0) {
        for (int32_t f : m_.follow[static_cast<size_t>(m_.state_rule[s])]) visit(Handle{f, -1, 1});
      }
    }
  }
  return flags;
}

void Pda::step(std::span<const Handle> closed, uint8_t byte, std::vector<Handle>& out) const {
  out.clear();
  for (const Handle& h : closed) {
    int32_t t = m_.step(h.state, byte);
    if (t < 0) continue;
    Handle n{t, h.parent, h.level};
    if (!contains(out, n)) out.push_back(n);
  }
}

void Pda::step_token(std::span<const Handle> closed, int32_t token_id, std::vector<Handle>& out) const {
  out.clear();
  for (const Handle& h : closed) {
    for (const TokenEdge& e : m_.token_edges[static_cast<size_t>(h.state)]) {
      if (e.token != token_id) continue;
      Handle n{e.to, h.parent, h.level};
      if (!contains(out, n)) out.push_back(n);
    }
  }
}

bool Pda::advance(std::vector<Handle>& set, std::string_view bytes) {
  for (char c : bytes) {
    closure(set, tmp_);
    step(tmp_, static_cast<uint8_t>(c), set);
    if (set.empty()) return false;
  }
  return true;
}

}  // namespace deepinfer::grammar
