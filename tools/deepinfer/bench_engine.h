// `deepinfer bench --engine`: decode throughput of the serving engine (src/engine) over a loaded
// model, with the overlapped step loop (EngineOptions::overlap) on and off in the same run; with
// --churn, also a run where requests finish at different steps and waiting ones take their slots.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"
#include "model/model.h"

namespace deepinfer::cli {

struct EngineBenchArgs {
  int64_t batch = 1, prompt_len = 64, gen_len = 32;
  std::string device = "cpu";
  bool warmup = false;  // one untimed pass first (graph captures, workspaces)
  int64_t churn = 0;    // > 0: also batch x churn requests of gen_len / 2 .. 3 gen_len / 2 tokens
};

struct EngineBenchRun {
  // Steady state: the full-batch window, from the arrival of the last first token to the arrival
  // of the first last token (0 when there is none: --gen-len too short beside the prefills).
  double decode_tokens_per_s = 0;
  double decode_s = 0;
  int64_t decode_tokens = 0;
  double total_s = 0;  // submit to the last stream closed (prefill included)
};

// The churn run: every request's tokens over the time from the first submit to the last token
// (prefills of the later arrivals included: what a serving engine delivers under turnover), and
// the inter-token latencies of all requests (the gaps between a request's token arrivals: an
// admission or a finish that stalls the step loop shows in the tail).
struct EngineChurnRun {
  int64_t requests = 0, tokens = 0;
  int64_t min_tokens = 0, max_tokens = 0;  // each request's max_tokens drawn from this range
  double total_s = 0, tokens_per_s = 0;
  double itl_p50_ms = 0, itl_p99_ms = 0, itl_max_ms = 0;
};

struct EngineBenchResult {
  EngineBenchRun overlap, sync;
  std::optional<EngineChurnRun> churn;
};

/// Submits `batch` requests (random prompts, max_tokens = gen_len, ignore_eos, greedy) to an
/// engine over a view of `model` (make_engine(model_view(model))), once with overlap off and once
/// on, and measures each run's steady decode rate from the streams' token events; churn > 0 adds
/// the churn run (EngineChurnRun).
Result<EngineBenchResult> bench_engine(Model& model, const EngineBenchArgs& a);

}  // namespace deepinfer::cli
