// `deepinfer bench --engine`: decode throughput of the serving engine (src/engine) over a loaded
// model, with the overlapped step loop (EngineOptions::overlap) on and off in the same run.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "model/model.h"

namespace deepinfer::cli {

struct EngineBenchArgs {
  int64_t batch = 1, prompt_len = 64, gen_len = 32;
  std::string device = "cpu";
  bool warmup = false;  // one untimed pass first (graph captures, workspaces)
};

struct EngineBenchRun {
  // Steady state: the full-batch window, from the arrival of the last first token to the arrival
  // of the first last token (0 when there is none: --gen-len too short beside the prefills).
  double decode_tokens_per_s = 0;
  double decode_s = 0;
  int64_t decode_tokens = 0;
  double total_s = 0;  // submit to the last stream closed (prefill included)
};

struct EngineBenchResult {
  EngineBenchRun overlap, sync;
};

/// Submits `batch` requests (random prompts, max_tokens = gen_len, ignore_eos, greedy) to an
/// engine over a view of `model` (make_engine(model_view(model))), once with overlap off and once
/// on, and measures each run's steady decode rate from the streams' token events.
Result<EngineBenchResult> bench_engine(Model& model, const EngineBenchArgs& a);

}  // namespace deepinfer::cli
