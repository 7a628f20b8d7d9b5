#include "grammar/state_classes.h"

#include <algorithm>
#include <unordered_map>

namespace deepinfer::grammar {
namespace {


// A state's byte row as runs: bytes [lo, next run's lo) go to `to` (-1: no transition).
struct Run {
  int32_t lo;
  int32_t to;
};

struct KeyHash {
  size_t operator()(const std::vector<int32_t>& key) const {
    uint64_t h = 0x84222325cbf29ce4ULL;
    for (int32_t v : key) h = (h ^ static_cast<uint32_t>(v)) * 0x100000001b3ULL;  // FNV-1a per int
    return static_cast<size_t>(h);
  }
};

// Dense ids for keys (int sequences), in order of first appearance.
class Interner {
 public:
  int32_t id(const std::vector<int32_t>& key) {
    return ids_.try_emplace(key, static_cast<int32_t>(ids_.size())).first->second;
  }
  int32_t size() const { return static_cast<int32_t>(ids_.size()); }

 private:
  std::unordered_map<std::vector<int32_t>, int32_t, KeyHash> ids_;
};

}  // namespace

std::vector<int32_t> classification_classes(const ByteMachine& m, int32_t depth) {
  const auto n = static_cast<size_t>(m.num_states);
  std::vector<std::vector<Run>> rows(n);
  for (size_t s = 0; s < n; ++s) {
    for (int b = 0; b < 256; ++b) {
      const int32_t to = m.next[s * 256 + static_cast<size_t>(b)];
      if (rows[s].empty() || rows[s].back().to != to) rows[s].push_back({b, to});
    }
  }
  // Round 0: the attributes a walk sees without reading a byte.
  std::vector<int32_t> cls(n), key;
  int32_t count = 0;
  {
    Interner in;
    for (size_t s = 0; s < n; ++s) {
      key.assign({m.state_rule[s], m.is_final[s], m.has_bytes[s]});
      std::vector<std::pair<int32_t, int32_t>> refs;
      for (const RuleRefEdge& e : m.refs[s]) refs.emplace_back(e.rule, e.return_state);
      std::sort(refs.begin(), refs.end());
      key.push_back(static_cast<int32_t>(refs.size()));
      for (const auto& [r, t] : refs) key.insert(key.end(), {r, t});
      std::vector<std::pair<int32_t, int32_t>> toks;
      for (const TokenEdge& e : m.token_edges[s]) toks.emplace_back(e.token, e.to);
      std::sort(toks.begin(), toks.end());
      for (const auto& [tk, to] : toks) key.insert(key.end(), {tk, to});
      cls[s] = in.id(key);
    }
    count = in.size();
  }
  // Round k: round k - 1's class and, per byte, the class of the target (runs of equal classes
  // merged, so rows that differ only in how their bytes are split still match).
  std::vector<int32_t> next_cls(n);
  for (int32_t round = 0; round < depth; ++round) {
    Interner in;
    for (size_t s = 0; s < n; ++s) {
      key.assign({cls[s]});
      int32_t last = -2;
      for (const Run& r : rows[s]) {
        const int32_t c = r.to < 0 ? -1 : cls[static_cast<size_t>(r.to)];
        if (c == last) continue;
        key.insert(key.end(), {r.lo, c});
        last = c;
      }
      next_cls[s] = in.id(key);
    }
    cls.swap(next_cls);
    if (in.size() == count) break;  // no class split: the fixpoint
    count = in.size();
  }
  return cls;
}

}  // namespace deepinfer::grammar
