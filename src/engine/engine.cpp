#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <deque>
#include <optional>
#include <random>
#include <span>
#include <thread>
#include <unordered_map>

#include "core/log.h"
#include "engine/memory_budget.h"
#include "engine/sequence.h"
#include "kv/prefix_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include <numeric>

namespace deepinfer {

Status EngineOptions::validate() const {
  DI_TRY(sched.validate());
  if (state_capacity_bytes <= 0) return Status::invalid_argument("state capacity must be positive");
  if (prefix_cache_bytes < 0) return Status::invalid_argument("prefix cache bytes must be >= 0");
  if (max_context < 2) return Status::invalid_argument("max_context must be >= 2");
  if (threads < 0) return Status::invalid_argument("threads must be >= 0");
  if (device != "cpu" && device != "cuda") return Status::invalid_argument("device must be cpu or cuda");
  if (!(gpu_memory_utilization >= 0.0 && gpu_memory_utilization <= 1.0))
    return Status::invalid_argument("gpu memory utilization must be in [0, 1] (0: off)");
  return Status::ok();
}

namespace {

using Clock = std::chrono::steady_clock;

// The sampling row of a batch entry in mid-prompt: it samples nothing (plain greedy, result unused).
SampleRow unused_row() {
  static const SamplingParams kUnused = [] {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }();
  SampleRow r;
  r.params = &kUnused;
  return r;
}

class Engine final : public EngineClient {
 public:
  Engine(EngineOptions opts, std::unique_ptr<Backend> backend, std::unique_ptr<Model> model,
         std::unique_ptr<SequenceFactory> factory, ModelInfo info)
      : opts_(std::move(opts)),
        backend_(std::move(backend)),
        model_(std::move(model)),
        factory_(std::move(factory)),
        info_(std::move(info)),
        sizes_(model_->info().state),
        prefix_(model_->info().prefix_block_tokens, opts_.prefix_cache_bytes > 0 ? opts_.prefix_cache_bytes : 1) {
    opts_.sched.chunk_align = prefix_.block_tokens();
    publish_stats();  // the capacities are known before the first step (metrics, stats())
    loop_ = std::thread([this] { run(); });
  }
  ~Engine() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    loop_.join();
  }

  Result<std::shared_ptr<RequestStream>> submit(EngineRequest req) override {
    DI_TRY(validate(req));
    auto ctx = std::make_shared<RequestCtx>();
    ctx->stream = std::make_shared<RequestStream>();
    ctx->submitted = Clock::now();
    if (!req.sampling.seed) req.sampling.seed = seed_source_();  // drawn once: sampling stays a pure function
    ctx->req = std::move(req);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::cancelled("engine is shutting down");
    if (static_cast<int64_t>(inbox_.size() + waiting_.size()) >= opts_.sched.max_waiting)
      return Status::resource_exhausted("the request queue is full; retry later");
    if (by_id_.count(ctx->req.id)) return Status::invalid_argument("duplicate request id '" + ctx->req.id + "'");
    by_id_[ctx->req.id] = ctx;
    inbox_.push_back(ctx);
    cv_.notify_all();
    return ctx->stream;
  }

  void cancel(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_id_.find(id);
    if (it != by_id_.end()) it->second->cancelled = true;
    cv_.notify_all();
  }

  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  const ModelInfo& model_info() const override { return info_; }

 private:
  Status validate(const EngineRequest& req) const {
    if (req.prompt.empty()) return Status::invalid_argument("the prompt is empty");
    for (int32_t t : req.prompt)
      if (t < 0 || t >= info_.vocab_size)
        return Status::invalid_argument("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                        std::to_string(info_.vocab_size) + ")");
    DI_TRY(req.sampling.validate(info_.vocab_size));
    const int64_t prompt = static_cast<int64_t>(req.prompt.size());
    if (prompt >= info_.max_context)
      return Status::invalid_argument("the prompt has " + std::to_string(prompt) + " tokens; the context length is " +
                                      std::to_string(info_.max_context));
    const int64_t total = prompt + req.sampling.max_tokens.value_or(info_.max_context - prompt);
    if (total > info_.max_context)
      return Status::invalid_argument("prompt (" + std::to_string(prompt) + " tokens) + max_tokens (" +
                                      std::to_string(*req.sampling.max_tokens) + ") exceeds the context length " +
                                      std::to_string(info_.max_context));
    if (req.sampling.n > opts_.sched.max_running)
      return Status::invalid_argument("n = " + std::to_string(req.sampling.n) + " exceeds the engine's " +
                                      std::to_string(opts_.sched.max_running) + " concurrent sequences");
    if (!req.sampling.stop.empty() && !factory_->has_tokenizer())
      return Status::invalid_argument("stop strings need a tokenizer; this model folder has none");
    const int64_t need = static_cast<int64_t>(sizes_.bytes_per_sequence + sizes_.bytes_per_token * total);
    if (need > opts_.state_capacity_bytes)
      return Status::invalid_argument("the request needs " + std::to_string(need) + " bytes of state, more than the "
                                      "engine's capacity of " + std::to_string(opts_.state_capacity_bytes));
    return Status::ok();
  }

