#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace deepinfer::grammar {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar, int32_t max_rollback_tokens)
    : grammar_(std::move(grammar)),
      max_rollback_(std::max(0, max_rollback_tokens)),
      pda_(grammar_->machine(), pool_, /*expand_levels=*/0) {
  reset();
}

void Matcher::reset() {
  const ByteMachine& m = grammar_->machine();
  handles_.assign(1, Handle{m.rule_start[static_cast<size_t>(m.root_rule)], -1, 0});
  terminated_ = false;
  history_.clear();
}

void Matcher::push_history() {
  if (max_rollback_ == 0) return;
  history_.push_back({handles_, terminated_});
  if (static_cast<int32_t>(history_.size()) > max_rollback_) history_.pop_front();
}

bool Matcher::can_terminate() {
  if (terminated_) return false;
  return (pda_.closure(handles_, tmp_) & Pda::kComplete) != 0;
}

bool Matcher::accept_token(int32_t token_id) {
  const TokenizerInfo& tok = grammar_->tokenizer();
  if (terminated_ || token_id < 0 || token_id >= tok.vocab_size()) return false;
  if (tok.is_stop(token_id)) {
    if (!can_terminate()) return false;
    push_history();
    terminated_ = true;
    return true;
  }
  const std::vector<int32_t>& specials = grammar_->machine().special_ids;
  if (std::binary_search(specials.begin(), specials.end(), token_id)) {
    // A special-token terminal: matched by id, never by its bytes.
    std::vector<Handle> closed, next;
    pda_.closure(handles_, closed);
    pda_.step_token(closed, token_id, next);
    if (next.empty()) return false;
    push_history();
    handles_ = std::move(next);
    return true;
  }
  if (!tok.is_matchable(token_id)) return false;
  return accept_string(tok.token_bytes(token_id));
}

bool Matcher::accept_string(std::string_view bytes) {
  if (terminated_) return false;
  std::vector<Handle> next = handles_;
  if (!pda_.advance(next, bytes)) return false;
  push_history();
  handles_ = std::move(next);
  return true;
}

bool Matcher::rollback(int32_t num_tokens) {
  if (num_tokens < 0 || num_tokens > static_cast<int32_t>(history_.size())) return false;
  for (int32_t i = 0; i < num_tokens; ++i) {
    Snapshot& s = history_.back();
    handles_ = std::move(s.handles);
    terminated_ = s.terminated;
    history_.pop_back();
  }
  return true;
}

int64_t Matcher::min_completion_bytes() const {
  if (terminated_) return 0;
  const ByteMachine& m = grammar_->machine();
  int64_t best = kInfDist;
  for (const Handle& h : handles_) {
    int64_t d = m.dist[static_cast<size_t>(h.state)];
    for (int32_t p = h.parent; p >= 0 && d < kInfDist; p = pool_.node(p).parent) {
      d += m.dist[static_cast<size_t>(pool_.node(p).state)];
    }
    best = std::min(best, d);
  }
  return best;
}

std::string Matcher::find_jump_forward_string() {
  std::string out;
  if (terminated_) return out;
  std::vector<Handle> set = handles_;
  std::vector<Handle> closed;
  const ByteMachine& m = grammar_->machine();
  while (out.size() < 4096) {
    if (pda_.closure(set, closed) & Pda::kComplete) break;
    int forced = -1;
    bool unique = true;
    for (const Handle& h : closed) {
      if (!m.token_edges[static_cast<size_t>(h.state)].empty()) unique = false;  // a special token may come next
      for (int b = 0; b < 256 && unique; ++b) {
        if (m.step(h.state, static_cast<uint8_t>(b)) < 0) continue;
        if (forced < 0) {
          forced = b;
        } else if (forced != b) {
          unique = false;
        }
      }
      if (!unique) break;
    }
    if (!unique || forced < 0) break;
    out += static_cast<char>(forced);
    pda_.step(closed, static_cast<uint8_t>(forced), set);
  }
  return out;
}

