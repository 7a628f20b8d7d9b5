// BatchLayout: how the tokens of one forward are packed. Sequences are contiguous runs of
// tokens (prefill chunks and single decode tokens mixed); every op is row-independent, so a
// sequence's results do not depend on what else is in the batch.
#pragma once

#include <cstdint>
#include <vector>

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

}  // namespace deepinfer::v4
