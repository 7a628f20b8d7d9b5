#include "bench_engine.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "engine/engine.h"

namespace deepinfer::cli {

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

EngineOptions engine_options(const Model& m, const EngineBenchArgs& a) {
  EngineOptions eo;
  eo.device = a.device;
  eo.load_tokenizer = false;
  eo.prefix_cache_bytes = 0;  // random prompts share nothing
  eo.max_context = std::max<int64_t>(a.prompt_len + a.gen_len + 1, 2);
  eo.sched.max_running = a.batch;
  eo.sched.max_waiting = std::max<int64_t>(eo.sched.max_waiting, a.batch);
  // Room for every sequence at its full length: the bench measures decoding, not preemption.
  const v4::StateSizes& z = m.info().state;
  const double need = static_cast<double>(z.bytes_per_sequence) + z.bytes_per_token * static_cast<double>(eo.max_context);
  eo.state_capacity_bytes = std::max(eo.state_capacity_bytes, static_cast<int64_t>(need * 1.05) * a.batch);
  return eo;
}

Result<EngineBenchRun> run_once(Model& model, const EngineBenchArgs& a, bool overlap, int64_t gen_len) {
  EngineOptions eo = engine_options(model, a);
  eo.overlap = overlap;
  DI_ASSIGN_OR_RETURN(std::unique_ptr<EngineClient> engine, make_engine(model_view(model), eo));
  std::mt19937 rng(4321);
  std::uniform_int_distribution<int32_t> tok(2, static_cast<int32_t>(model.info().vocab_size - 1));
  std::vector<std::shared_ptr<RequestStream>> streams;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < a.batch; ++i) {
    EngineRequest r;
    r.id = "bench-" + std::to_string(i);
    r.prompt.resize(static_cast<size_t>(a.prompt_len));
    for (auto& t : r.prompt) t = tok(rng);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = gen_len;
    r.sampling.ignore_eos = true;
    r.sampling.seed = 1;
    DI_ASSIGN_OR_RETURN(auto s, engine->submit(std::move(r)));
    streams.push_back(std::move(s));
  }
  // The steady state is the full-batch window: from the arrival of the last first token (every
  // prefill done) to the arrival of the first last token (no sequence finished yet), so every step
  // in it decodes the whole batch. (The engine decodes first, so early sequences run beside later
  // prefills; a short --gen-len leaves no such window.) Tokens are stamped as they are read.
  const int64_t total = a.batch * gen_len;
  std::vector<std::vector<Clock::time_point>> at(streams.size());
  std::vector<bool> open(streams.size(), true);
  int64_t done = 0, open_count = static_cast<int64_t>(streams.size());
  while (open_count > 0) {
    if (secs(t0, Clock::now()) > 3600) return Status::internal("engine bench: no progress in an hour");
    bool any = false;
    for (size_t i = 0; i < streams.size(); ++i) {
      if (!open[i]) continue;
      while (auto ev = streams[i]->next(std::chrono::milliseconds(0))) {
        any = true;
        if (ev->kind == StreamEvent::Kind::kError) return ev->error;
        if (ev->kind == StreamEvent::Kind::kFinished) {
          if (ev->finish_reason != "length")
            return Status::internal("engine bench: a request finished with '" + ev->finish_reason + "'");
          open[i] = false, --open_count;
          break;
        }
        if (ev->kind != StreamEvent::Kind::kTokens) continue;
        at[i].insert(at[i].end(), ev->tokens.size(), Clock::now());
        done += static_cast<int64_t>(ev->tokens.size());
      }
    }
    if (!any) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (done != total) return Status::internal("engine bench: " + std::to_string(done) + " tokens, expected " + std::to_string(total));
  Clock::time_point t_start = at[0].front(), t_end = at[0].back();
  for (const auto& v : at) t_start = std::max(t_start, v.front()), t_end = std::min(t_end, v.back());
  EngineBenchRun r;
  r.total_s = secs(t0, Clock::now());
  if (t_end > t_start) {
    for (const auto& v : at)
      r.decode_tokens += std::count_if(v.begin(), v.end(), [&](Clock::time_point t) { return t > t_start && t <= t_end; });
    r.decode_s = secs(t_start, t_end);
  }
  r.decode_tokens_per_s = r.decode_s > 0 ? static_cast<double>(r.decode_tokens) / r.decode_s : 0.0;
  return r;
}

}  // namespace

Result<EngineBenchResult> bench_engine(Model& model, const EngineBenchArgs& a) {
  if (a.batch <= 0 || a.prompt_len <= 0 || a.gen_len < 2)
    return Status::invalid_argument("--engine needs --batch > 0, --prompt-len > 0 and --gen-len >= 2");
  if (a.warmup) DI_TRY(run_once(model, a, true, std::min<int64_t>(a.gen_len, 4)).status());
  EngineBenchResult r;
  DI_ASSIGN_OR_RETURN(r.sync, run_once(model, a, false, a.gen_len));
  DI_ASSIGN_OR_RETURN(r.overlap, run_once(model, a, true, a.gen_len));
  return r;
}

}  // namespace deepinfer::cli