  // Counts the tokens that steps in flight will append.
  int64_t estimate_bytes(const Sequence& s, int64_t extra_tokens) const {
    return static_cast<int64_t>(sizes_.bytes_per_sequence +
                                sizes_.bytes_per_token *
                                    static_cast<double>(static_cast<int64_t>(s.tokens.size()) + s.unsampled + extra_tokens));
  }

  // The next step as planned: members (running_ order), tokens fed to each, whether each is fed
  // its token from the step in flight and whether its step samples a token.
  struct Planned {
    std::vector<Sequence*> members;
    std::vector<int64_t> tokens;
    std::vector<bool> fed, samples;
    std::vector<bool> all_logits;  // owes prompt logprobs: every logits row comes back
    int64_t total = 0;
    double token_ctx = 0;
  };
  // A launched step, for its post-processing. Its members stay alive until it is collected
  // (finished ones in retired_, their states in deferred_states_).
  struct StepRecord {
    uint64_t id = 0;
    std::vector<Sequence*> members;
    std::vector<bool> samples;
    std::vector<bool> all_logits;
    std::vector<int64_t> computed_before, computed_after;  // each member's consumed tokens before / after the step
    bool snapshot = false;                // some member's prefix snapshot is due after it
    bool async = false;
    int64_t total = 0;
    double token_ctx = 0;
    Clock::time_point t_launch;
    int32_t row_of(const Sequence& s) const { return s.last_step == id ? s.last_row : -1; }
  };

  void run();
  bool step();
  void drop_cancelled();
  void sweep();
  void release_collected();
  Planned plan();
  bool device_sampling() const;
  bool launchable(const Planned& p) const;
  Status launch_async(const Planned& p, StepRecord& r);
  void record_launch(const Planned& p, StepRecord& r);
  bool snapshot_due(const Sequence& s, int64_t computed) const;
  void reserve_bytes(Sequence& s);
  bool drain();
  void collect(StepRecord& r);
  void complete(StepRecord& r, const Status& st, std::vector<SampleResult>& sampled, const v4::ForwardOutput* out);
  bool run_sync(const Planned& p);
  bool in_flight(const Sequence& s) const { return s.last_step > collected_; }
  void prefetch_next();
  void take_inbox();
  void admit();
  void preempt_to_fit();
  void finish(Sequence& s, const std::string& reason, std::optional<std::string> stop);
  void fail(Sequence& s, Status error);
  void publish_stats();

  EngineOptions opts_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<SequenceFactory> factory_;
  ModelInfo info_;
  v4::StateSizes sizes_;  // the model family's state accounting (ModelSpec::state)
  PrefixCache prefix_;
  StepCostModel cost_;
  std::random_device seed_source_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<std::shared_ptr<RequestCtx>> inbox_;
  std::unordered_map<std::string, std::shared_ptr<RequestCtx>> by_id_;
  EngineStats stats_;

