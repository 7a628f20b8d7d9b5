#include "bench_engine.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace deepinfer::cli {

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

EngineOptions engine_options(const Model& m, const EngineBenchArgs& a, int64_t max_gen) {
  EngineOptions eo;
  eo.device = a.device;
  eo.load_tokenizer = false;
  eo.prefix_cache_bytes = 0;  // random prompts share nothing
  eo.max_context = std::max<int64_t>(a.prompt_len + max_gen + 1, 2);
  eo.sched.max_running = a.batch;
  eo.sched.max_waiting = std::max<int64_t>(eo.sched.max_waiting, a.batch * std::max<int64_t>(a.churn, 1));
  // Room for every sequence at its full length: the bench measures decoding, not preemption.
  const v4::StateSizes& z = m.info().state;
  const double need = static_cast<double>(z.bytes_per_sequence) + z.bytes_per_token * static_cast<double>(eo.max_context);
  eo.state_capacity_bytes = std::max(eo.state_capacity_bytes, static_cast<int64_t>(need * 1.05) * a.batch);
  return eo;
}

// Submits one request per entry of max_tokens (random prompts of --prompt-len tokens, greedy,
// ignore_eos) and reads every stream to its end: each stream's token arrival times (stamped as
// read), after checking that each finished by length with all of its tokens.
Result<std::vector<std::vector<Clock::time_point>>> run_requests(EngineClient& engine, const Model& model,
                                                                 const EngineBenchArgs& a,
                                                                 const std::vector<int64_t>& max_tokens) {
  std::mt19937 rng(4321);
  std::uniform_int_distribution<int32_t> tok(2, static_cast<int32_t>(model.info().vocab_size - 1));
  std::vector<std::shared_ptr<RequestStream>> streams;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < max_tokens.size(); ++i) {
    EngineRequest r;
    r.id = "bench-" + std::to_string(i);
    r.prompt.resize(static_cast<size_t>(a.prompt_len));
    for (auto& t : r.prompt) t = tok(rng);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens[i];
    r.sampling.ignore_eos = true;
    r.sampling.seed = 1;
    DI_ASSIGN_OR_RETURN(auto s, engine.submit(std::move(r)));
    streams.push_back(std::move(s));
  }
  std::vector<std::vector<Clock::time_point>> at(streams.size());
  std::vector<bool> open(streams.size(), true);
  int64_t open_count = static_cast<int64_t>(streams.size());
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
      }
    }
    if (!any) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (size_t i = 0; i < at.size(); ++i)
    if (static_cast<int64_t>(at[i].size()) != max_tokens[i])
      return Status::internal("engine bench: request " + std::to_string(i) + " gave " + std::to_string(at[i].size()) +
                              " tokens, expected " + std::to_string(max_tokens[i]));
  return at;
}

Result<EngineBenchRun> run_once(Model& model, const EngineBenchArgs& a, bool overlap, int64_t gen_len) {
  EngineOptions eo = engine_options(model, a, gen_len);
  eo.overlap = overlap;
  DI_ASSIGN_OR_RETURN(std::unique_ptr<EngineClient> engine, make_engine(model_view(model), eo));
  const auto t0 = Clock::now();
  // The steady state is the full-batch window: from the arrival of the last first token (every
  // prefill done) to the arrival of the first last token (no sequence finished yet), so every step
  // in it decodes the whole batch. (The engine decodes first, so early sequences run beside later
  // prefills; a short --gen-len leaves no such window.)
  DI_ASSIGN_OR_RETURN(auto at, run_requests(*engine, model, a, std::vector<int64_t>(static_cast<size_t>(a.batch), gen_len)));
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

// Churn: batch x churn requests of --gen-len / 2 .. 3 --gen-len / 2 tokens (seeded) through
// --batch slots, overlap on, so sequences finish at different steps and waiting ones take their
// place while others decode (each admission makes a state, each finish frees one).
Result<EngineChurnRun> run_churn(Model& model, const EngineBenchArgs& a) {
  EngineChurnRun r;
  r.min_tokens = std::max<int64_t>(1, a.gen_len / 2), r.max_tokens = a.gen_len + a.gen_len / 2;
  std::mt19937 rng(977);
  std::uniform_int_distribution<int64_t> len(r.min_tokens, r.max_tokens);
  std::vector<int64_t> max_tokens(static_cast<size_t>(a.batch * a.churn));
  for (auto& m : max_tokens) m = len(rng);
  EngineOptions eo = engine_options(model, a, r.max_tokens);
  eo.overlap = true;
  DI_ASSIGN_OR_RETURN(std::unique_ptr<EngineClient> engine, make_engine(model_view(model), eo));
  const auto t0 = Clock::now();
  DI_ASSIGN_OR_RETURN(auto at, run_requests(*engine, model, a, max_tokens));
  r.requests = static_cast<int64_t>(max_tokens.size());
  Clock::time_point last = t0;
  std::vector<double> gaps;  // inter-token latencies (ms): a request's token arrivals after its first
  for (const auto& v : at) {
    r.tokens += static_cast<int64_t>(v.size());
    if (!v.empty()) last = std::max(last, v.back());
    for (size_t i = 1; i < v.size(); ++i) gaps.push_back(secs(v[i - 1], v[i]) * 1e3);
  }
  r.total_s = secs(t0, last);
  r.tokens_per_s = r.total_s > 0 ? static_cast<double>(r.tokens) / r.total_s : 0.0;
  if (!gaps.empty()) {
    std::sort(gaps.begin(), gaps.end());
    auto at_share = [&](double q) { return gaps[static_cast<size_t>(q * static_cast<double>(gaps.size() - 1))]; };
    r.itl_p50_ms = at_share(0.5), r.itl_p99_ms = at_share(0.99), r.itl_max_ms = gaps.back();
  }
  return r;
}

}  // namespace

Result<EngineBenchResult> bench_engine(Model& model, const EngineBenchArgs& a) {
  if (a.batch <= 0 || a.prompt_len <= 0 || a.gen_len < 2 || a.churn < 0)
    return Status::invalid_argument("--engine needs --batch > 0, --prompt-len > 0, --gen-len >= 2 and --churn >= 0");
  if (a.warmup) DI_TRY(run_once(model, a, true, std::min<int64_t>(a.gen_len, 4)).status());
  EngineBenchResult r;
  DI_ASSIGN_OR_RETURN(r.sync, run_once(model, a, false, a.gen_len));
  DI_ASSIGN_OR_RETURN(r.overlap, run_once(model, a, true, a.gen_len));
  if (a.churn > 0) {
    DI_ASSIGN_OR_RETURN(r.churn, run_churn(model, a));
  }
  return r;
}

}  // namespace deepinfer::cli
