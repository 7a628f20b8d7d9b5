// Helpers shared by the grammar tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/matcher.h"

namespace deepinfer::grammar::testing {

/// True when `text` is a complete match of the grammar.
inline bool full_match(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  return m.accept_string(text) && m.can_terminate();
}

inline bool bit(const std::vector<uint32_t>& mask, int32_t id) {
  return (mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u;
}

/// The mask by brute force: try every token with accept_token + rollback.
inline std::vector<uint32_t> brute_force_mask(Matcher& m) {
  const TokenizerInfo& tok = m.grammar().tokenizer();
  std::vector<uint32_t> mask(static_cast<size_t>(tok.bitmask_words()), 0);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (m.accept_token(id)) {
      mask[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
      EXPECT_TRUE(m.rollback(1));
    }
  }
  return mask;
}

struct WalkResult {
  std::string text;
  int32_t num_tokens = 0;
  bool terminated = false;
};

/// A random walk over allowed tokens: uniform for `budget` tokens (taking a stop token with
/// probability 1/4 when allowed), then finishing greedily: among the single-byte tokens, the one
/// that most reduces min_completion_bytes (so the walk always ends).
inline WalkResult random_walk(const std::shared_ptr<const CompiledGrammar>& g, uint64_t seed, int32_t budget,
                              int32_t max_tokens = 4000) {
  const TokenizerInfo& tok = g->tokenizer();
  std::vector<int32_t> single_byte(256, -1);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    std::string_view b = tok.token_bytes(id);
    if (tok.is_matchable(id) && b.size() == 1) single_byte[static_cast<uint8_t>(b[0])] = id;
  }
  std::mt19937_64 rng(seed);
  Matcher m(g, /*max_rollback_tokens=*/4);
  std::vector<uint32_t> mask(static_cast<size_t>(tok.bitmask_words()));
  WalkResult r;
  std::vector<int32_t> allowed;
  while (!m.is_terminated() && r.num_tokens < max_tokens) {
    int32_t pick = -1;
    if (r.num_tokens < budget) {
      m.fill_next_token_bitmask(mask);
      allowed.clear();
      bool stop_ok = false;
      for (int32_t id = 0; id < tok.vocab_size(); ++id) {
        if (!bit(mask, id)) continue;
        if (tok.is_stop(id)) {
          stop_ok = true;
        } else {
          allowed.push_back(id);
        }
      }
      if (stop_ok && (allowed.empty() || rng() % 4 == 0)) {
        pick = tok.stop_ids()[0];
      } else if (!allowed.empty()) {
        pick = allowed[rng() % allowed.size()];
      } else {
        ADD_FAILURE() << "empty mask after: " << r.text;
        return r;
      }
    } else if (m.can_terminate()) {
      pick = tok.stop_ids()[0];
    } else {
      int64_t best = m.min_completion_bytes();
      for (int32_t id : single_byte) {
        if (id < 0 || !m.accept_token(id)) continue;
        int64_t d = m.min_completion_bytes();
        m.rollback(1);
        if (d < best) {
          best = d;
          pick = id;
        }
      }
      if (pick < 0) {
        ADD_FAILURE() << "finishing walk is stuck after: " << r.text;
        return r;
      }
    }
    EXPECT_TRUE(m.accept_token(pick)) << "allowed token " << pick << " was refused after: " << r.text;
    if (!tok.is_stop(pick)) r.text += tok.token_bytes(pick);
    ++r.num_tokens;
  }
  r.terminated = m.is_terminated();
  return r;
}

}  // namespace deepinfer::grammar::testing
