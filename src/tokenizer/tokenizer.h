// Tokenizer: DeepSeek's byte-level BPE tokenizer (tokenizer.json), encoding and decoding exactly
// like HF tokenizers' `Tokenizer.from_file(...).encode(text, add_special_tokens=False)` /
// `.decode(ids)`.
//
// Two encoding modes, always explicit:
//   kParse: spellings of added tokens in the text become those tokens (HF's default). Only for
//           trusted text: a raw-prompt endpoint, the CLI's `--special-tokens parse`.
//   kText:  every byte is plain text; `<｜User｜>` in the input is 5 ordinary tokens. Everything
//           a user, a tool or a document supplies goes through this mode; control tokens are
//           inserted by id by the chat encoder (chat_encoding.h), never parsed from text.
// Input must be valid UTF-8: invalid bytes are rejected with kInvalidArgument naming the offset
// (HF cannot see such input; see docs/tokenizer.md for the policy).
//
// Loading refuses a tokenizer.json whose normalizer, pre-tokenizer, decoder or model options
// differ from the DeepSeek layout this code implements, so a different tokenizer cannot slip in.
// A Tokenizer is immutable after loading; all methods are thread-safe (each thread keeps its own
// scratch space and piece cache).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"

namespace deepinfer::tokenizer {

using TokenId = int32_t;

enum class SpecialTokenMode { kParse, kText };

/// "parse" / "text" (the CLI and config spelling).
Result<SpecialTokenMode> parse_special_token_mode(std::string_view name);

struct DecodeOptions {
  bool skip_special_tokens = false;  // drop added tokens flagged special (BOS, EOS, pad, ...)
};

class Tokenizer {
 public:
  /// `path` is a tokenizer.json file or a directory containing one (a model directory).
  static Result<std::unique_ptr<Tokenizer>> from_path(const std::filesystem::path& path);
  static Result<std::unique_ptr<Tokenizer>> from_json(std::string_view tokenizer_json);

  Result<std::vector<TokenId>> encode(std::string_view text, SpecialTokenMode mode) const;
  /// Appends the ids of `text` (already validated UTF-8) in kText mode: the chat encoder's path.
  void append_plain(std::string_view text, std::vector<TokenId>& out) const;

  /// Fails with kInvalidArgument on an id that has no token.
  Result<std::string> decode(std::span<const TokenId> ids, const DecodeOptions& opts = {}) const;

  /// The bytes a token decodes to (an added token: its spelling); empty for unknown ids.
  std::string_view token_bytes(TokenId id) const;
  bool is_known(TokenId id) const;
  /// The added token with this id, or nullptr.
  const AddedToken* added_token(TokenId id) const { return added_.by_id(id); }
  /// The id of the added token spelled `content`, if any.
  std::optional<TokenId> added_token_id(std::string_view content) const;
  const AddedVocabulary& added_vocabulary() const { return added_; }
  /// One past the largest id.
  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }

 private:
  Tokenizer() = default;
  void encode_piece_cached(std::string_view piece, std::vector<TokenId>& out) const;

  BpeModel bpe_;
  AddedVocabulary added_;
  std::vector<std::string> token_bytes_;  // by id
  std::vector<uint8_t> known_;            // by id
  uint64_t instance_id_ = 0;              // keys the per-thread piece cache
};

}  // namespace deepinfer::tokenizer