  // Engine-thread state.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  uint64_t arrivals_ = 0;
  int64_t finishes_ = 0;  // samples finished so far (StreamEvent::finish_index)
  int64_t state_bytes_ = 0;
  int64_t stats_preemptions_ = 0;
  int64_t prompt_tokens_total_ = 0, generation_tokens_total_ = 0;
  // Prefix sharing: snapshots are taken where a step ends, and a step ends on the last block
  // boundary its chunk crosses; a boundary inside a chunk (where the next prompt may diverge,
  // e.g. the end of a shared system prompt) would never be cached. So each admitted prompt is
  // compared with the recent ones, and its prefill also stops at the last block boundary of
  // the longest common prefix (share_at_), which then gets a snapshot.
  std::deque<std::vector<int32_t>> recent_prompts_;
  std::unordered_map<const Sequence*, int64_t> share_at_;
  static constexpr size_t kRecentPrompts = 16;
  static constexpr int64_t kPromptLogprobRows = 512;
  void note_shared_prefix(Sequence& s);
  // The overlapped step loop: at most one step in flight between iterations (two while step N+1
  // is launched and step N not yet collected). Steps are numbered from 1 as launched.
  std::optional<StepRecord> inflight_;
  uint64_t launched_ = 0, collected_ = 0;
  std::vector<std::unique_ptr<Sequence>> retired_;  // finished, but in a step in flight
  std::vector<std::pair<uint64_t, std::unique_ptr<ModelState>>> deferred_states_;  // freed once step .first is collected
  Clock::time_point last_collect_;
  std::thread loop_;
};

void Engine::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || !inbox_.empty() || !running_.empty() || !waiting_.empty() || inflight_.has_value();
      });
      if (stopping_) break;
    }
    take_inbox();
    step();
    publish_stats();
  }
  // Shutdown: the step in flight is collected (its tokens streamed), then every open request
  // gets a terminal event.
  drain();
  take_inbox();
  for (auto& s : running_) finish(*s, "cancelled", std::nullopt);
  for (auto& s : waiting_) finish(*s, "cancelled", std::nullopt);
}

void Engine::take_inbox() {
  std::deque<std::shared_ptr<RequestCtx>> in;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in.swap(inbox_);
  }
  for (auto& ctx : in) {
    ctx->remaining = ctx->req.sampling.n;
    for (int i = 0; i < ctx->req.sampling.n; ++i) {
      auto s = factory_->make(ctx, i);
      s->key = {ctx->req.priority, arrivals_++};
      waiting_.push_back(std::move(s));
    }
  }
  std::stable_sort(waiting_.begin(), waiting_.end(), [](const auto& a, const auto& b) { return a->key.before(b->key); });
}

void Engine::finish(Sequence& s, const std::string& reason, std::optional<std::string> stop) {
  if (s.finished) return;
  s.finished = true;
  StreamEvent ev;
  ev.kind = StreamEvent::Kind::kFinished;
  ev.sample_index = s.sample_index;
  ev.finish_reason = reason;
  ev.stop_string = std::move(stop);
  ev.prompt_tokens = s.prompt_len;
  ev.completion_tokens = static_cast<int64_t>(s.tokens.size()) - s.prompt_len;
  ev.cached_prompt_tokens = s.cached_tokens;
  ev.finish_index = finishes_++;
  s.ctx->stream->push(std::move(ev));
  share_at_.erase(&s);
  if (s.state) state_bytes_ -= s.state_bytes;
  s.state_bytes = 0;
  if (s.state && in_flight(s)) deferred_states_.emplace_back(s.last_step, std::move(s.state));
  s.state.reset();
  if (--s.ctx->remaining == 0) {
    s.ctx->stream->close();
    std::lock_guard<std::mutex> lock(mu_);
    by_id_.erase(s.ctx->req.id);
  }
}

// The request's stream gets the error, then the sequence finishes with reason "error".
void Engine::fail(Sequence& s, Status error) {
  StreamEvent ev;
  ev.kind = StreamEvent::Kind::kError;
  ev.error = std::move(error);
  s.ctx->stream->push(std::move(ev));
  finish(s, "error", std::nullopt);
}

