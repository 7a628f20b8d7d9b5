// FakeEngineClient: a boundary mock of EngineClient for the server tests. Each request runs on
// its own thread and emits, for every sample, the configured script of token ids (or, with an
// empty script, ids derived from the prompt), one token per event every `token_delay`. It
// honours max_tokens ("length"), stop_token_ids and EOS ("stop", unless ignore_eos), n, logprobs
// and prompt_logprobs (deterministic values; prompt token t gets logprob -t/8, rank t, in two
// events before the first token) and cancel ("cancelled"). It does not match stop strings, so the tests
// see the server's own stop-string handling. `full` makes submit() answer kResourceExhausted.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "engine/engine_client.h"

namespace deepinfer::server::testing {

class FakeEngineClient final : public EngineClient {
 public:
  explicit FakeEngineClient(ModelInfo info) : info_(std::move(info)) {}
  ~FakeEngineClient() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    for (auto& t : threads_) t.join();
  }

  // Configuration (set before requests).
  std::vector<int32_t> script;                          // tokens every sample emits
  std::chrono::milliseconds token_delay{0};
  std::atomic<bool> full{false};
  int64_t cached_prompt_tokens = 0;

  Result<std::shared_ptr<RequestStream>> submit(EngineRequest req) override {
    if (full.load()) return Status::resource_exhausted("the engine queue is full");
    for (int32_t id : req.prompt) {
      if (id < 0 || id >= info_.vocab_size) return Status::invalid_argument("prompt token out of vocabulary");
    }
    DI_TRY(req.sampling.validate(info_.vocab_size));
    auto stream = std::make_shared<RequestStream>();
    std::lock_guard<std::mutex> lock(mu_);
    submitted_.push_back(req);
    ++running_;
    threads_.emplace_back([this, req = std::move(req), stream] { run(req, stream); });
    return stream;
  }

  void cancel(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.insert(id);
  }

  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    EngineStats s;
    s.running = running_;
    s.generation_tokens_total = generated_;
    s.state_bytes_capacity = 1 << 20;
    s.prefix_cache_hit_tokens = 7;
    s.preemptions = 2;
    return s;
  }
  const ModelInfo& model_info() const override { return info_; }

  std::vector<EngineRequest> submitted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
  }
  bool was_cancelled(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_.count(id) > 0;
  }
  size_t num_cancelled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_.size();
  }
  int64_t running() const {
    std::lock_guard<std::mutex> lock(mu_);
    return running_;
  }

 private:
  bool stop_requested(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_ || cancelled_.count(id) > 0;
  }

  int32_t token_at(const EngineRequest& req, int sample, int64_t i) const {
    if (!script.empty()) return script[static_cast<size_t>(i) % script.size()];
    return static_cast<int32_t>((req.prompt.back() + 3 + i + sample) % info_.vocab_size);
  }

  void run(const EngineRequest& req, std::shared_ptr<RequestStream> stream) {
    const SamplingParams& sp = req.sampling;
    const int64_t limit = sp.max_tokens.value_or(info_.max_context - static_cast<int64_t>(req.prompt.size()));
    std::vector<int64_t> produced(sp.n, 0);
    std::vector<bool> done(sp.n, false);
    int open = sp.n;
    auto finish = [&](int k, const char* reason) {
      StreamEvent ev;
      ev.kind = StreamEvent::Kind::kFinished;
      ev.sample_index = k;
      ev.finish_reason = reason;
      ev.prompt_tokens = static_cast<int64_t>(req.prompt.size());
      ev.completion_tokens = produced[k];
      ev.cached_prompt_tokens = cached_prompt_tokens;
      stream->push(std::move(ev));
      done[k] = true;
      --open;
    };
    if (sp.prompt_logprobs >= 0) {
      const int64_t P = static_cast<int64_t>(req.prompt.size()), half = (P + 1) / 2;
      for (int k = 0; k < sp.n; ++k) {
        for (auto [from, to] : {std::pair<int64_t, int64_t>{1, half}, std::pair<int64_t, int64_t>{half, P}}) {
          if (from >= to) continue;
          StreamEvent ev;
          ev.kind = StreamEvent::Kind::kPromptLogprobs;
          ev.sample_index = k;
          ev.prompt_offset = from;
          for (int64_t t = from; t < to; ++t) {
            SampledToken pt;
            pt.id = req.prompt[static_cast<size_t>(t)];
            pt.logprob = -static_cast<float>(t) / 8;
            pt.rank = static_cast<int32_t>(t);
            for (int j = 0; j < sp.prompt_logprobs; ++j) pt.top.push_back({j, -0.0625f * static_cast<float>(j + 1)});
            ev.tokens.push_back(std::move(pt));
          }
          stream->push(std::move(ev));
        }
      }
    }
    for (int64_t i = 0; open > 0; ++i) {
      if (token_delay.count() > 0) std::this_thread::sleep_for(token_delay);
      if (stop_requested(req.id)) {
        for (int k = 0; k < sp.n; ++k) {
          if (!done[k]) finish(k, "cancelled");
        }
        break;
      }
      for (int k = 0; k < sp.n; ++k) {
        if (done[k]) continue;
        const int32_t id = token_at(req, k, i);
        StreamEvent ev;
        ev.sample_index = k;
        SampledToken t;
        t.id = id;
        if (sp.logprobs) {
          t.logprob = -0.25f * static_cast<float>(i % 4 + 1);
          for (int j = 0; j < sp.top_logprobs; ++j) {
            t.top.push_back({(id + j) % static_cast<int32_t>(info_.vocab_size), t.logprob - static_cast<float>(j)});
          }
        }
        ev.tokens.push_back(t);
        stream->push(std::move(ev));
        ++produced[k];
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++generated_;
        }
        const bool stop_id = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), id) != sp.stop_token_ids.end();
        if ((id == info_.eos_token_id && !sp.ignore_eos) || stop_id) finish(k, "stop");
        else if (produced[k] >= limit) finish(k, "length");
      }
    }
    stream->close();
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
  }

  ModelInfo info_;
  mutable std::mutex mu_;
  std::vector<EngineRequest> submitted_;
  std::set<std::string> cancelled_;
  std::vector<std::thread> threads_;
  int64_t running_ = 0, generated_ = 0;
  bool stopping_ = false;
};

}  // namespace deepinfer::server::testing
