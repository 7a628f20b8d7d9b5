#include "engine/sequence.h"

#include <algorithm>
#include <cmath>

#include "grammar/matcher.h"
#include "sample/logprobs.h"
#include "sample/stop.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

Sequence::Sequence(std::shared_ptr<RequestCtx> c, int index, int64_t max_tokens, int32_t eos,
                   const tokenizer::Tokenizer* tokenizer)
    : ctx(std::move(c)), sample_index(index), max_tokens_(max_tokens), eos_(eos), eos_ids_{eos} {
  tokens = ctx->req.prompt;
  prompt_len = static_cast<int64_t>(tokens.size());
  prompt_lp_next = ctx->req.sampling.prompt_logprobs >= 0 ? 1 : prompt_len;
  if (!ctx->req.sampling.stop.empty() && tokenizer) {
    detok_ = std::make_unique<tokenizer::IncrementalDecoder>(*tokenizer);
    stops_ = std::make_unique<StopMatcher>(ctx->req.sampling.stop);
  }
  if (ctx->req.grammar) {
    matcher_ = std::make_unique<grammar::Matcher>(ctx->req.grammar);
    grammar_active_ = ctx->req.grammar_start_token < 0;
  }
}

Sequence::~Sequence() = default;

SampleRow Sequence::next_row(int64_t ahead) const {
  const SamplingParams& p = ctx->req.sampling;
  SampleRow row;
  row.params = &p;
  row.prompt_tokens = std::span<const int32_t>(tokens.data(), prompt_len);
  row.output_tokens = std::span<const int32_t>(tokens.data() + prompt_len, tokens.size() - prompt_len);
  row.eos_token_ids = eos_ids_;
  row.rng = RngKey{*p.seed, static_cast<uint32_t>(sample_index)};
  row.position = static_cast<int64_t>(tokens.size()) - prompt_len + ahead;
  return row;
}

bool Sequence::feedable() const {
  const SamplingParams& p = ctx->req.sampling;
  const bool penalties = p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  return !matcher_ && !penalties && generated() >= p.min_tokens;
}

bool Sequence::ends_by_length(int64_t g) const {
  const SamplingParams& p = ctx->req.sampling;
  if (g < p.min_tokens) return false;
  return (p.max_tokens && g >= *p.max_tokens) || (max_tokens_ > 0 && g >= max_tokens_);
}

std::optional<FinishInfo> Sequence::append(std::span<const float> logits) {
  SampleRow row = next_row();
  row.logits = logits;
  if (needs_mask()) {
    if (!mask_ready_) prepare_mask();
    mask_ready_ = false;
    // Ids outside the grammar's vocabulary (the model's padding rows) are never allowed.
    const int32_t gv = matcher_->grammar().tokenizer().vocab_size();
    masked_.assign(logits.begin(), logits.end());
    for (size_t i = 0; i < masked_.size(); ++i) {
      const bool ok = static_cast<int32_t>(i) < gv && ((bitmask_[i >> 5] >> (i & 31)) & 1u);
      if (!ok) masked_[i] = -INFINITY;
    }
    row.logits = masked_;
  }
  return accept(sample_row(row));
}

std::optional<FinishInfo> Sequence::accept(SampleResult r) {
  if (matcher_) {
    if (grammar_active_) {
      if (!matcher_->accept_token(r.token)) matcher_.reset();  // cannot happen for a masked choice
    } else if (r.token == ctx->req.grammar_start_token) {
      grammar_active_ = true;
    }
  }
  tokens.push_back(r.token);
  StreamEvent ev;
  ev.kind = StreamEvent::Kind::kTokens;
  ev.sample_index = sample_index;
  ev.tokens.push_back({r.token, r.logprob, std::move(r.top_logprobs)});
  ctx->stream->push(std::move(ev));
  return check_stop(r.token);
}

bool Sequence::needs_mask() const { return matcher_ && grammar_active_; }

void Sequence::emit_prompt_logprobs(int64_t first, std::span<const float> rows, int64_t vocab) {
  const int64_t n = static_cast<int64_t>(rows.size()) / vocab;
  // Row i gives token first + i + 1; the owed ones among them are a contiguous run from prompt_lp_next.
  const int64_t from = std::max(prompt_lp_next, first + 1), to = std::min(prompt_len, first + n + 1);
  if (from != prompt_lp_next || from >= to) return;
  StreamEvent ev;
  ev.kind = StreamEvent::Kind::kPromptLogprobs;
  ev.sample_index = sample_index;
  ev.prompt_offset = from;
  std::vector<float> scratch;
  const int32_t k = ctx->req.sampling.prompt_logprobs;
  for (int64_t t = from; t < to; ++t) {
    TokenLogprob tl = token_logprob(rows.subspan(static_cast<size_t>((t - 1 - first) * vocab), static_cast<size_t>(vocab)),
                                    tokens[static_cast<size_t>(t)], k, scratch);
    ev.tokens.push_back({tokens[static_cast<size_t>(t)], tl.logprob, std::move(tl.top), tl.rank});
  }
  prompt_lp_next = to;
  ctx->stream->push(std::move(ev));
}

void Sequence::prepare_mask() {
  if (!needs_mask()) return;
  const int32_t gv = matcher_->grammar().tokenizer().vocab_size();
  bitmask_.assign(static_cast<size_t>((gv + 31) / 32), 0u);
  matcher_->fill_next_token_bitmask(bitmask_);
  mask_ready_ = true;
}

std::optional<FinishInfo> Sequence::check_stop(int32_t token) {
  const SamplingParams& p = ctx->req.sampling;
  const int64_t generated = static_cast<int64_t>(tokens.size()) - prompt_len;
  if (stops_) {  // stop strings: matched on the detokenized text, across token boundaries
    auto text = detok_->push(token);
    if (text.is_ok()) {
      StopMatcher::Update u = stops_->push(*text, generated >= p.min_tokens);
      if (u.stop_index) return FinishInfo{"stop", stops_->stop_string(*u.stop_index)};
    }
  }
  switch (check_token_stop(token, generated, p, eos_ids_, max_tokens_)) {
    case FinishReason::kStop: return FinishInfo{"stop", std::nullopt};
    case FinishReason::kLength: return FinishInfo{"length", std::nullopt};
    case FinishReason::kNone: break;
  }
  return std::nullopt;
}

SequenceFactory::SequenceFactory(std::unique_ptr<tokenizer::Tokenizer> tokenizer, int32_t eos, int64_t max_context)
    : tokenizer_(std::move(tokenizer)), eos_(eos), max_context_(max_context) {}

SequenceFactory::~SequenceFactory() = default;

std::unique_ptr<Sequence> SequenceFactory::make(std::shared_ptr<RequestCtx> ctx, int sample_index) const {
  const int64_t prompt = static_cast<int64_t>(ctx->req.prompt.size());
  const int64_t max_tokens = ctx->req.sampling.max_tokens.value_or(max_context_ - prompt);
  return std::make_unique<Sequence>(std::move(ctx), sample_index, max_tokens, eos_, tokenizer_.get());
}

}  // namespace deepinfer
