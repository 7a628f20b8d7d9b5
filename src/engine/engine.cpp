#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <deque>
#include <random>
#include <span>
#include <thread>
#include <unordered_map>

#include "core/log.h"
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
  return Status::ok();
}

namespace {

using Clock = std::chrono::steady_clock;

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

  int64_t estimate_bytes(const Sequence& s, int64_t extra_tokens) const {
    return static_cast<int64_t>(sizes_.bytes_per_sequence +
                                sizes_.bytes_per_token * static_cast<double>(s.tokens.size() + extra_tokens));
  }

  void run();
  bool step();
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
  void note_shared_prefix(Sequence& s);
  std::thread loop_;
};

void Engine::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !running_.empty() || !waiting_.empty(); });
      if (stopping_) break;
    }
    take_inbox();
    step();
    publish_stats();
  }
  // Shutdown: every open request gets a terminal event.
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
      // At least one token must be computed to get logits for the next token.
      PrefixCache::Hit hit = prefix_.lookup(s.tokens, static_cast<int64_t>(s.tokens.size()) - 1);
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
    share_at_.erase(&v);
    state_bytes_ -= v.state_bytes;
    v.state.reset();
    v.computed = 0;
    ++stats_preemptions_;
    waiting_.push_front(std::move(*victim));
    running_.erase(victim);
  }
}

bool Engine::step() {
  // Cancelled requests leave first (their state is freed now).
  for (auto& s : running_)
    if (s->ctx->cancelled) finish(*s, "cancelled", std::nullopt);
  for (auto& s : waiting_)
    if (s->ctx->cancelled) finish(*s, "cancelled", std::nullopt);
  std::erase_if(running_, [](const auto& s) { return s->finished; });
  std::erase_if(waiting_, [](const auto& s) { return s->finished; });

  admit();
  preempt_to_fit();
  if (running_.empty()) return false;
  std::stable_sort(running_.begin(), running_.end(), [](const auto& a, const auto& b) { return a->key.before(b->key); });

  std::vector<SeqDemand> demand;
  for (const auto& s : running_) {
    const int64_t pending = static_cast<int64_t>(s->tokens.size()) - s->computed;
    demand.push_back({pending, s->computed, pending == 1 && s->computed >= s->prompt_len});
  }
  StepPlan plan = plan_step(opts_.sched, demand, cost_);
  for (size_t i = 0; i < running_.size() && !share_at_.empty(); ++i) {
    auto it = share_at_.find(running_[i].get());
    if (it == share_at_.end()) continue;
    const int64_t from = running_[i]->computed, to = from + plan.tokens[i];
    if (it->second <= from) {
      share_at_.erase(it);
    } else if (it->second < to) {
      plan.total -= to - it->second;
      plan.tokens[i] = it->second - from;
    }
  }
  std::vector<ModelInput> batch;
  std::vector<Sequence*> members;
  double token_ctx = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    if (plan.tokens[i] == 0) continue;
    Sequence& s = *running_[i];
    batch.push_back({s.state.get(), std::span<const int32_t>(s.tokens.data() + s.computed, plan.tokens[i]), false});
    members.push_back(&s);
    token_ctx += static_cast<double>(plan.tokens[i]) * (s.computed + plan.tokens[i] / 2.0);
  }
  if (batch.empty()) return false;
  // Members whose step ends their pending tokens sample a token from it (the others are in mid-prompt).
  std::vector<bool> samples(members.size());
  for (size_t b = 0; b < members.size(); ++b)
    samples[b] = members[b]->computed + static_cast<int64_t>(batch[b].tokens.size()) ==
                 static_cast<int64_t>(members[b]->tokens.size());
  // Grammar masks for the tokens this step samples depend only on tokens already accepted:
  // compute them on a side thread while the forward runs.
  std::vector<Sequence*> masked;
  for (size_t b = 0; b < members.size(); ++b)
    if (samples[b] && members[b]->needs_mask()) masked.push_back(members[b]);
  std::thread mask_thread;
  if (!masked.empty())
    mask_thread = std::thread([&masked] {
      for (Sequence* s : masked) s->prepare_mask();
    });
  // Sampling on the model's device (only tokens and logprobs come back) unless a grammar mask is
  // needed this step. Every batch entry gets a row; entries in mid-prompt sample nothing (a plain
  // greedy row, its result unused).
  const bool on_device = opts_.device_sampling && model_->samples_on_device() && masked.empty();
  static const SamplingParams kUnused{.temperature = 0.0f};
  std::vector<SampleRow> rows;
  std::vector<SampleResult> sampled;
  if (on_device)
    for (size_t b = 0; b < members.size(); ++b) rows.push_back(samples[b] ? members[b]->next_row() : SampleRow{.params = &kUnused});
  v4::ForwardOutput out;
  out.allow_lent_logits = true;
  const auto t0 = Clock::now();
  Status st = on_device ? model_->forward_sample(batch, rows, sampled) : model_->forward(batch, out);
  if (mask_thread.joinable()) mask_thread.join();
  cost_.observe(static_cast<double>(plan.total), token_ctx, std::chrono::duration<double>(Clock::now() - t0).count());
  if (!st.is_ok()) {
    DI_LOG(Error, "forward failed: %s", st.to_string().c_str());
    for (Sequence* s : members) fail(*s, st);
    return false;
  }
  const int64_t V = info_.vocab_size;
  for (size_t b = 0; b < members.size(); ++b) {
    Sequence& s = *members[b];
    s.computed += static_cast<int64_t>(batch[b].tokens.size());
    if (opts_.prefix_cache_bytes > 0 && s.computed <= s.prompt_len && s.computed % prefix_.block_tokens() == 0 &&
        !prefix_.contains(std::span<const int32_t>(s.tokens.data(), s.computed))) {
      std::shared_ptr<const ModelState> snap(s.state->clone());
      if (snap) {  // else no memory for a snapshot: a later lookup just misses
        const int64_t bytes = static_cast<int64_t>(snap->bytes());
        prefix_.insert(std::span<const int32_t>(s.tokens.data(), s.computed), std::move(snap), bytes);
      }
    }
    if (s.computed < static_cast<int64_t>(s.tokens.size())) continue;  // prefill chunk, no token yet
    if (!s.first_token_at) {
      s.first_token_at = Clock::now();
      prompt_tokens_total_ += s.prompt_len;
    }
    ++generation_tokens_total_;
    const auto finish_reason = on_device ? s.accept(std::move(sampled[b]))
                                         : s.append(out.rows().subspan(static_cast<size_t>(out.row_offsets[b] * V), V));
    const int64_t new_bytes = estimate_bytes(s, 1);
    state_bytes_ += new_bytes - s.state_bytes;
    s.state_bytes = new_bytes;
    if (finish_reason) finish(s, finish_reason->reason, finish_reason->stop_string);
  }
  std::erase_if(running_, [](const auto& s) { return s->finished; });
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
  ModelInfo info;
  info.name = opts.served_model_name.empty() ? std::filesystem::path(model_dir).filename().string()
                                             : opts.served_model_name;
  if (info.name.empty()) info.name = std::filesystem::path(model_dir).parent_path().filename().string();
  info.vocab_size = model->info().vocab_size;
  info.max_context = opts.max_context;
  info.eos_token_id = static_cast<int32_t>(model->info().eos_token_id);
  auto factory = std::make_unique<SequenceFactory>(std::move(tok), info.eos_token_id, info.max_context);
  return std::unique_ptr<EngineClient>(
      new Engine(opts, std::move(backend), std::move(model), std::move(factory), std::move(info)));
}

}  // namespace deepinfer
