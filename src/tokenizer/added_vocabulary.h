// The added tokens of a tokenizer.json (specials such as <｜begin▁of▁sentence｜>, role and tool
// markers): lookup by id and by spelling, and the `parse`-mode splitter that finds their spellings
// in raw text the way HF tokenizers' AddedVocabulary does: leftmost-longest matching, first for
// the non-normalized tokens on the raw text, then for the normalized tokens inside the remaining
// gaps (DeepSeek's normalizer is the identity). Immutable after build; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace deepinfer::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;     // dropped by decode(skip_special_tokens=true)
  bool normalized = false;  // matched in the second pass
};

/// A segment of text: either plain text (token_id < 0) or one added token.
struct TextSegment {
  uint32_t begin;
  uint32_t end;
  int32_t token_id;
};

class AddedVocabulary {
 public:
  /// Fails on duplicate ids, empty spellings, or flags we do not implement (lstrip/rstrip/
  /// single_word are rejected by the loader before this).
  static Result<AddedVocabulary> build(std::vector<AddedToken> tokens);

  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

  /// Splits `text` into plain and added-token segments, in order, covering it.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  struct Trie {
    // node -> (byte -> child), and the token index ending at a node (-1 none).
    std::vector<std::unordered_map<unsigned char, int32_t>> next;
    std::vector<int32_t> terminal;
    bool first_byte[256] = {};
    void insert(std::string_view s, int32_t token_index);
    /// Longest token starting at text[i]: its length, or 0.
    size_t longest_at(std::string_view text, size_t i, int32_t* token_index) const;
  };
  void split_pass(const Trie& trie, std::string_view text, uint32_t b, uint32_t e,
                  std::vector<TextSegment>& out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> index_by_id_;
  std::unordered_map<std::string, size_t> index_by_content_;
  Trie raw_trie_;         // normalized == false
  Trie normalized_trie_;  // normalized == true
};

}  // namespace deepinfer::tokenizer
