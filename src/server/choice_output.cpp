#include "server/choice_output.h"

#include <algorithm>

namespace deepinfer::server {

std::string StopStringFilter::push(std::string_view text) {
  if (matched_) return {};
  held_ += text;
  if (stops_.empty()) {
    std::string out;
    out.swap(held_);
    return out;
  }
  // The earliest occurrence of any stop string ends the output.
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const std::string& s : stops_) {
    size_t p = held_.find(s);
    if (p != std::string::npos && (p < best || (p == best && s.size() > which->size()))) {
      best = p;
      which = &s;
    }
  }
  if (which) {
    matched_ = *which;
    std::string out = held_.substr(0, best + (include_ ? which->size() : 0));
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStringFilter::flush() {
  std::string out;
  if (!matched_) out.swap(held_);
  return out;
}

ChoiceOutput::ChoiceOutput(const ChoiceOutputOptions& opts) : opts_(opts), stop_(opts.stop, opts.include_stop) {
  if (opts_.tok) {
    tokenizer::DecodeOptions d;
    d.skip_special_tokens = opts_.skip_special_tokens;
    dec_.emplace(*opts_.tok, d);
    if (auto id = opts_.tok->added_token_id(tokenizer::tokens::kThinkEnd)) think_end_id_ = *id;
  }
  if (opts_.chat) parser_.emplace(opts_.parser);
  in_reasoning_ = opts_.chat && opts_.parser.starts_in_reasoning;
}

void ChoiceOutput::feed_text(std::string_view text, ChoiceDelta& d) {
  if (text.empty()) return;
  if (parser_) {
    d.message.append(parser_->push(text));
  } else {
    d.text += text;
  }
}

ChoiceDelta ChoiceOutput::push(const std::vector<SampledToken>& tokens) {
  ChoiceDelta d;
  for (const SampledToken& t : tokens) {
    if (finished_ || stop_.stopped()) break;
    ids_.push_back(t.id);
    d.tokens.push_back(t);
    if (in_reasoning_) {
      ++reasoning_tokens_;
      if (t.id == think_end_id_) in_reasoning_ = false;
    }
    if (!dec_ || t.id == opts_.eos_token_id) continue;
    auto piece = dec_->push(t.id);
    if (!piece.is_ok()) continue;  // an id without a token: nothing to show (validated upstream)
    if (in_reasoning_) {  // a vocabulary without a </think> token: find it in the text
      think_tail_ += *piece;
      if (think_tail_.find(tokenizer::tokens::kThinkEnd) != std::string::npos) in_reasoning_ = false;
      if (think_tail_.size() > 16) think_tail_.erase(0, think_tail_.size() - 16);
    }
    feed_text(stop_.push(*piece), d);
  }
  return d;
}

ChoiceDelta ChoiceOutput::finish() {
  ChoiceDelta d;
  if (finished_) return d;
  finished_ = true;
  if (dec_) {
    if (!stop_.stopped()) feed_text(stop_.push(dec_->flush()), d);
    feed_text(stop_.flush(), d);
  }
  if (parser_) {
    auto r = parser_->finish();
    if (r.is_ok()) {
      d.message.append(std::move(r).value());
    }
  }
  return d;
}

}  // namespace deepinfer::server
