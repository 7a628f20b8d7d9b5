#include "sample/stop.h"

#include <algorithm>
#include <utility>

namespace deepinfer {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const std::string& s : stops_) max_stop_len_ = std::max(max_stop_len_, s.size());
}

StopMatcher::Update StopMatcher::push(std::string_view piece, bool allow_match) {
  Update u;
  if (stopped()) return u;
  const size_t old_len = held_.size();
  held_.append(piece);
  const std::string_view text(held_);

  if (allow_match && !piece.empty()) {
    // Only occurrences that end inside the new piece are new: earlier ones were seen (or were
    // not allowed). Pick the one ending first, then starting first.
    size_t best_end = std::string_view::npos, best_start = 0;
    int32_t best = -1;
    for (size_t i = 0; i < stops_.size(); ++i) {
      const std::string& s = stops_[i];
      if (s.empty() || s.size() > text.size()) continue;
      const size_t from = old_len + 1 >= s.size() ? old_len + 1 - s.size() : 0;
      const size_t pos = text.find(s, from);
      if (pos == std::string_view::npos) continue;
      const size_t end = pos + s.size();
      if (best < 0 || end < best_end || (end == best_end && pos < best_start)) {
        best = static_cast<int32_t>(i);
        best_end = end;
        best_start = pos;
      }
    }
    if (best >= 0) {
      stop_index_ = best;
      u.emit.assign(text.substr(0, best_start));
      u.stop_index = best;
      held_.clear();
      return u;
    }
  }

  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  const size_t max_hold = std::min(text.size(), max_stop_len_ > 0 ? max_stop_len_ - 1 : 0);
  for (size_t k = max_hold; k > 0 && hold == 0; --k) {
    const std::string_view suffix = text.substr(text.size() - k);
    for (const std::string& s : stops_)
      if (s.size() > k && std::string_view(s).substr(0, k) == suffix) {
        hold = k;
        break;
      }
  }
  u.emit.assign(text.substr(0, text.size() - hold));
  held_.erase(0, text.size() - hold);
  return u;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!stopped()) out.swap(held_);
  held_.clear();
  return out;
}

FinishReason check_token_stop(int32_t token, int64_t num_generated, const SamplingParams& params,
                              std::span<const int32_t> eos_token_ids, int64_t max_tokens_limit) {
  if (num_generated < params.min_tokens) return FinishReason::kNone;
  if (!params.ignore_eos && std::find(eos_token_ids.begin(), eos_token_ids.end(), token) != eos_token_ids.end())
    return FinishReason::kStop;
  if (std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), token) !=
      params.stop_token_ids.end())
    return FinishReason::kStop;
  if (params.max_tokens && num_generated >= *params.max_tokens) return FinishReason::kLength;
  if (max_tokens_limit > 0 && num_generated >= max_tokens_limit) return FinishReason::kLength;
  return FinishReason::kNone;
}

}  // namespace deepinfer
