// Engine: the serving engine over one model. Requests arrive through EngineClient::submit (any
// thread); one engine thread runs the step loop: admit (capacity first: state bytes), plan (decode
// first, then prefill chunks within the token budget and target step time), run one ragged
// forward, sample, post-process, stream events. Sequences that no longer fit are preempted and
// later recomputed: the CPU forward is bitwise invariant to batching and chunking, so a recomputed
// sequence continues exactly as it would have. Prompt prefixes are cached as state snapshots at
// block boundaries (kv/prefix_cache.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/engine_client.h"
#include "model/model.h"
#include "sched/scheduler.h"

namespace deepinfer {

struct EngineOptions {
  SchedulerConfig sched;
  int64_t state_capacity_bytes = int64_t{4} << 30;  // model state of all running sequences
  /// > 0: state_capacity_bytes sized from the model's device once it is loaded instead
  /// (engine/memory_budget.h: this share of the device's total, less what the weights and a
  /// warm-up prefill's workspaces use and the prefix cache); a model in host memory keeps
  /// state_capacity_bytes (logged). 0: off. At most 1.
  double gpu_memory_utilization = 0;
  int64_t prefix_cache_bytes = int64_t{512} << 20;  // 0 disables the prefix cache
  int64_t max_context = 65536;                      // prompt + generated tokens per sequence
  int threads = 0;                                  // CPU threads (0: all)
  std::string served_model_name;                    // default: the folder's name
  bool load_tokenizer = true;                       // tokenizer.json when present (stop strings)
  std::string device = "cpu";                       // "cpu" or "cuda": where the model runs (load_model)
  /// Sample on the model's device when it can (Model::samples_on_device) and no sequence of the
  /// step needs a grammar mask: only tokens and logprobs come back, not the logits.
  bool device_sampling = true;
  /// Overlapped step loop: when every sequence of a step samples on the device (device_sampling,
  /// no grammar mask, no penalties), step N+1 is planned and launched (Model::launch_sample)
  /// before step N is collected, its decoding sequences fed step N's tokens on the device, so the
  /// host's scheduling and post-processing overlap the device's work. Outputs are the same as
  /// with it off; a sequence that finishes at step N (EOS, stop) computes one token more that is
  /// discarded. Other steps run synchronously.
  bool overlap = true;
  /// Optional decorator around the loaded model (tracing, metrics, tests); must forward to it.
  std::function<std::unique_ptr<Model>(std::unique_ptr<Model>)> wrap_model;
  Status validate() const;
};

Result<std::unique_ptr<EngineClient>> make_engine(const std::string& model_dir, const EngineOptions& opts);

/// An engine over a model already loaded (a synthetic CUDA model in `deepinfer bench --engine`):
/// no tokenizer (stop strings are refused), the served name from opts.served_model_name
/// ("model" when empty); opts.device, threads, load_tokenizer are not used. wrap_model applies.
Result<std::unique_ptr<EngineClient>> make_engine(std::unique_ptr<Model> model, const EngineOptions& opts);

}  // namespace deepinfer
