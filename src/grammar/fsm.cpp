#include "grammar/fsm.h"

#include <algorithm>
#include <map>

namespace deepinfer::grammar {
namespace {

// The subset construction's budget in NFA edge visits, per state of max_states (2^18 states: 67M
// visits, about half a second). The 17 schemas of tests/data/grammar use at most 0.15M, a
// maxLength 10000 string 2.4M; `.*a.{12}` 19M.
constexpr int64_t kBuildWorkPerState = 256;

struct ByteSeq {
  int n = 0;
  uint8_t lo[4] = {0, 0, 0, 0};
  uint8_t hi[4] = {0, 0, 0, 0};
};

int encode(uint32_t cp, uint8_t* b) {
  std::string s;
  append_utf8(s, cp);
  for (size_t i = 0; i < s.size(); ++i) b[i] = static_cast<uint8_t>(s[i]);
  return static_cast<int>(s.size());
}

// Splits [lo, hi] into sequences of byte ranges (the utf8-ranges algorithm).
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) utf8_sequences(lo, 0xD7FF, out);
    if (hi > 0xDFFF) utf8_sequences(0xE000, hi, out);
    return;
  }
  static constexpr uint32_t kMaxOfLen[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t m : kMaxOfLen) {
    if (lo <= m && hi > m) {
      utf8_sequences(lo, m, out);
      utf8_sequences(m + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    ByteSeq s;
    s.n = 1;
    s.lo[0] = static_cast<uint8_t>(lo);
    s.hi[0] = static_cast<uint8_t>(hi);
    out.push_back(s);
    return;
  }
  for (int i = 1; i < 4; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  ByteSeq s;
  s.n = encode(lo, s.lo);
  encode(hi, s.hi);
  out.push_back(s);
}

struct NfaEdge {
  enum : uint8_t { kEps, kBytes, kRef, kTok } kind = kEps;
  uint8_t lo = 0;
  uint8_t hi = 0;
  int32_t ref = -1;
  int32_t to = -1;
};

class Nfa {
 public:
  /// `limit`: states past which build() stops growing the automaton and over() turns true (a
  /// repetition nested in repetitions multiplies its copies: `(("a"{2}){2}){2}...`).
  Nfa(const TokenizerInfo* tok, size_t limit) : tok_(tok), limit_(limit) {}
  bool over() const { return over_; }
  int32_t new_state() {
    out_.emplace_back();
    return static_cast<int32_t>(out_.size() - 1);
  }
  void eps(int32_t a, int32_t b) { out_[static_cast<size_t>(a)].push_back({NfaEdge::kEps, 0, 0, -1, b}); }
  void bytes(int32_t a, uint8_t lo, uint8_t hi, int32_t b) {
    out_[static_cast<size_t>(a)].push_back({NfaEdge::kBytes, lo, hi, -1, b});
  }
  void ref(int32_t a, int32_t rule, int32_t b) { out_[static_cast<size_t>(a)].push_back({NfaEdge::kRef, 0, 0, rule, b}); }
  void tok(int32_t a, int32_t id, int32_t b) { out_[static_cast<size_t>(a)].push_back({NfaEdge::kTok, 0, 0, id, b}); }
  const std::vector<NfaEdge>& edges(int32_t s) const { return out_[static_cast<size_t>(s)]; }
  size_t size() const { return out_.size(); }

  // Thompson construction: returns the end state of `e` entered at `s`.
  int32_t build(const Expr& e, int32_t s) {
    if (out_.size() > limit_) {
      over_ = true;
      return s;
    }
    switch (e.kind) {
      case Expr::Kind::kEmpty: {
        int32_t t = new_state();
        eps(s, t);
        return t;
      }
      case Expr::Kind::kToken: {
        int32_t id = tok_ ? tok_->special_token_id(e.text) : -1;
        if (id < 0) return build(Expr::literal(e.text), s);  // no such added token: its spelling
        int32_t t = new_state();
        tok(s, id, t);
        return t;
      }
      case Expr::Kind::kLiteral: {
        int32_t cur = s;
        for (char c : e.text) {
          int32_t t = new_state();
          auto b = static_cast<uint8_t>(c);
          bytes(cur, b, b, t);
          cur = t;
        }
        return cur;
      }
      case Expr::Kind::kCharSet: {
        int32_t t = new_state();
        std::vector<ByteSeq> seqs;
        for (const CodePointRange& r : e.chars) utf8_sequences(r.lo, r.hi, seqs);
        for (const ByteSeq& q : seqs) {
          int32_t cur = s;
          for (int i = 0; i < q.n; ++i) {
            int32_t nx = i + 1 == q.n ? t : new_state();
            bytes(cur, q.lo[i], q.hi[i], nx);
            cur = nx;
          }
        }
        return t;
      }
      case Expr::Kind::kRuleRef: {
        int32_t t = new_state();
        ref(s, e.rule_idx, t);
        return t;
      }
      case Expr::Kind::kSequence: {
        int32_t cur = s;
        for (const Expr& c : e.children) cur = build(c, cur);
        return cur;
      }
      case Expr::Kind::kChoice: {
        int32_t t = new_state();
        for (const Expr& c : e.children) {
          int32_t a = new_state();
          eps(s, a);
          eps(build(c, a), t);
        }
        return t;
      }
      case Expr::Kind::kRepeat: {
        const Expr& c = e.children[0];
        int32_t cur = s;
        if (e.max_repeat == kUnbounded) {
          // c{m,}: m - 1 copies, then one that loops back to its own start, left at its end (c+)
          // or at its start (c*). One copy for c+, not two, so stacked `x+++...` stays linear.
          for (int32_t i = 1; i < e.min_repeat; ++i) cur = build(c, cur);
          int32_t a = new_state();
          eps(cur, a);
          int32_t t = build(c, a);
          eps(t, a);
          return e.min_repeat > 0 ? t : a;
        }
        for (int32_t i = 0; i < e.min_repeat; ++i) cur = build(c, cur);
        int32_t end = new_state();
        eps(cur, end);
        for (int32_t i = e.min_repeat; i < e.max_repeat; ++i) {
          cur = build(c, cur);
          eps(cur, end);
        }
        return end;
      }
    }
    return s;
  }

  void closure(std::vector<int32_t>& set, std::vector<uint8_t>& mark) const {
    std::vector<int32_t> work(set);
    for (int32_t s : set) mark[static_cast<size_t>(s)] = 1;
    while (!work.empty()) {
      int32_t s = work.back();
      work.pop_back();
      for (const NfaEdge& ed : edges(s)) {
        if (ed.kind == NfaEdge::kEps && !mark[static_cast<size_t>(ed.to)]) {
          mark[static_cast<size_t>(ed.to)] = 1;
          set.push_back(ed.to);
          work.push_back(ed.to);
        }
      }
    }
    for (int32_t s : set) mark[static_cast<size_t>(s)] = 0;
    std::sort(set.begin(), set.end());
  }

 private:
  const TokenizerInfo* tok_;
  size_t limit_;
  bool over_ = false;
  std::vector<std::vector<NfaEdge>> out_;
};

struct RuleDfa {
  std::vector<std::vector<std::pair<int32_t, int32_t>>> byte_ranges;  // per state: (lo<<8|hi, to)
  std::vector<std::vector<RuleRefEdge>> refs;                         // return_state is local
  std::vector<std::vector<TokenEdge>> toks;                           // `to` is local
  std::vector<uint8_t> is_final;
};

// `budget`: DFA states left; `work`: edge visits left (the subset construction's cost per state
// grows with the NFA states in its set, so a budget in states alone still allows minutes).
Result<RuleDfa> determinize(const Nfa& nfa, int32_t start, int32_t accept, const std::string& rule,
                            int32_t budget, int64_t& work) {
  RuleDfa dfa;
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> sets;
  std::vector<uint8_t> mark(nfa.size(), 0);
  auto intern = [&](std::vector<int32_t> set) -> int32_t {
    nfa.closure(set, mark);
    auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    auto id = static_cast<int32_t>(sets.size());
    ids.emplace(set, id);
    sets.push_back(std::move(set));
    return id;
  };
  intern({start});
  for (size_t d = 0; d < sets.size(); ++d) {
    if (static_cast<int32_t>(sets.size()) > budget) {
      return Status::resource_exhausted("rule '" + rule + "': automaton exceeds the state budget (" +
                                        std::to_string(budget) + " states)");
    }
    std::vector<int32_t> cur = sets[d];
    std::vector<int> bounds;
    std::map<int32_t, std::vector<int32_t>> by_ref;
    std::map<int32_t, std::vector<int32_t>> by_tok;
    bool fin = false;
    for (int32_t s : cur) {
      if (s == accept) fin = true;
      for (const NfaEdge& e : nfa.edges(s)) {
        if (e.kind == NfaEdge::kBytes) {
          bounds.push_back(e.lo);
          bounds.push_back(e.hi + 1);
        } else if (e.kind == NfaEdge::kRef) {
          by_ref[e.ref].push_back(e.to);
        } else if (e.kind == NfaEdge::kTok) {
          by_tok[e.ref].push_back(e.to);
        }
      }
    }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    size_t cur_edges = 0;
    for (int32_t s : cur) cur_edges += nfa.edges(s).size();
    work -= static_cast<int64_t>(cur_edges * bounds.size() + cur.size());
    if (work < 0) {
      return Status::resource_exhausted("rule '" + rule + "': the automaton's construction exceeds its budget (" +
                                        std::to_string(sets.size()) + " states so far, each a set of up to " +
                                        std::to_string(cur.size()) + " NFA states)");
    }
    std::vector<std::pair<int32_t, int32_t>> ranges;
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      int lo = bounds[i], hi = bounds[i + 1] - 1;
      std::vector<int32_t> targets;
      for (int32_t s : cur) {
        for (const NfaEdge& e : nfa.edges(s)) {
          if (e.kind == NfaEdge::kBytes && e.lo <= lo && e.hi >= lo) targets.push_back(e.to);
        }
      }
      if (targets.empty()) continue;
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      int32_t to = intern(std::move(targets));
      ranges.push_back({(lo << 8) | hi, to});
    }
    std::vector<RuleRefEdge> refs;
    for (auto& [r, targets] : by_ref) {
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      refs.push_back({r, intern(std::move(targets))});
    }
    std::vector<TokenEdge> toks;
    for (auto& [id, targets] : by_tok) {
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      toks.push_back({id, intern(std::move(targets))});
    }
    dfa.byte_ranges.push_back(std::move(ranges));
    dfa.refs.push_back(std::move(refs));
    dfa.toks.push_back(std::move(toks));
    dfa.is_final.push_back(fin ? 1 : 0);
  }
  return dfa;
}

// Rules R -> R' where R' can be entered from R's start without reading a byte.
Status check_left_recursion(const ByteMachine& m, const std::vector<uint8_t>& nullable_state) {
  auto num_rules = static_cast<int32_t>(m.rule_start.size());
  std::vector<std::vector<int32_t>> left(static_cast<size_t>(num_rules));
  for (int32_t r = 0; r < num_rules; ++r) {
    std::vector<int32_t> work{m.rule_start[static_cast<size_t>(r)]};
    std::vector<uint8_t> seen(static_cast<size_t>(m.num_states), 0);
    seen[static_cast<size_t>(work[0])] = 1;
    while (!work.empty()) {
      int32_t s = work.back();
      work.pop_back();
      for (const RuleRefEdge& e : m.refs[static_cast<size_t>(s)]) {
        left[static_cast<size_t>(r)].push_back(e.rule);
        if (nullable_state[static_cast<size_t>(m.rule_start[static_cast<size_t>(e.rule)])] &&
            !seen[static_cast<size_t>(e.return_state)]) {
          seen[static_cast<size_t>(e.return_state)] = 1;
          work.push_back(e.return_state);
        }
      }
    }
  }
  // Cycle detection (colours: 0 new, 1 on stack, 2 done).
  std::vector<uint8_t> colour(static_cast<size_t>(num_rules), 0);
  for (int32_t r0 = 0; r0 < num_rules; ++r0) {
    if (colour[static_cast<size_t>(r0)]) continue;
    std::vector<std::pair<int32_t, size_t>> st{{r0, 0}};
    colour[static_cast<size_t>(r0)] = 1;
    while (!st.empty()) {
      auto& [r, i] = st.back();
      if (i < left[static_cast<size_t>(r)].size()) {
        int32_t nx = left[static_cast<size_t>(r)][i++];
        if (colour[static_cast<size_t>(nx)] == 1) {
          return Status::invalid_argument("rule '" + m.rule_names[static_cast<size_t>(nx)] +
                                          "' is left-recursive (it can reach itself without reading "
                                          "input); rewrite it with repetition");
        }
        if (colour[static_cast<size_t>(nx)] == 0) {
          colour[static_cast<size_t>(nx)] = 1;
          st.push_back({nx, 0});
        }
      } else {
        colour[static_cast<size_t>(r)] = 2;
        st.pop_back();
      }
    }
  }
  return Status::ok();
}

}  // namespace

