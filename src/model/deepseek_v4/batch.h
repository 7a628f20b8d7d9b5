// BatchLayout: how the tokens of one forward are packed. Sequences are contiguous runs of
// tokens (prefill chunks and single decode tokens mixed); every op is row-independent, so a
// sequence's results do not depend on what else is in the batch.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer::v4 {

struct SeqSlice {
  int64_t offset = 0;     // first token in the packed batch
  int64_t count = 0;      // tokens of this sequence in the batch
  int64_t start_pos = 0;  // absolute position of the first of them
};

struct BatchLayout {
  std::vector<SeqSlice> seqs;
  std::vector<int64_t> pos;  // absolute position of every packed token
  int64_t num_tokens() const { return static_cast<int64_t>(pos.size()); }
};

/// Front-door check of a sequence's new tokens: non-empty, every id in [0, vocab_size).
inline Status check_token_ids(std::span<const int32_t> tokens, int64_t vocab_size) {
  if (tokens.empty()) return Status::invalid_argument("empty token sequence");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab_size)
      return Status::invalid_argument("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                                      " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  return Status::ok();
}

}  // namespace deepinfer::v4