void Matcher::check_uncertain(const Handle& h, std::span<const int32_t> ids, std::span<uint32_t> bitmask) {
  const TokenizerInfo& tok = grammar_->tokenizer();
  if (open_.empty()) {
    open_.resize(64);
    closed_.resize(64);
  }
  open_[0].assign(1, h);
  int32_t sdepth = 0;   // open_[0..sdepth] valid for the prefix of `prev`
  int32_t cdepth = -1;  // closed_[0..cdepth] valid
  int32_t dead_at = INT32_MAX;
  std::string_view prev;
  for (int32_t id : ids) {
    std::string_view cur = tok.token_bytes(id);
    int32_t l = 0;
    auto lim = static_cast<int32_t>(std::min(prev.size(), cur.size()));
    while (l < lim && prev[static_cast<size_t>(l)] == cur[static_cast<size_t>(l)]) ++l;
    prev = cur;
    if (dead_at <= l) continue;  // shares a rejected prefix
    dead_at = INT32_MAX;
    sdepth = std::min(sdepth, l);
    cdepth = std::min(cdepth, l);
    auto len = static_cast<int32_t>(cur.size());
    if (static_cast<size_t>(len) + 1 >= open_.size()) {
      open_.resize(static_cast<size_t>(len) + 2);
      closed_.resize(static_cast<size_t>(len) + 2);
    }
    for (int32_t k = sdepth; k < len; ++k) {
      auto ku = static_cast<size_t>(k);
      if (cdepth < k) {
        pda_.closure(open_[ku], closed_[ku]);
        cdepth = k;
      }
      pda_.step(closed_[ku], static_cast<uint8_t>(cur[ku]), open_[ku + 1]);
      sdepth = k + 1;
      if (open_[ku + 1].empty()) {
        dead_at = k + 1;
        break;
      }
    }
    if (dead_at == INT32_MAX) bitmask[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
  }
}

void Matcher::fill_next_token_bitmask(std::span<uint32_t> bitmask) {
  const TokenizerInfo& tok = grammar_->tokenizer();
  DI_CHECK(static_cast<int32_t>(bitmask.size()) >= tok.bitmask_words());
  std::memset(bitmask.data(), 0, bitmask.size() * sizeof(uint32_t));
  auto set_bit = [&](int32_t id) { bitmask[static_cast<size_t>(id) >> 5] |= 1u << (id & 31); };
  if (terminated_) {
    for (int32_t id : tok.stop_ids()) set_bit(id);
    return;
  }
  // Context-independent part: union of the accepted sets of the distinct top states.
  int32_t seen_states[64];
  int32_t num_seen = 0;
  for (const Handle& h : handles_) {
    bool dup = false;
    for (int32_t i = 0; i < num_seen; ++i) dup = dup || seen_states[i] == h.state;
    if (dup) continue;
    if (num_seen < 64) seen_states[num_seen++] = h.state;
    const StateTokenCache& c = grammar_->cache(h.state);
    if (!c.accepted_bitset.empty()) {
      const uint32_t* src = c.accepted_bitset.data();
      uint32_t* dst = bitmask.data();
      size_t n = c.accepted_bitset.size();
      for (size_t i = 0; i < n; ++i) dst[i] |= src[i];
    } else {
      for (int32_t id : c.accepted_ids) set_bit(id);
    }
  }
  // Context-dependent part: walk the uncertain tokens with the real stack.
  for (const Handle& h : handles_) {
    const StateTokenCache& c = grammar_->cache(h.state);
    if (!c.uncertain_ids.empty()) check_uncertain(h, c.uncertain_ids, bitmask);
  }
  // Special-token terminals (few per grammar): checked directly against the closed handles.
  const std::vector<int32_t>& specials = grammar_->machine().special_ids;
  uint32_t flags = pda_.closure(handles_, tmp_);
  if (!specials.empty()) {
    const ByteMachine& m = grammar_->machine();
    for (const Handle& h : tmp_) {
      for (const TokenEdge& e : m.token_edges[static_cast<size_t>(h.state)]) set_bit(e.token);
    }
  }
  if (flags & Pda::kComplete) {
    for (int32_t id : tok.stop_ids()) set_bit(id);
  }
}

}  // namespace deepinfer::grammar