void Engine::admit() {
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < opts_.sched.max_running) {
    Sequence& s = *waiting_.front();
    if (state_bytes_ + estimate_bytes(s, 1) > opts_.state_capacity_bytes && !running_.empty()) break;
    s.state = model_->new_state();
    s.computed = 0;
    if (opts_.prefix_cache_bytes > 0) {
      // At least one token must be computed to get logits for the next token, and every row
      // that gives an owed prompt logprob (the lookup counts a miss when nothing may be restored).
      PrefixCache::Hit hit = prefix_.lookup(s.tokens, std::min(static_cast<int64_t>(s.tokens.size()) - 1, s.prompt_lp_next - 1));
      if (hit.tokens > 0) {
        s.state = static_cast<const ModelState*>(hit.payload.get())->clone();
        s.computed = hit.tokens;
        s.cached_tokens = std::max(s.cached_tokens, hit.tokens);
      }
    }
    if (!s.state) {  // a device model out of memory: wait for running sequences to free theirs
      if (!running_.empty()) break;
      fail(s, Status::resource_exhausted("the model has no memory for this sequence's state"));
      waiting_.pop_front();
      continue;
    }
    if (opts_.prefix_cache_bytes > 0) note_shared_prefix(s);
    s.state_bytes = estimate_bytes(s, 1);
    state_bytes_ += s.state_bytes;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

void Engine::note_shared_prefix(Sequence& s) {
  const int64_t block = prefix_.block_tokens();
  std::span<const int32_t> prompt(s.tokens.data(), static_cast<size_t>(s.prompt_len));
  int64_t common = 0;
  for (const auto& r : recent_prompts_) {
    const size_t n = std::min(r.size(), prompt.size());
    size_t k = 0;
    while (k < n && r[k] == prompt[k]) ++k;
    common = std::max(common, static_cast<int64_t>(k));
  }
  // At least one prompt token stays to compute (for the next token's logits).
  const int64_t at = std::min(common, s.prompt_len - 1) / block * block;
  if (at > s.computed && !prefix_.contains(prompt.first(static_cast<size_t>(at)))) share_at_[&s] = at;
  if (std::find_if(recent_prompts_.begin(), recent_prompts_.end(), [&](const auto& r) {
        return std::equal(r.begin(), r.end(), prompt.begin(), prompt.end());
      }) == recent_prompts_.end()) {
    recent_prompts_.emplace_front(prompt.begin(), prompt.end());
    if (recent_prompts_.size() > kRecentPrompts) recent_prompts_.pop_back();
  }
}

void Engine::preempt_to_fit() {
  // Every running sequence grows by at most one token per step; evict the latest-scheduled
  // sequences (recompute later) until the growth fits.
  for (;;) {
    int64_t need = 0;
    for (const auto& s : running_) need += estimate_bytes(*s, 1);
    if (need <= opts_.state_capacity_bytes || running_.size() <= 1) return;
    auto victim = std::max_element(running_.begin(), running_.end(),
                                   [](const auto& a, const auto& b) { return a->key.before(b->key); });
    Sequence& v = **victim;
    if (in_flight(v)) {  // its state is in use: collect the step first (it may finish sequences)
      drain();
      continue;
    }
    share_at_.erase(&v);
    state_bytes_ -= v.state_bytes;
    v.state.reset();
    v.state_bytes = 0;
    v.computed = 0;
    ++stats_preemptions_;
    waiting_.push_front(std::move(*victim));
    running_.erase(victim);
  }
}

// Cancelled requests leave first (their state is freed now, or once the step in flight with
// them is collected).
void Engine::drop_cancelled() {
  for (auto& s : running_)
    if (s->ctx->cancelled) finish(*s, "cancelled", std::nullopt);
  for (auto& s : waiting_)
    if (s->ctx->cancelled) finish(*s, "cancelled", std::nullopt);
  sweep();
  std::erase_if(waiting_, [](const auto& s) { return s->finished; });
}

// Finished sequences leave running_; one that a step in flight still has stays alive (retired_)
// until that step is collected, so its result can be discarded.
void Engine::sweep() {
  for (auto& s : running_)
    if (s->finished && in_flight(*s)) retired_.push_back(std::move(s));
  std::erase_if(running_, [](const auto& s) { return !s || s->finished; });
}

void Engine::release_collected() {
  std::erase_if(retired_, [&](const auto& s) { return !in_flight(*s); });
  std::erase_if(deferred_states_, [&](const auto& d) { return d.first <= collected_; });
}

// The next step, planned from the sequences as they will be once the steps in flight are
// collected: a sequence whose token is still in flight has one more pending token (fed on the
// device) and is left out when that token certainly ends it (max_tokens, context).
Engine::Planned Engine::plan() {
  std::vector<SeqDemand> demand;
  for (const auto& s : running_) {
    int64_t pending = static_cast<int64_t>(s->tokens.size()) + s->unsampled - s->computed;
    if (s->unsampled > 0 && s->ends_by_length(s->generated() + s->unsampled)) pending = 0;
    demand.push_back({pending, s->computed, pending == 1 && s->computed >= s->prompt_len});
  }
  StepPlan sp = plan_step(opts_.sched, demand, cost_);
  for (size_t i = 0; i < running_.size() && !share_at_.empty(); ++i) {
    auto it = share_at_.find(running_[i].get());
    if (it == share_at_.end()) continue;
    const int64_t from = running_[i]->computed, to = from + sp.tokens[i];
    if (it->second <= from) {
      share_at_.erase(it);
    } else if (it->second < to) {
      sp.total -= to - it->second;
      sp.tokens[i] = it->second - from;
    }
  }
  // A step over owed prompt logprobs returns all its logits rows (vocab floats each): at most
  // kPromptLogprobRows of them per sequence and step.
  for (size_t i = 0; i < running_.size(); ++i) {
    if (running_[i]->owes_prompt_logprobs() && sp.tokens[i] > kPromptLogprobRows) {
      sp.total -= sp.tokens[i] - kPromptLogprobRows;
      sp.tokens[i] = kPromptLogprobRows;
    }
  }
  Planned p;
  p.total = sp.total;
  for (size_t i = 0; i < running_.size(); ++i) {
    if (sp.tokens[i] == 0) continue;
    Sequence& s = *running_[i];
    p.members.push_back(&s);
    p.tokens.push_back(sp.tokens[i]);
    p.fed.push_back(s.unsampled > 0);
    p.all_logits.push_back(s.owes_prompt_logprobs());
    // A member whose step ends its pending tokens samples a token from it (the others are in mid-prompt).
    p.samples.push_back(s.computed + sp.tokens[i] == static_cast<int64_t>(s.tokens.size()) + s.unsampled);
    p.token_ctx += static_cast<double>(sp.tokens[i]) * (s.computed + sp.tokens[i] / 2.0);
  }
  return p;
}

bool Engine::device_sampling() const { return opts_.device_sampling && model_->samples_on_device(); }

// Whether the planned step can be launched without waiting for the host: every token it samples
// is sampled on the device with no grammar mask, and every fed member's row is exact without its
// latest token (Sequence::feedable).
bool Engine::launchable(const Planned& p) const {
  if (!opts_.overlap || !device_sampling()) return false;
  for (size_t b = 0; b < p.members.size(); ++b) {
    const Sequence& s = *p.members[b];
    if ((p.samples[b] && s.needs_mask()) || p.all_logits[b]) return false;
    if (p.fed[b] && !s.feedable()) return false;
  }
  return true;
}

bool Engine::step() {
  drop_cancelled();
  // The step in flight is collected first when a snapshot is due after it (a state is cloned
  // only when no step in flight uses it).
  if (inflight_ && inflight_->snapshot) drain();
  admit();
  preempt_to_fit();  // drains first when a victim is in flight
  if (running_.empty()) return drain();
  std::stable_sort(running_.begin(), running_.end(), [](const auto& a, const auto& b) { return a->key.before(b->key); });
  Planned p = plan();
  if (p.members.empty()) return drain();
  const bool async = launchable(p);
  if (inflight_ && !async) return drain();  // the next iteration plans from what the host then knows
  if (!async) return run_sync(p);
  // Step N+1 is launched before step N is collected: the host prepares it while the device runs N.
  StepRecord next;
  Status st = launch_async(p, next);
  std::optional<StepRecord> prev = std::move(inflight_);
  inflight_.reset();
  if (!st.is_ok()) {
    DI_LOG(Error, "forward failed: %s", st.to_string().c_str());
    for (Sequence* s : p.members) fail(*s, st);
  } else {
    inflight_ = std::move(next);
  }
  if (prev) collect(*prev);
  sweep();
  // As after a synchronous step: growth that no longer fits is evicted now (the step just
  // launched is collected first when a victim is in it).
  preempt_to_fit();
  return st.is_ok();
}

// Launches the planned step with launch_sample (fed members take their token from the step in
// flight) and advances the members as launched: consumed tokens, tokens to come, reservations.
Status Engine::launch_async(const Planned& p, StepRecord& r) {
  static const int32_t kPlaceholder = 0;  // a fed entry's token (replaced by the fed one)
  std::vector<ModelInput> batch;
  std::vector<SampleRow> rows;
  std::vector<int32_t> feed;
  for (size_t b = 0; b < p.members.size(); ++b) {
    Sequence& s = *p.members[b];
    if (p.fed[b]) {
      const int32_t row = inflight_ ? inflight_->row_of(s) : -1;
      if (row < 0) return Status::internal("engine: a fed sequence is not in the step in flight");
      batch.push_back({s.state.get(), std::span<const int32_t>(&kPlaceholder, 1), false});
      feed.push_back(row);
    } else {
      batch.push_back({s.state.get(), std::span<const int32_t>(s.tokens.data() + s.computed, p.tokens[b]), false});
      feed.push_back(-1);
    }
    rows.push_back(p.samples[b] ? s.next_row(s.unsampled) : unused_row());
  }
  r.t_launch = Clock::now();
  DI_TRY(model_->launch_sample(batch, rows, feed));
  r.async = true;
  record_launch(p, r);
  return Status::ok();
}

// The bookkeeping of a launched step: its record, and each member advanced as launched.
void Engine::record_launch(const Planned& p, StepRecord& r) {
  r.id = ++launched_;
  r.members = p.members;
  r.samples = p.samples;
  r.all_logits = p.all_logits;
  r.total = p.total;
  r.token_ctx = p.token_ctx;
  for (size_t b = 0; b < p.members.size(); ++b) {
    Sequence& s = *p.members[b];
    s.computed += p.tokens[b];
    s.last_step = r.id;
    s.last_row = static_cast<int32_t>(b);
    r.computed_before.push_back(s.computed - p.tokens[b]);
    r.computed_after.push_back(s.computed);
    if (p.samples[b]) {
      ++s.unsampled;
      reserve_bytes(s);
    }
    r.snapshot = r.snapshot || snapshot_due(s, s.computed);
  }
}

// The prefix cache takes a snapshot where a member's step ends on a block boundary of its prompt.
bool Engine::snapshot_due(const Sequence& s, int64_t computed) const {
  return opts_.prefix_cache_bytes > 0 && computed <= s.prompt_len && computed % prefix_.block_tokens() == 0 &&
         !prefix_.contains(std::span<const int32_t>(s.tokens.data(), computed));
}

void Engine::reserve_bytes(Sequence& s) {
  const int64_t new_bytes = estimate_bytes(s, 1);
  state_bytes_ += new_bytes - s.state_bytes;
  s.state_bytes = new_bytes;
}

// Collects the step in flight (if any) and post-processes it. True when there was one.
bool Engine::drain() {
  if (!inflight_) return false;
  StepRecord r = std::move(*inflight_);
  inflight_.reset();
  collect(r);
  sweep();
  return true;
}

void Engine::collect(StepRecord& r) {
  std::vector<SampleResult> sampled;
  Status st = model_->collect_sample(sampled);
  const auto t_done = Clock::now();
  // The step's time in the pipeline: from its launch, or from the previous collect when that was later.
  const auto from = std::max(r.t_launch, last_collect_);
  last_collect_ = t_done;
  if (st.is_ok()) cost_.observe(static_cast<double>(r.total), r.token_ctx, std::chrono::duration<double>(t_done - from).count());
  complete(r, st, sampled, nullptr);
}

// Post-processing of a collected step, as the synchronous loop always did: snapshots, first-token
// stats, accept (stream, stop checks), finish. Members already finished (at an earlier step, or
// cancelled) have their result discarded.
void Engine::complete(StepRecord& r, const Status& st, std::vector<SampleResult>& sampled, const v4::ForwardOutput* out) {
  collected_ = r.id;
  if (!st.is_ok()) DI_LOG(Error, "forward failed: %s", st.to_string().c_str());
  const int64_t V = info_.vocab_size;
  for (size_t b = 0; b < r.members.size(); ++b) {
    Sequence& s = *r.members[b];
    if (r.samples[b]) --s.unsampled;
    if (s.finished) continue;
    if (!st.is_ok()) {
      fail(s, st);
      continue;
    }
    if (snapshot_due(s, r.computed_after[b])) {
      std::shared_ptr<const ModelState> snap(s.state->clone());
      if (snap) {  // else no memory for a snapshot: a later lookup just misses
        const int64_t bytes = static_cast<int64_t>(snap->bytes());
        prefix_.insert(std::span<const int32_t>(s.tokens.data(), r.computed_after[b]), std::move(snap), bytes);
      }
    }
    // Entry b's logits rows (host sampling): one, or every token's when it owes prompt logprobs.
    const int64_t rows = r.all_logits[b] ? r.computed_after[b] - r.computed_before[b] : 1;
    if (out && r.all_logits[b])
      s.emit_prompt_logprobs(r.computed_before[b],
                             out->rows().subspan(static_cast<size_t>(out->row_offsets[b] * V), static_cast<size_t>(rows * V)), V);
    if (!r.samples[b]) continue;  // prefill chunk, no token yet
    if (!s.first_token_at) {
      s.first_token_at = Clock::now();
      prompt_tokens_total_ += s.prompt_len;
    }
    ++generation_tokens_total_;
    const auto finish_reason = out ? s.append(out->rows().subspan(static_cast<size_t>((out->row_offsets[b] + rows - 1) * V), V))
                                   : s.accept(std::move(sampled[b]));
    reserve_bytes(s);
    if (finish_reason) finish(s, finish_reason->reason, finish_reason->stop_string);
  }
  release_collected();
}

// One step with nothing in flight, waited for: forward and host sampling (grammar masks,
// penalties with overlap, EngineOptions::overlap off), or forward_sample.
bool Engine::run_sync(const Planned& p) {
  const std::vector<Sequence*>& members = p.members;
  // Grammar masks for the tokens this step samples depend only on tokens already accepted:
  // compute them on a side thread while the forward runs.
  std::vector<Sequence*> masked;
  for (size_t b = 0; b < members.size(); ++b)
    if (p.samples[b] && members[b]->needs_mask()) masked.push_back(members[b]);
  std::thread mask_thread;
  if (!masked.empty())
    mask_thread = std::thread([&masked] {
      for (Sequence* s : masked) s->prepare_mask();
    });
  // Sampling on the model's device (only tokens and logprobs come back) unless a grammar mask is
  // needed this step. Every batch entry gets a row; entries in mid-prompt sample nothing (a plain
  // greedy row, its result unused).
  const bool on_device = device_sampling() && masked.empty() &&
                         std::find(p.all_logits.begin(), p.all_logits.end(), true) == p.all_logits.end();
  std::vector<ModelInput> batch;
  std::vector<SampleRow> rows;
  for (size_t b = 0; b < members.size(); ++b) {
    Sequence& s = *members[b];
    batch.push_back({s.state.get(), std::span<const int32_t>(s.tokens.data() + s.computed, p.tokens[b]), p.all_logits[b]});
    if (on_device) rows.push_back(p.samples[b] ? s.next_row() : unused_row());
  }
  std::vector<SampleResult> sampled;
  v4::ForwardOutput out;
  out.allow_lent_logits = true;
  const auto t0 = Clock::now();
  Status st = on_device ? model_->forward_sample(batch, rows, sampled) : model_->forward(batch, out);
  if (mask_thread.joinable()) mask_thread.join();
  const auto t_done = Clock::now();
  last_collect_ = t_done;
  StepRecord r;
  record_launch(p, r);
  if (st.is_ok()) cost_.observe(static_cast<double>(p.total), p.token_ctx, std::chrono::duration<double>(t_done - t0).count());
  complete(r, st, sampled, on_device ? nullptr : &out);
  sweep();
  if (!st.is_ok()) return false;
  // Growth that no longer fits is evicted now rather than at the next step, so the published
  // state_bytes_used (the reservations) never exceeds the capacity between steps.
  preempt_to_fit();
  prefetch_next();
  return true;
}

// The next step's inputs are known now up to the token budget: each running sequence's unfed
// tokens (the token just sampled, or the rest of its prompt). A model may start reading what they
// need (V4.1: Engram table rows, which depend on token ids alone) while the host does its work.
void Engine::prefetch_next() {
  std::vector<ModelInput> upcoming;
  int64_t budget = opts_.sched.max_batch_tokens;
  for (const auto& s : running_) {
    const int64_t pending = static_cast<int64_t>(s->tokens.size()) - s->computed;
    const int64_t n = std::min(pending, budget);
    if (n <= 0 || !s->state) continue;
    upcoming.push_back({s->state.get(), std::span<const int32_t>(s->tokens.data() + s->computed, n), false});
    budget -= n;
  }
  if (!upcoming.empty()) model_->prefetch(upcoming);
}

void Engine::publish_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.waiting = static_cast<int64_t>(waiting_.size() + inbox_.size());
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.state_bytes_used = state_bytes_ + prefix_.stats().bytes;
  stats_.state_bytes_capacity = opts_.state_capacity_bytes + opts_.prefix_cache_bytes;
  stats_.prefix_cache_hit_tokens = prefix_.stats().hit_tokens;
  stats_.prefix_cache_queries = prefix_.stats().lookups;
  stats_.preemptions = stats_preemptions_;
  stats_.prompt_tokens_total = prompt_tokens_total_;
  stats_.generation_tokens_total = generation_tokens_total_;
}

}  // namespace

