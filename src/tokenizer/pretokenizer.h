// The DeepSeek-V3/V4 pre-tokenizer, hand-coded: the three `Split(Isolated)` regexes of
// tokenizer.json applied in sequence, each to every piece of the previous one, with Oniguruma's
// leftmost-first alternation semantics (look-aheads see the end of the piece):
//   1. \p{N}{1,3}
//   2. [一-龥぀-ゟ゠-ヿ]+
//   3. [ASCII punct][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ | ?[\p{P}\p{S}]+[\r\n]*
//      | \s*[\r\n]+ | \s+(?!\S) | \s+
// Unmatched characters stay as gap pieces. Linear time, no recursion, no allocation beyond the
// caller's scratch. A PreTokenizer object is scratch space: one per thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

/// A piece of the input as a byte range [begin, end).
struct Piece {
  uint32_t begin;
  uint32_t end;
};

class PreTokenizer {
 public:
  /// Splits valid UTF-8 `text` (< 4 GiB) into pieces covering it in order; replaces `pieces`.
  void split(std::string_view text, std::vector<Piece>& pieces);

 private:
  void split_numbers(uint32_t b, uint32_t e, std::vector<Piece>& out);
  void split_cjk(uint32_t b, uint32_t e, std::vector<Piece>& out);
  void split_words(uint32_t b, uint32_t e, std::vector<Piece>& out);
  uint32_t match_word_at(uint32_t i, uint32_t e) const;
  void emit(uint32_t b, uint32_t e, std::vector<Piece>& out) const;

  std::vector<char32_t> cps_;      // code points of the text
  std::vector<uint8_t> cls_;       // CharClass bits per code point
  std::vector<uint32_t> offsets_;  // byte offset of each code point, plus the end
};

}  // namespace deepinfer::tokenizer
