// EngineClient: the thread-safe boundary between front ends (HTTP server, offline batch) and the
// engine's step loop. A front end submits a validated EngineRequest and reads its RequestStream;
// the engine thread pushes events. Cancelling (or dropping the stream) frees the request's state.
// This header is the whole contract: the server depends on it and on nothing else of the engine.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "sample/sampling_params.h"

namespace deepinfer {

namespace grammar {
class CompiledGrammar;
}

struct EngineRequest {
  std::string id;               // unique per request (the server makes it); used in logs and cancel
  std::vector<int32_t> prompt;  // token ids, validated against the model's vocab by submit()
  SamplingParams sampling;      // validated by submit()
  int priority = 0;             // larger runs first; FCFS within a priority
  /// Structured outputs: sampling is masked to what this grammar allows (null: unconstrained).
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  /// The constraint starts after this token is generated (</think> in thinking mode); -1: at once.
  int32_t grammar_start_token = -1;
};

struct SampledToken {
  int32_t id = 0;
  float logprob = 0;                                 // when sampling.logprobs
  std::vector<std::pair<int32_t, float>> top;        // sampling.top_logprobs alternatives
  int32_t rank = 0;                                  // kPromptLogprobs: 1 + ids more likely; else 0
};

struct StreamEvent {
  /// kPromptLogprobs (sampling.prompt_logprobs >= 0): the logprobs of prompt tokens
  /// prompt_offset, prompt_offset + 1, ... (tokens[i].id is the prompt's token), each given the
  /// tokens before it. A sample gets them in order, from offset 1 to the prompt's end, before its
  /// first kTokens event.
  enum class Kind : uint8_t { kTokens, kFinished, kError, kPromptLogprobs };
  Kind kind = Kind::kTokens;
  int sample_index = 0;               // which of the n samples
  std::vector<SampledToken> tokens;   // kTokens: newly generated tokens of that sample
  int64_t prompt_offset = 0;          // kPromptLogprobs: the prompt index of tokens[0]
  std::string finish_reason;          // kFinished: "stop", "length", "cancelled"
  std::optional<std::string> stop_string;  // kFinished by a stop string: the one that matched
  int64_t prompt_tokens = 0;          // kFinished: usage
  int64_t completion_tokens = 0;      // kFinished: tokens of this sample
  int64_t cached_prompt_tokens = 0;   // kFinished: prompt tokens served from the prefix cache
  int64_t finish_index = 0;           // kFinished: samples this engine finished before this one
  Status error;                       // kError
};

/// A request's event queue. The engine pushes; exactly one consumer pops. After every sample
/// has finished (or an error), the stream is closed.
class RequestStream {
 public:
  void push(StreamEvent ev) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(ev));
    }
    cv_.notify_one();
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  /// Waits up to `timeout` for an event. Returns nullopt on timeout or when closed and drained.
  std::optional<StreamEvent> next(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !events_.empty() || closed_; });
    if (events_.empty()) return std::nullopt;
    StreamEvent ev = std::move(events_.front());
    events_.pop_front();
    return ev;
  }
  bool closed_and_drained() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_ && events_.empty();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  bool closed_ = false;
};

struct EngineStats {
  int64_t waiting = 0, running = 0;
  int64_t state_bytes_used = 0, state_bytes_capacity = 0;
  int64_t prompt_tokens_total = 0, generation_tokens_total = 0;
  int64_t prefix_cache_hit_tokens = 0, prefix_cache_queries = 0, preemptions = 0;
};

struct ModelInfo {
  std::string name;           // served model name
  int64_t vocab_size = 0;
  int64_t max_context = 0;    // prompt + generated tokens per sequence
  int32_t eos_token_id = 1;
};

class EngineClient {
 public:
  virtual ~EngineClient() = default;
  /// Validates and queues. kInvalidArgument (bad ids, params, too long), kResourceExhausted
  /// (queue full: the server answers 429), kUnavailable-style kCancelled when shutting down.
  virtual Result<std::shared_ptr<RequestStream>> submit(EngineRequest req) = 0;
  /// Cancels a running or waiting request; its state is freed at the next step boundary.
  virtual void cancel(const std::string& id) = 0;
  virtual EngineStats stats() const = 0;
  virtual const ModelInfo& model_info() const = 0;
};

}  // namespace deepinfer
