// Byte-level BPE: turns one pre-tokenized piece (raw bytes) into token ids by applying merges in
// (rank, leftmost position) order, the order of HF tokenizers' Word::merge_all, so the ids are
// identical. Short pieces use a linear scan, long ones a heap over a linked list
// (O(n log n): a 1 MB piece without spaces is fine). Immutable after build; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace deepinfer::tokenizer {

class BpeModel {
 public:
  struct Merge {
    int32_t left;
    int32_t right;
    int32_t merged;
  };

  /// `byte_ids[b]` is the id of the single-byte token b; merges are in rank order.
  static Result<BpeModel> build(const std::vector<int32_t>& byte_ids, const std::vector<Merge>& merges);

  /// Appends the ids of `piece` (non-empty bytes) to `out`.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

 private:
  struct Slot {
    uint64_t key;   // (left << 32 | right) + 1; 0 = empty
    int32_t rank;
    int32_t merged;
  };
  const Slot* find(int32_t left, int32_t right) const;
  void encode_linear(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_heap(std::string_view piece, std::vector<int32_t>& out) const;

  int32_t byte_ids_[256] = {};
  std::vector<Slot> slots_;  // open addressing, power-of-two size
  uint64_t mask_ = 0;
};

}  // namespace deepinfer::tokenizer
