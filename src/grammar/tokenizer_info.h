// TokenizerInfo: what the grammar compiler needs to know about a vocabulary: each token's bytes,
// which ids end generation (stop tokens: allowed exactly when the grammar is complete), and a
// byte trie over the other tokens in lexicographic (pre)order, the structure mask computation
// walks so that tokens sharing a prefix share the work.
//
// Added tokens (the tokenizer's specials, role and tool markers) are never produced by a grammar's
// text: their ids are masked out unless they are stop tokens, or the grammar names one with a
// special-token terminal (`<"｜DSML｜">`, Expr::kToken), which matches that id only. Immutable once built; thread-safe; shared
// by every grammar compiled for that tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::grammar {

/// Byte trie in preorder. Node 0 is the root (the empty prefix).
struct TokenTrie {
  std::vector<uint8_t> byte;          // [num_nodes]: the byte on the edge into the node
  std::vector<int32_t> depth;         // [num_nodes]
  std::vector<int32_t> subtree_end;   // [num_nodes]: first node after the node's subtree
  std::vector<int32_t> token_begin;   // [num_nodes + 1]: tokens spelled exactly by the node's path
  std::vector<int32_t> tokens;        // token ids, grouped by node
  int32_t max_depth = 0;              // the longest token, in bytes
  int32_t num_nodes() const { return static_cast<int32_t>(byte.size()); }
};

class TokenizerInfo {
 public:
  /// `token_bytes[id]` is the byte string of token `id`; ids in `excluded` are never allowed;
  /// ids in `stop_ids` end generation. Fails on out-of-range ids.
  static Result<std::shared_ptr<const TokenizerInfo>> from_vocab(std::vector<std::string> token_bytes,
                                                                 std::vector<int32_t> stop_ids,
                                                                 std::vector<int32_t> excluded = {},
                                                                 std::vector<std::pair<std::string, int32_t>> special_tokens = {});
  /// Every added token is excluded and is a special token (by its content) unless it is a stop
  /// token; `stop_ids` defaults to <｜end▁of▁sentence｜>.
  static Result<std::shared_ptr<const TokenizerInfo>> from_tokenizer(const tokenizer::Tokenizer& tok,
                                                                     std::vector<int32_t> stop_ids = {});

  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
  /// Number of 32-bit words of a bitmask over the vocabulary.
  int32_t bitmask_words() const { return (vocab_size() + 31) / 32; }
  std::string_view token_bytes(int32_t id) const { return token_bytes_[static_cast<size_t>(id)]; }
  std::span<const int32_t> stop_ids() const { return stop_ids_; }
  bool is_stop(int32_t id) const;
  /// A token the grammar can produce (not excluded, not a stop token, non-empty).
  bool is_matchable(int32_t id) const { return matchable_[static_cast<size_t>(id)] != 0; }
  const TokenTrie& trie() const { return trie_; }
  /// The id of the special (added) token with this content, which special-token terminals match;
  /// -1 when there is none (the terminal then falls back to the text spelling).
  int32_t special_token_id(std::string_view content) const;
  /// Hash of the vocabulary, stop and excluded ids: the tokenizer's identity in cache keys.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  TokenizerInfo() = default;

  std::vector<std::string> token_bytes_;
  std::vector<int32_t> stop_ids_;
  std::vector<uint8_t> matchable_;
  std::vector<std::pair<std::string, int32_t>> special_tokens_;  // sorted by content
  TokenTrie trie_;
  uint64_t fingerprint_ = 0;
};

}  // namespace deepinfer::grammar