namespace {

Result<std::unique_ptr<EngineClient>> engine_over(EngineOptions opts, std::unique_ptr<Backend> backend,
                                                  std::unique_ptr<Model> model, std::unique_ptr<tokenizer::Tokenizer> tok,
                                                  std::string name) {
  if (opts.gpu_memory_utilization > 0) {
    const int64_t warm = std::min(opts.sched.max_batch_tokens, opts.max_context - 1);
    DI_ASSIGN_OR_RETURN(std::optional<int64_t> cap, warm_and_size_state(*model, warm, opts.gpu_memory_utilization,
                                                                        opts.prefix_cache_bytes));
    if (cap) {
      DI_LOG(Info, "state capacity %lld MiB: %.2f of the device's memory, after the weights, a %lld-token warm-up "
             "step and %lld MiB of prefix cache", static_cast<long long>(*cap >> 20), opts.gpu_memory_utilization,
             static_cast<long long>(warm), static_cast<long long>(opts.prefix_cache_bytes >> 20));
      opts.state_capacity_bytes = *cap;
    } else {
      DI_LOG(Warn, "gpu memory utilization %.2f: the model reports no device memory (it runs in host memory); "
             "state capacity stays %lld MiB", opts.gpu_memory_utilization,
             static_cast<long long>(opts.state_capacity_bytes >> 20));
    }
  }
  ModelInfo info;
  info.name = std::move(name);
  info.vocab_size = model->info().vocab_size;
  info.max_context = opts.max_context;
  info.eos_token_id = static_cast<int32_t>(model->info().eos_token_id);
  auto factory = std::make_unique<SequenceFactory>(std::move(tok), info.eos_token_id, info.max_context);
  return std::unique_ptr<EngineClient>(
      new Engine(std::move(opts), std::move(backend), std::move(model), std::move(factory), std::move(info)));
}

}  // namespace

