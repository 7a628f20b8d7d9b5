// Step planning (pure functions; the engine applies the plan). Each step: decode tokens first
// (one per decoding sequence), then prefill chunks in priority order within the token budget and,
// once the cost model is fitted, within the target step time (at least one block for the first
// prefill of a step, so a prefill always makes progress). A prefill chunk that crosses a
// prefix-cache block boundary ends on the last one it crosses, so the state there can be cached.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "sched/cost_model.h"

namespace deepinfer {

struct SchedulerConfig {
  int64_t max_batch_tokens = 2048;  // tokens fed per step
  int64_t max_running = 64;         // sequences holding state at once
  int64_t max_waiting = 4096;       // queue length before submit answers "full"
  /// Once the cost model is fitted, prefill chunks are cut so the predicted step time stays within
  /// this (bounding the inter-token latency of decoding sequences). 0: token budget only. The
  /// first prefill of a step always gets at least chunk_align tokens, so prefills are never
  /// starved when the decodes alone exceed the target.
  double target_step_ms = 0;
  int64_t chunk_align = 1;          // prefill chunk ends are aligned to multiples of this
  Status validate() const;
};

/// One running sequence as the planner sees it, in scheduling order (priority, then arrival).
struct SeqDemand {
  int64_t pending = 0;  // tokens known but not yet fed (1 when decoding)
  int64_t context = 0;  // tokens already in the state
  bool decoding = false;
};

struct StepPlan {
  std::vector<int64_t> tokens;  // per SeqDemand: tokens to feed this step (0 = skip)
  int64_t total = 0;
};

StepPlan plan_step(const SchedulerConfig& cfg, const std::vector<SeqDemand>& seqs, const StepCostModel& cost);

/// Ordering key for admission and preemption: higher priority first, then earlier arrival.
struct SchedKey {
  int priority = 0;
  uint64_t arrival = 0;
  bool before(const SchedKey& o) const { return priority != o.priority ? priority > o.priority : arrival < o.arrival; }
};

}  // namespace deepinfer
