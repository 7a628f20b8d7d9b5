// IncrementalDecoder: streaming detokenization for one response. Each push() appends a token's
// bytes and returns the text that is now final: complete UTF-8 characters, with invalid byte
// sequences replaced by U+FFFD exactly as a one-shot Tokenizer::decode would (the maximal-
// subpart rule is prefix-stable), and a valid but incomplete character held back (at most 3
// bytes). The concatenation of all push() results and flush() equals decode(all ids) — unlike
// HF's DecodeStream there is no "invalid prefix" failure mode. One object per request; not
// thread-safe; borrows the Tokenizer, which must outlive it.
#pragma once

#include <string>

#include "core/result.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tok, DecodeOptions opts = {}) : tok_(&tok), opts_(opts) {}

  /// The text completed by `id` (often empty mid-character). kInvalidArgument for an unknown id,
  /// with the decoder unchanged.
  Result<std::string> push(TokenId id);
  /// Ends the stream: the held-back bytes, lossily (U+FFFD for a truncated character).
  std::string flush();
  /// Bytes held back for an incomplete character.
  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  DecodeOptions opts_;
  std::string pending_;
};

}  // namespace deepinfer::tokenizer
