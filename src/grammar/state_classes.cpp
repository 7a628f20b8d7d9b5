#include "grammar/state_classes.h"

#include <algorithm>
#include <unordered_map>

namespace deepinfer::grammar {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

// A state's byte row as runs: bytes [lo, next run's lo) go to `to` (-1: no transition).
struct Run {
  int32_t lo;
  int32_t to;
};

// Assigns dense ids to keys (int sequences), exactly: a hash picks the bucket, equality decides.
class Interner {
 public:
  int32_t id(const std::vector<int32_t>& key) {
    uint64_t h = 0x84222325cbf29ce4ULL;
    for (int32_t v : key) h = mix(h, static_cast<uint32_t>(v));
    std::vector<int32_t>& bucket = buckets_[h];
    for (int32_t k : bucket) {
      if (keys_[static_cast<size_t>(k)] == key) return k;
    }
    bucket.push_back(static_cast<int32_t>(keys_.size()));
    keys_.push_back(key);
    return bucket.back();
  }
  int32_t size() const { return static_cast<int32_t>(keys_.size()); }

 private:
  std::unordered_map<uint64_t, std::vector<int32_t>> buckets_;
  std::vector<std::vector<int32_t>> keys_;
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
  std::vector<int32_t> cls(n);
  {
    Interner in;
    std::vector<int32_t> key;
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
  }
  int32_t count = *std::max_element(cls.begin(), cls.end()) + 1;
  // Round k: round k - 1's class and, per byte, the class of the target (runs of equal classes
  // merged, so rows that differ only in how their bytes are split still match).
  std::vector<int32_t> next_cls(n), key;
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
