#include "sched/scheduler.h"

#include <algorithm>

namespace deepinfer {

Status SchedulerConfig::validate() const {
  if (max_batch_tokens < 1) return Status::invalid_argument("max_batch_tokens must be >= 1");
  if (max_running < 1) return Status::invalid_argument("max_running must be >= 1");
  if (max_waiting < 1) return Status::invalid_argument("max_waiting must be >= 1");
  if (target_step_ms < 0) return Status::invalid_argument("target_step_ms must be >= 0");
  if (chunk_align < 1) return Status::invalid_argument("chunk_align must be >= 1");
  return Status::ok();
}

StepPlan plan_step(const SchedulerConfig& cfg, const std::vector<SeqDemand>& seqs, const StepCostModel& cost) {
  StepPlan plan;
  plan.tokens.assign(seqs.size(), 0);
  double base_tokens = 0, base_ctx = 0;
  for (size_t i = 0; i < seqs.size() && plan.total < cfg.max_batch_tokens; ++i) {
    if (!seqs[i].decoding || seqs[i].pending <= 0) continue;
    plan.tokens[i] = 1;
    ++plan.total;
    base_tokens += 1;
    base_ctx += static_cast<double>(seqs[i].context) + 0.5;  // as the engine counts a token: context + n / 2
  }
  const double target_s = cfg.target_step_ms / 1e3;
  bool first_prefill = true;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqDemand& s = seqs[i];
    if (s.decoding || s.pending <= 0) continue;
    int64_t budget = cfg.max_batch_tokens - plan.total;
    if (target_s > 0) {
      const int64_t fit = cost.max_tokens_within(target_s, static_cast<double>(s.context), base_tokens, base_ctx);
      // The first prefill gets at least one block, so prefills progress even when the decodes
      // alone exceed the target (or the fitted fixed cost does).
      const int64_t floor = first_prefill ? cfg.chunk_align : 0;
      if (fit >= 0) budget = std::min(budget, std::max(fit, floor));
    }
    first_prefill = false;
    if (budget <= 0) break;
    int64_t n = std::min(budget, s.pending);
    if (cfg.chunk_align > 1) {
      // End the chunk on the last block boundary it crosses, so the state there can be cached;
      // the remainder runs next step. A chunk that crosses none is kept as it is.
      const int64_t end = (s.context + n) / cfg.chunk_align * cfg.chunk_align;
      if (end > s.context && end < s.context + n) n = end - s.context;
    }
    plan.tokens[i] = n;
    plan.total += n;
    base_tokens += static_cast<double>(n);
    base_ctx += static_cast<double>(n) * (static_cast<double>(s.context) + static_cast<double>(n) / 2);
  }
  return plan;
}

}  // namespace deepinfer