Result<ByteMachine> build_byte_machine(const Grammar& g, int32_t max_states, const TokenizerInfo* tokenizer) {
  DI_TRY(g.validate());
  ByteMachine m;
  m.root_rule = g.root();
  std::vector<RuleDfa> dfas;
  int32_t total = 0;
  int64_t work = kBuildWorkPerState * static_cast<int64_t>(max_states);
  for (const Rule& r : g.rules()) {
    Nfa nfa(tokenizer, 4 * static_cast<size_t>(max_states));
    int32_t s = nfa.new_state();
    int32_t t = nfa.build(r.body, s);
    if (nfa.over()) {
      return Status::resource_exhausted("rule '" + r.name + "' is too large");
    }
    DI_ASSIGN_OR_RETURN(RuleDfa dfa, determinize(nfa, s, t, r.name, max_states - total, work));
    m.rule_start.push_back(total);
    m.rule_names.push_back(r.name);
    total += static_cast<int32_t>(dfa.is_final.size());
    dfas.push_back(std::move(dfa));
  }
  m.num_states = total;
  m.next.assign(static_cast<size_t>(total) * 256, -1);
  m.state_rule.resize(static_cast<size_t>(total));
  m.is_final.resize(static_cast<size_t>(total));
  m.has_bytes.assign(static_cast<size_t>(total), 0);
  m.refs.resize(static_cast<size_t>(total));
  m.token_edges.resize(static_cast<size_t>(total));
  for (size_t r = 0; r < dfas.size(); ++r) {
    int32_t base = m.rule_start[r];
    const RuleDfa& d = dfas[r];
    for (size_t ls = 0; ls < d.is_final.size(); ++ls) {
      auto gs = static_cast<size_t>(base) + ls;
      m.state_rule[gs] = static_cast<int32_t>(r);
      m.is_final[gs] = d.is_final[ls];
      for (auto [range, to] : d.byte_ranges[ls]) {
        for (int b = range >> 8; b <= (range & 0xFF); ++b) m.next[gs * 256 + static_cast<size_t>(b)] = base + to;
      }
      for (const RuleRefEdge& e : d.refs[ls]) m.refs[gs].push_back({e.rule, base + e.return_state});
      for (const TokenEdge& e : d.toks[ls]) m.token_edges[gs].push_back({e.token, base + e.to});
    }
  }
  // Fewest bytes to each rule's end (Bellman-Ford over the pushdown structure; reverse order
  // converges fastest because subset construction numbers states breadth-first).
  m.dist.assign(static_cast<size_t>(total), kInfDist);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t s = total - 1; s >= 0; --s) {
      auto su = static_cast<size_t>(s);
      int64_t d = m.is_final[su] ? 0 : kInfDist;
      const int32_t* nx = &m.next[su * 256];
      int32_t last = -1;
      for (int b = 0; b < 256; ++b) {
        if (nx[b] >= 0 && nx[b] != last) {
          last = nx[b];
          d = std::min(d, 1 + m.dist[static_cast<size_t>(nx[b])]);
        }
      }
      for (const TokenEdge& e : m.token_edges[su]) d = std::min(d, 1 + m.dist[static_cast<size_t>(e.to)]);
      for (const RuleRefEdge& e : m.refs[su]) {
        int64_t a = m.dist[static_cast<size_t>(m.rule_start[static_cast<size_t>(e.rule)])];
        int64_t b = m.dist[static_cast<size_t>(e.return_state)];
        if (a < kInfDist && b < kInfDist) d = std::min(d, a + b);
      }
      if (d < m.dist[su]) {
        m.dist[su] = d;
        changed = true;
      }
    }
  }
  if (m.dist[static_cast<size_t>(m.rule_start[static_cast<size_t>(m.root_rule)])] >= kInfDist) {
    return Status::invalid_argument("the grammar matches no string (root rule '" +
                                    m.rule_names[static_cast<size_t>(m.root_rule)] + "' is empty)");
  }
  // Drop edges into dead states (they could never finish), so masks never lead into a dead end.
  for (int32_t s = 0; s < total; ++s) {
    auto su = static_cast<size_t>(s);
    for (int b = 0; b < 256; ++b) {
      int32_t& t = m.next[su * 256 + static_cast<size_t>(b)];
      if (t >= 0 && m.dist[static_cast<size_t>(t)] >= kInfDist) t = -1;
      if (t >= 0) m.has_bytes[su] = 1;
    }
    auto& toks = m.token_edges[su];
    toks.erase(std::remove_if(toks.begin(), toks.end(),
                              [&](const TokenEdge& e) { return m.dist[static_cast<size_t>(e.to)] >= kInfDist; }),
               toks.end());
    if (!toks.empty()) m.has_bytes[su] = 1;
    for (const TokenEdge& e : toks) m.special_ids.push_back(e.token);
    auto& refs = m.refs[su];
    refs.erase(std::remove_if(refs.begin(), refs.end(),
                              [&](const RuleRefEdge& e) {
                                return m.dist[static_cast<size_t>(m.rule_start[static_cast<size_t>(e.rule)])] >= kInfDist ||
                                       m.dist[static_cast<size_t>(e.return_state)] >= kInfDist;
                              }),
               refs.end());
  }
  std::sort(m.special_ids.begin(), m.special_ids.end());
  m.special_ids.erase(std::unique(m.special_ids.begin(), m.special_ids.end()), m.special_ids.end());
  // Nullable states, then the left-recursion check.
  std::vector<uint8_t> nullable(static_cast<size_t>(total), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t s = total - 1; s >= 0; --s) {
      auto su = static_cast<size_t>(s);
      if (nullable[su]) continue;
      bool n = m.is_final[su] != 0;
      for (const RuleRefEdge& e : m.refs[su]) {
        n = n || (nullable[static_cast<size_t>(m.rule_start[static_cast<size_t>(e.rule)])] &&
                  nullable[static_cast<size_t>(e.return_state)]);
      }
      if (n) {
        nullable[su] = 1;
        changed = true;
      }
    }
  }
  DI_TRY(check_left_recursion(m, nullable));
  m.follow.resize(m.rule_start.size());
  m.needs_cache.assign(static_cast<size_t>(total), 0);
  m.needs_cache[static_cast<size_t>(m.rule_start[static_cast<size_t>(m.root_rule)])] = 1;
  for (int32_t s = 0; s < total; ++s) {
    auto su = static_cast<size_t>(s);
    for (int b = 0; b < 256; ++b) {
      int32_t t = m.next[su * 256 + static_cast<size_t>(b)];
      if (t >= 0) m.needs_cache[static_cast<size_t>(t)] = 1;
    }
    for (const TokenEdge& e : m.token_edges[su]) m.needs_cache[static_cast<size_t>(e.to)] = 1;
    for (const RuleRefEdge& e : m.refs[su]) {
      auto& f = m.follow[static_cast<size_t>(e.rule)];
      if (std::find(f.begin(), f.end(), e.return_state) == f.end()) f.push_back(e.return_state);
    }
  }
  return m;
}

}  // namespace deepinfer::grammar