Result<std::unique_ptr<EngineClient>> make_engine(const std::string& model_dir, const EngineOptions& opts) {
  DI_TRY(opts.validate());
  BackendConfig bc;
  bc.num_threads = opts.threads;
  DI_ASSIGN_OR_RETURN(auto backend, Backend::create(bc));
  LoadOptions lo;
  lo.device = opts.device;
  DI_ASSIGN_OR_RETURN(auto model, load_model(model_dir, *backend, lo));
  if (opts.wrap_model) model = opts.wrap_model(std::move(model));
  if (!model) return Status::invalid_argument("EngineOptions::wrap_model returned no model");
  std::unique_ptr<tokenizer::Tokenizer> tok;
  const auto tok_path = std::filesystem::path(model_dir) / "tokenizer.json";
  if (opts.load_tokenizer && std::filesystem::exists(tok_path)) {
    DI_ASSIGN_OR_RETURN(tok, tokenizer::Tokenizer::from_path(tok_path));
  }
  std::string name = opts.served_model_name.empty() ? std::filesystem::path(model_dir).filename().string()
                                                    : opts.served_model_name;
  if (name.empty()) name = std::filesystem::path(model_dir).parent_path().filename().string();
  return engine_over(opts, std::move(backend), std::move(model), std::move(tok), std::move(name));
}

Result<std::unique_ptr<EngineClient>> make_engine(std::unique_ptr<Model> model, const EngineOptions& opts) {
  DI_TRY(opts.validate());
  if (!model) return Status::invalid_argument("make_engine: no model");
  if (opts.wrap_model) model = opts.wrap_model(std::move(model));
  if (!model) return Status::invalid_argument("EngineOptions::wrap_model returned no model");
  return engine_over(opts, nullptr, std::move(model), nullptr,
                     opts.served_model_name.empty() ? "model" : opts.served_model_name);
}

}  // namespace deepinfer
