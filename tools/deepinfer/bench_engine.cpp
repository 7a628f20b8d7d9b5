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
  // The steady state starts once every sequence has its first token (every prefill is done; a
  // generated-token count would start it while later prompts still prefill beside early decodes)
  // and ends at the last token. The streams are read as the tokens arrive.
  const int64_t total = a.batch * gen_len;
  std::vector<int64_t> got(streams.size(), 0);
  std::vector<bool> open(streams.size(), true);
  int64_t have_first = 0, done = 0, after_first = 0, open_count = static_cast<int64_t>(streams.size());
  Clock::time_point t_first, t_last;
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
        const auto now = Clock::now();
        const int64_t n = static_cast<int64_t>(ev->tokens.size());
        if (got[i] == 0 && ++have_first == a.batch) t_first = now;
        else if (have_first == a.batch) after_first += n;
        got[i] += n, done += n;
        t_last = now;
      }
    }
    if (!any) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (done != total) return Status::internal("engine bench: " + std::to_string(done) + " tokens, expected " + std::to_string(total));
  const int64_t first_count = total - after_first;
  EngineBenchRun r;
  r.total_s = secs(t0, Clock::now());
  r.decode_tokens = total - first_count;
  r.decode_s = secs(t_first, t_last);
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
