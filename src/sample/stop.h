// Stop conditions. StopMatcher finds stop strings in streamed text that arrives in pieces (one
// decoded token at a time, say), where a stop string may straddle any number of pieces. It is
// pure string logic (bytes), with no tokenizer: feed it what the incremental decoder emits.
// check_token_stop decides the id-based stops (EOS, stop_token_ids, max_tokens) as vLLM does.
//
// StopMatcher semantics (independent of how the text is split into pieces):
//  * the match reported is the occurrence that ends first in the whole text; among those ending
//    at the same byte, the one that starts first (the longest);
//  * on a match, the text before the stop string is emitted and the stop string itself is not
//    (OpenAI / vLLM default); nothing is emitted after it;
//  * otherwise push() returns the text that is safe to emit now: everything except the longest
//    suffix that is a proper prefix of some stop string, which is held back until it is resolved.
//    A held-back suffix starts where a stop string starts, so it never splits a UTF-8 character
//    when the stop strings are valid UTF-8.
// One matcher per sample; not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sample/sampling_params.h"

namespace deepinfer {

class StopMatcher {
 public:
  struct Update {
    std::string emit;                   // text to send to the client now
    std::optional<int32_t> stop_index;  // set when a stop string matched: index into stops
  };

  /// Empty strings in `stops` are ignored (validate() rejects them).
  explicit StopMatcher(std::vector<std::string> stops);

  /// Feeds the next decoded piece. When `allow_match` is false (vLLM: fewer than min_tokens
  /// tokens generated), a stop string that ends inside this piece does not count, but the text is
  /// still held back as usual so that a stop string ending in a later piece is found.
  Update push(std::string_view piece, bool allow_match = true);
  /// End of generation without a stop string: returns the held-back text and clears it.
  std::string flush();

  bool stopped() const { return stop_index_.has_value(); }
  std::optional<int32_t> stop_index() const { return stop_index_; }
  const std::string& stop_string(int32_t index) const { return stops_[index]; }
  /// Bytes held back right now (for tests and for the engine's accounting).
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  size_t max_stop_len_ = 0;
  std::string held_;  // text pushed but not yet emitted
  std::optional<int32_t> stop_index_;
};

enum class FinishReason : uint8_t { kNone, kStop, kLength };

/// After sampling `token`, which brings this sample's output to `num_generated` tokens: kStop on
/// EOS (unless ignore_eos) or a stop_token_id, kLength at max_tokens or `max_tokens_limit` (the
/// context's room; <= 0: none), kNone otherwise. Nothing stops before min_tokens (vLLM). The
/// stop token is part of the output ids; the engine does not detokenize EOS into the text.
FinishReason check_token_stop(int32_t token, int64_t num_generated, const SamplingParams& params,
                              std::span<const int32_t> eos_token_ids, int64_t max_tokens_limit = 0);

}  // namespace deepinfer
