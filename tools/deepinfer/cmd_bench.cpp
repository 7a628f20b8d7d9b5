// `deepinfer bench MODEL_DIR` / `deepinfer bench --synthetic v4-flash[:LAYERS[:EXPERTS]]`:
// prefill and decode throughput of the model (through deepinfer::Model, on --device cpu or cuda)
// on a real or tiny checkpoint, or (cuda only) on a synthetic V4-Flash with the real shapes and
// random weights generated on the device (v4::flash_config + synthetic_cuda_model), with the
// memory floor next to it: on cpu every checkpoint byte over the measured host copy bandwidth; on
// cuda DecodeBytes (dense weights once, the batch's expected distinct routed experts, the state
// read at the mean decode context) over the device copy bandwidth measured in the same run.
// On cuda prefill gets a compute floor too: batch x v4::prefill_flops(prompt) (every token's
// linears, attention over its window and compressed rows, the CSA indexer's scores, the head
// once per prompt) over the FP8 tensor rate measured in the same run (cuda_fp8_tflops: the
// cuBLASLt block-scaled FP8 GEMM at 8192^3), with the share of that rate the prefill reached.
// Prompts prefill in chunks (--prefill-chunk); on cuda one-time costs are taken untimed first
// (--no-warmup: none). --fill-state: decode only, each sequence's state filled with random entries
// of --prompt-len tokens (Model::fill_synthetic_state) instead of prefilled, so long contexts at
// large batches cost no prefill (their prefill is neither run nor reported). Prints a table and
// optionally writes JSON for bench/results/.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include "backend/registry.h"
#include "bench_engine.h"
#include "commands.h"
#include "device_flag.h"
#include "model/deepseek_v4/flash_config.h"
#include "model/device_models.h"
#include "model/model.h"

namespace deepinfer::cli {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Single-thread-per-core memcpy bandwidth over a buffer larger than the caches (GB/s).
double measure_copy_bandwidth(ThreadPool& pool) {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now_s();
    pool.parallel_for(static_cast<int64_t>(bytes >> 20), 1, [&](int64_t i0, int64_t i1) {
      std::memcpy(b.data() + (i0 << 20), a.data() + (i0 << 20), static_cast<size_t>(i1 - i0) << 20);
    });
    const double dt = now_s() - t0;
    best = std::max(best, 2.0 * bytes / dt / 1e9);  // read + write
  }
  return best;
}

struct BenchArgs {
  std::string model_dir, synthetic, json_out;
  uint64_t seed = 1;
  int64_t prompt_len = 64, gen_len = 32, batch = 1;
  int threads = 0;
  bool warmup = true;
  int64_t prefill_chunk = 8192;
  int64_t churn = 0;  // --engine --churn N: also N requests a slot, finishing at different steps
  std::string device = "cpu";
  CudaTuning tuning;  // --moe-group-rows, --profile
  bool host_sampling = false;  // cuda: decode logits to the host (else greedy sampling on the device)
  bool engine = false;         // also the serving engine's decode rate, overlap on and off
  bool fill_state = false;     // decode only: states filled synthetically, no prefill
  std::string floors;          // "GB/s,FP8 TFLOP/s,bf16 TFLOP/s": print the parts' floors at these rates, run nothing
};

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "deepinfer bench: error: %s\n", msg.c_str());
  return 2;
}

// The context a decode step's floor is taken at: the prompt plus half the generated tokens.
int64_t decode_context(const BenchArgs& a) { return a.prompt_len + a.gen_len / 2; }

struct Rates {
  double bytes_per_s, fp8_flops_per_s, bf16_flops_per_s;
};

// A part's floor at `r`: {floor_ms, floor_bytes, floor_fp8_flops, floor_bf16_flops}.
nlohmann::json floor_json(const v4::DecodePartFloor& f, const Rates& r) {
  return {{"floor_ms", f.floor_s(r.bytes_per_s, r.fp8_flops_per_s, r.bf16_flops_per_s) * 1e3},
          {"floor_bytes", f.bytes()},
          {"floor_fp8_flops", f.fp8_flops},
          {"floor_bf16_flops", f.bf16_flops}};
}

// Prints `t`'s parts (ms = seconds x `per`) under `title`, each with its floor where `floors` has
// the part; returns them as JSON rows ({part, ms[, floor_ms, x_floor, floor_bytes, ...]}).
nlohmann::json print_parts(const char* title, const StepTimes& t, double per,
                           const std::vector<v4::DecodePartFloor>& floors, const Rates& r) {
  nlohmann::json rows = nlohmann::json::array();
  if (t.parts_s.empty()) return rows;
  double sum = 0;
  for (const auto& [name, s] : t.parts_s) sum += s;
  std::printf("%s; floor: bytes / %.0f GB/s or FLOPs / %.0f FP8, %.0f bf16 TFLOP/s):\n", title, r.bytes_per_s / 1e9,
              r.fp8_flops_per_s / 1e12, r.bf16_flops_per_s / 1e12);
  for (const auto& [name, s] : t.parts_s) {
    nlohmann::json row{{"part", name}, {"ms", s * per}};
    const auto f = std::find_if(floors.begin(), floors.end(), [&](const v4::DecodePartFloor& x) { return x.part == name; });
    const nlohmann::json fj = f == floors.end() ? nlohmann::json::object() : floor_json(*f, r);
    const double floor = fj.value("floor_ms", 0.0);
    if (floor > 0) {
      std::printf("  %-58s %9.3f ms  %5.1f%%  floor %8.3f ms  %6.1fx\n", name.c_str(), s * per,
                  sum > 0 ? 100 * s / sum : 0.0, floor, s * per / floor);
      row.update(fj);
      row["x_floor"] = s * per / floor;
    } else {
      std::printf("  %-58s %9.3f ms  %5.1f%%\n", name.c_str(), s * per, sum > 0 ? 100 * s / sum : 0.0);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// --floors: the floor of each part of a decode step (at the decode floor's context) and of the
// prefill of the --synthetic shape at the given rates, from its config alone (no device, no run).
int run_floors(const BenchArgs& a, const v4::V4Config& c, const std::string& model_name) {
  double gbs = 0, fp8 = 0, bf16 = 0;
  char tail = 0;
  if (std::sscanf(a.floors.c_str(), "%lf,%lf,%lf%c", &gbs, &fp8, &bf16, &tail) != 3 || gbs <= 0 || fp8 <= 0 || bf16 <= 0)
    return usage_error("--floors takes GB/s,FP8 TFLOP/s,bf16 TFLOP/s (three positive numbers), not '" + a.floors + "'");
  const Rates r{gbs * 1e9, fp8 * 1e12, bf16 * 1e12};
  const int64_t context = decode_context(a);
  nlohmann::json j{{"model", model_name}, {"batch", a.batch}, {"prompt_len", a.prompt_len}, {"gen_len", a.gen_len},
                   {"copy_bandwidth_gb_s", gbs}, {"fp8_tflops", fp8}, {"bf16_tflops", bf16}};
  auto show = [&](const char* phase, const std::vector<v4::DecodePartFloor>& parts) {
    nlohmann::json rows = nlohmann::json::array();
    double total = 0;
    for (const auto& f : parts) {
      nlohmann::json row = floor_json(f, r);
      row["part"] = f.part;
      total += row["floor_ms"].get<double>();
      std::printf("  %-58s %10.1f MB %10.1f GFLOP FP8 %10.1f GFLOP bf16  floor %9.3f ms\n", std::string(f.part).c_str(),
                  f.bytes() / 1e6, f.fp8_flops / 1e9, f.bf16_flops / 1e9, row["floor_ms"].get<double>());
      rows.push_back(std::move(row));
    }
    std::printf("  %-58s %65s %9.3f ms\n", "all parts", "", total);
    j[phase] = {{"parts", rows}, {"floor_ms", total}};
  };
  std::printf("model %s, batch %lld; floors at %.0f GB/s, %.0f FP8 and %.0f bf16 TFLOP/s\n", model_name.c_str(),
              (long long)a.batch, gbs, fp8, bf16);
  std::printf("decode step at context %lld, by part:\n", (long long)context);
  show("decode", v4::decode_part_floors(c, a.batch, context));
  std::printf("prefill of %lld x %lld tokens, by part:\n", (long long)a.batch, (long long)a.prompt_len);
  show("prefill", v4::prefill_part_floors(c, a.batch, a.prompt_len));
  j["decode"]["context"] = context;
  if (!a.json_out.empty()) {
    std::ofstream f(a.json_out);
    f << j.dump(1) << "\n";
    if (!f) return std::fprintf(stderr, "deepinfer: error: cannot write %s\n", a.json_out.c_str()), 1;
  }
  return 0;
}

int run_bench(const BenchArgs& a) {
  if (a.prompt_len <= 0 || a.gen_len < 0 || a.batch <= 0 || a.prefill_chunk <= 0)
    return usage_error("--prompt-len, --batch and --prefill-chunk must be > 0, --gen-len >= 0");
  if (a.engine && a.gen_len < 2) return usage_error("--engine needs --gen-len >= 2");
  if (a.churn < 0 || (a.churn > 0 && !a.engine)) return usage_error("--churn N (N >= 1) applies to --engine");
  if (a.fill_state && (a.engine || a.gen_len < 1))
    return usage_error("--fill-state times decode steps only: it needs --gen-len >= 1 and no --engine");
  if (Status t = a.tuning.check(); !t.is_ok()) return usage_error(std::string(t.message()));
  const bool synthetic = !a.synthetic.empty();
  if (synthetic == !a.model_dir.empty())
    return usage_error("give either MODEL_DIR or --synthetic v4-flash[:LAYERS[:EXPERTS]] (not both)");
  if (!a.floors.empty() && !synthetic) {  // a DeepSeek-V4 checkpoint's config.json, in its published formats
    std::ifstream in(a.model_dir + "/config.json");
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!in || j.is_discarded())
      return std::fprintf(stderr, "deepinfer: error: %s/config.json: missing or not JSON\n", a.model_dir.c_str()), 1;
    auto cfg = v4::V4Config::from_json(j, a.model_dir + "/config.json");
    if (!cfg.is_ok()) return std::fprintf(stderr, "deepinfer: error: %s\n", cfg.status().to_string().c_str()), 1;
    return run_floors(a, *cfg, a.model_dir);
  }
  v4::FlashSpec spec;
  if (synthetic) {
    auto sp = v4::parse_flash_spec(a.synthetic);
    if (!sp.is_ok()) return usage_error(std::string(sp.status().message()));
    spec = *sp;
    if (!a.floors.empty()) {
      auto cfg = v4::flash_config(spec.layers, spec.experts);
      if (!cfg.is_ok()) return usage_error(std::string(cfg.status().message()));
      return run_floors(a, *cfg, a.synthetic);
    }
    if (a.device != "cuda")
      return usage_error("--synthetic generates the weights on the GPU: it needs --device cuda");
  }
  BackendConfig bc;
  bc.num_threads = a.threads;
  auto backend = Backend::create(bc);
  if (!backend.is_ok()) return std::fprintf(stderr, "deepinfer: error: %s\n", backend.status().to_string().c_str()), 1;
  if (int rc = check_device_flag("bench", a.device)) return rc;
  const bool cpu = a.device == "cpu";
  const CudaTuning untuned;
  if (cpu && (a.tuning != untuned || a.host_sampling || a.fill_state))
    return usage_error("--moe-group-rows, --moe-wide-rows, --no-moe-wgmma, --moe-wgmma-exact, --no-moe-fp8, --moe-fp8-max-rows, --moe-split-k, "
                       "--route-gemm-rows, --fp8-wgmma-rows, --fp8-wgmma-max-rows, --attn-heads-per-block, --no-attn-wgmma, --no-act-pack, --no-lt-timed, "
                       "--profile, --host-sampling and --fill-state apply to --device cuda");
  // The device bandwidth before the model takes the memory (two 1 GiB buffers).
  const double bw = cpu ? measure_copy_bandwidth((*backend)->pool()) : cuda_copy_bandwidth_gb_s();
  // cuda: the FP8 tensor rate of the prefill floor, also before the model loads (~0.5 GB).
  const double fp8_tflops = cpu ? 0.0 : cuda_fp8_tflops();
  // --profile: the bf16 rate too, for the floors of the parts (decode_part_floors).
  const double bf16_tflops = cpu || !a.tuning.profile ? 0.0 : cuda_bf16_tflops();
  LoadOptions lo;
  lo.device = a.device;
  Result<std::unique_ptr<Model>> model = Status::internal("no model");
  std::string model_name = a.model_dir;
  if (synthetic) {
    auto cfg = v4::flash_config(spec.layers, spec.experts);
    if (!cfg.is_ok()) return usage_error(std::string(cfg.status().message()));
    model_name = "synthetic V4-Flash, " + std::to_string(spec.layers) + " of 43 layers, " +
                 std::to_string(spec.experts) + " of 256 experts";
    model = synthetic_cuda_model(*cfg, a.seed, lo);
  } else {
    model = load_model(a.model_dir, **backend, lo);
  }
  if (!model.is_ok()) return std::fprintf(stderr, "deepinfer: error: %s\n", model.status().to_string().c_str()), 1;
  Model& m = **model;
  if (!cpu) {
    Status t = cuda_set_tuning(m, a.tuning);
    if (!t.is_ok()) return usage_error(std::string(t.message()));
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(2, static_cast<int32_t>(m.info().vocab_size - 1));
  std::vector<std::vector<int32_t>> prompts(a.batch);
  for (auto& p : prompts) {
    p.resize(a.prompt_len);
    for (auto& t : p) t = tok(rng);
  }
  // Prefill: each prompt in forwards of at most --prefill-chunk tokens (the engine's chunked
  // prefill; the activations of a whole batch of long prompts would not fit at once). Then
  // gen_len decode steps of the whole batch. On cuda the one-time costs (workspace growth,
  // cuBLASLt plans, decode graph capture) are taken untimed first: one chunk on a throwaway state
  // and 2 decode steps before the timed ones (--no-warmup: none).
  const bool warm = !cpu && a.warmup;
  double prefill_s = 0, decode_s = 0;
  StepTimes prefill_parts;  // --profile: the timed prefill's device time by part
  auto run = [&]() -> Status {
    v4::ForwardOutput out;
    out.allow_lent_logits = true;  // as the engine: a CUDA model's pinned logits, no copy into `out`
    if (warm) {
      std::unique_ptr<ModelState> w = m.new_state();
      if (!w) return Status::resource_exhausted("no memory for sequence state");
      ModelInput in{w.get(), std::span<const int32_t>(prompts[0]).first(std::min(a.prompt_len, a.prefill_chunk)), false};
      DI_TRY(m.forward(std::span<const ModelInput>(&in, 1), out));
    }
    std::vector<std::unique_ptr<ModelState>> states;
    std::vector<ModelInput> batch;
    if (!cpu && a.tuning.profile) (void)cuda_step_times(m, true);  // the timed prefill's parts only
    // With no decode steps the profiler's span ("from start off") is the timed prefill instead.
    const bool prefill_span = !cpu && a.gen_len == 0;
    if (prefill_span) cuda_profiler_range(true);
    const double t0 = now_s();
    for (auto& p : prompts) {
      states.push_back(m.new_state());
      if (!states.back()) return Status::resource_exhausted("no memory for sequence state");
      if (a.fill_state) {
        DI_TRY(m.fill_synthetic_state(*states.back(), a.prompt_len, a.seed + 1000 * states.size()));
        batch.push_back({states.back().get(), {}, false});
        continue;
      }
      for (int64_t at = 0; at < a.prompt_len; at += a.prefill_chunk) {
        ModelInput in{states.back().get(),
                      std::span<const int32_t>(p).subspan(at, std::min(a.prefill_chunk, a.prompt_len - at)), false};
        DI_TRY(m.forward(std::span<const ModelInput>(&in, 1), out));
      }
      batch.push_back({states.back().get(), {}, false});
    }
    prefill_s = now_s() - t0;
    if (prefill_span) cuda_profiler_range(false);
    if (!cpu && a.tuning.profile) {
      auto t = cuda_step_times(m, false);
      if (t.is_ok()) prefill_parts = *t;
    }
    std::vector<int32_t> next(a.batch);
    const int64_t untimed = warm ? std::min<int64_t>(a.gen_len, 2) : 0;
    // As the engine: a model that samples on its device does (greedy rows here), else the logits
    // come to the host (lent, pinned).
    const bool on_device = m.samples_on_device() && !a.host_sampling;
    const SamplingParams greedy{.temperature = 0.0f, .seed = 1};
    std::vector<SampleRow> rows(static_cast<size_t>(a.batch), SampleRow{.params = &greedy});
    std::vector<SampleResult> sampled;
    for (int64_t step = 0; step < untimed + a.gen_len; ++step) {
      for (int64_t b = 0; b < a.batch; ++b) {
        next[b] = tok(rng);
        batch[b].tokens = std::span<const int32_t>(&next[b], 1);
      }
      if (!cpu && step == untimed) {
        (void)cuda_step_times(m, true);  // the timed steps' parts only
        cuda_profiler_range(true);       // a profiler started with "from start off" records these steps
      }
      const double t1 = now_s();
      DI_TRY(on_device ? m.forward_sample(batch, rows, sampled) : m.forward(batch, out));
      if (step >= untimed) decode_s += now_s() - t1;
    }
    if (!cpu) cuda_profiler_range(false);
    return Status::ok();
  };
  Status s = run();
  if (!s.is_ok()) return std::fprintf(stderr, "deepinfer: error: %s\n", s.to_string().c_str()), 1;
  const double step_ms = a.gen_len ? decode_s / a.gen_len * 1e3 : 0;
  const double prefill_tps = a.fill_state ? 0.0 : a.batch * a.prompt_len / prefill_s;
  const double decode_tps = a.gen_len ? a.batch * a.gen_len / decode_s : 0;
  // cpu: a decode step reads every checkpoint byte once (an upper bound on bytes, so a lower
  // bound on time). cuda: DecodeBytes at the mean context of the decode steps.
  double floor_bytes = 0;
  DecodeBytes db;
  std::string floor_counts;
  if (cpu) {
    auto ck = Checkpoint::open(a.model_dir);
    if (ck.is_ok())
      for (const auto& t : ck->tensors()) floor_bytes += static_cast<double>(t.info->end - t.info->begin);
    floor_counts = "every checkpoint byte once";
  } else {
    auto r = cuda_decode_bytes(m, a.batch, decode_context(a));
    if (!r.is_ok()) return std::fprintf(stderr, "deepinfer: error: %s\n", r.status().to_string().c_str()), 1;
    db = *r;
    floor_bytes = db.total();
    floor_counts = "dense weights once (not the embedding), expected distinct routed experts per layer, state read "
                   "(window rings, compressed KV kept, indexer keys) at context " +
                   std::to_string(decode_context(a)) + "; not activations, logits or launch gaps";
  }
  // cuda: prefill's compute floor, batch x the FLOPs of one prompt over the measured FP8 rate
  // (none when the rate could not be measured, or with --fill-state: no prefill ran).
  v4::PrefillFlops pf;
  double prefill_floor_ms = 0;
  if (!cpu) {
    auto r = cuda_prefill_flops(m, a.prompt_len);
    if (!r.is_ok()) return std::fprintf(stderr, "deepinfer: error: %s\n", r.status().to_string().c_str()), 1;
    pf = *r;
    if (fp8_tflops > 0 && !a.fill_state)
      prefill_floor_ms = static_cast<double>(a.batch) * pf.total() / (fp8_tflops * 1e12) * 1e3;
  }
  StepTimes parts;
  if (!cpu && a.gen_len > 0) {
    auto t = cuda_step_times(m, false);
    if (t.is_ok()) parts = *t;
  }
  // --engine: the same batch through the serving engine (after the model's own timings were read).
  std::optional<EngineBenchResult> eng;
  if (a.engine) {
    auto r = bench_engine(m, {a.batch, a.prompt_len, a.gen_len, a.device, warm, a.churn});
    if (!r.is_ok()) return std::fprintf(stderr, "deepinfer: error: engine bench: %s\n", r.status().to_string().c_str()), 1;
    eng = *r;
  }
  const double floor_ms = bw > 0 ? floor_bytes / (bw * 1e9) * 1e3 : 0.0;
  std::printf("model %s, device %s, %d threads, batch %lld, prompt %lld, gen %lld\n", model_name.c_str(),
              a.device.c_str(), (*backend)->pool().size(), (long long)a.batch, (long long)a.prompt_len,
              (long long)a.gen_len);
  if (a.fill_state)
    std::printf("prefill  none: states filled with random entries of %lld tokens (--fill-state, %.3f s)\n",
                (long long)a.prompt_len, prefill_s);
  else if (prefill_floor_ms > 0)
    std::printf("prefill  %10.1f tokens/s  (%.3f s); floor %.3f ms (%.1f GFLOP / %.1f TFLOP/s) = %.2fx floor, "
                "%.1f%% of the FP8 rate\n",
                prefill_tps, prefill_s, prefill_floor_ms, static_cast<double>(a.batch) * pf.total() / 1e9, fp8_tflops,
                prefill_s * 1e3 / prefill_floor_ms, 100 * prefill_floor_ms / (prefill_s * 1e3));
  else
    std::printf("prefill  %10.1f tokens/s  (%.3f s)\n", prefill_tps, prefill_s);
  std::printf("decode   %10.1f tokens/s  step %.3f ms; memory floor %.3f ms (%.1f MB / %.1f GB/s) = %.2fx floor\n",
              decode_tps, step_ms, floor_ms, floor_bytes / 1e6, bw, floor_ms > 0 ? step_ms / floor_ms : 0.0);
  if (!cpu)
    std::printf("floor bytes: dense %.1f MB + routed experts %.1f MB + state %.1f MB (%s)\n", db.dense / 1e6,
                db.experts / 1e6, db.state / 1e6, floor_counts.c_str());
  const double per = parts.steps ? 1e3 / static_cast<double>(parts.steps) : 0.0;
  const bool device_sampling = !cpu && !a.host_sampling && m.samples_on_device();
  const std::string sampling_part = device_sampling ? "greedy sampling on the device + tokens to host" : "logits to host";
  if (parts.steps)
    std::printf("decode step parts: host preparation %.3f ms, device %.3f ms, %s %.3f ms "
                "(%lld of %lld steps launched from a CUDA graph, %lld captured in them, graphs dropped %lld times)\n",
                parts.host_s * per, parts.device_s * per, sampling_part.c_str(), parts.logits_s * per,
                (long long)parts.graph_steps, (long long)parts.steps, (long long)parts.captures,
                (long long)parts.graph_drops);
  if (eng)
    std::printf("engine   %10.1f tokens/s decode with overlap, %.1f tokens/s without (%.2fx); full-batch window "
                "(every prefill done, no sequence finished), %lld and %lld tokens%s\n",
                eng->overlap.decode_tokens_per_s, eng->sync.decode_tokens_per_s,
                eng->sync.decode_tokens_per_s > 0 ? eng->overlap.decode_tokens_per_s / eng->sync.decode_tokens_per_s : 0.0,
                (long long)eng->overlap.decode_tokens, (long long)eng->sync.decode_tokens,
                eng->overlap.decode_tokens && eng->sync.decode_tokens ? "" : " (no such window: raise --gen-len)");
  if (eng && eng->churn)
    std::printf("churn    %10.1f tokens/s with overlap: %lld requests of %lld-%lld tokens through %lld slots, %lld tokens "
                "in %.3f s (prefills included); inter-token latency p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
                eng->churn->tokens_per_s, (long long)eng->churn->requests, (long long)eng->churn->min_tokens,
                (long long)eng->churn->max_tokens, (long long)a.batch, (long long)eng->churn->tokens,
                eng->churn->total_s, eng->churn->itl_p50_ms, eng->churn->itl_p99_ms, eng->churn->itl_max_ms);
  // Each part's floor (v4::decode_part_floors / prefill_part_floors: its bytes over the copy rate
  // or its FLOPs over the FP8 / bf16 rates measured in this run).
  const Rates rates{bw * 1e9, fp8_tflops * 1e12, bf16_tflops * 1e12};
  std::vector<v4::DecodePartFloor> decode_floors, prefill_floors;
  if (auto cfg = cuda_v4_config(m); !cpu && cfg.is_ok()) {
    decode_floors = v4::decode_part_floors(*cfg, a.batch, decode_context(a));
    prefill_floors = v4::prefill_part_floors(*cfg, a.batch, a.prompt_len);
  }
  const nlohmann::json prefill_profile = print_parts(
      "prefill time by part (--profile: eager, synchronised per part; ms for the whole prefill, share", prefill_parts,
      1e3, prefill_floors, rates);
  const nlohmann::json profile = print_parts(
      "decode time by part (host preparation; with --profile the device too, eager and synchronised per part; ms per "
      "step, share",
      parts, per, decode_floors, rates);
  if (!a.json_out.empty()) {
    nlohmann::json j{{"model_dir", a.model_dir},
                     {"model", model_name},
                     {"backend", a.device},
                     {"threads", (*backend)->pool().size()},
                     {"hardware_concurrency", std::thread::hardware_concurrency()},
                     {"batch", a.batch},
                     {"prompt_len", a.prompt_len},
                     {"gen_len", a.gen_len},
                     {"prefill_tokens_per_s", a.fill_state ? nlohmann::json(nullptr) : nlohmann::json(prefill_tps)},
                     {"fill_state", a.fill_state},
                     {"decode_tokens_per_s", decode_tps},
                     {"decode_step_ms", step_ms},
                     {"weight_bytes", cpu ? floor_bytes : db.weights},
                     {"copy_bandwidth_gb_s", bw},
                     {"decode_floor_ms", floor_ms},
                     {"decode_floor_bytes", floor_bytes},
                     {"decode_floor_counts", floor_counts},
                     {"decode_step_parts_ms",
                      {{"host", parts.host_s * per},
                       {"device", parts.device_s * per},
                       {device_sampling ? "device_sampling" : "logits_to_host", parts.logits_s * per},
                       {"graph_steps", parts.graph_steps},
                       {"graph_captures", parts.captures},
                       {"graph_drops", parts.graph_drops},
                       {"steps", parts.steps}}},
                     {"warmup", warm},
                     {"prefill_chunk", a.prefill_chunk},
                     {"moe_group_rows", a.tuning.moe_group_rows},
                     {"moe_wide_rows", a.tuning.moe_wide_rows},
                     {"moe_wgmma", a.tuning.moe_wgmma},
                     {"moe_wgmma_exact", a.tuning.moe_wgmma_exact},
                     {"moe_fp8", a.tuning.moe_fp8},
                     {"moe_fp8_max_rows", a.tuning.moe_fp8_max_rows},
                     {"moe_split_k", a.tuning.moe_split_k},
                     {"route_gemm_rows", a.tuning.route_gemm_rows},
                     {"fp8_wgmma_rows", a.tuning.fp8_wgmma_rows},
                     {"fp8_wgmma_max_rows", a.tuning.fp8_wgmma_max_rows},
                     {"attn_heads_per_block", a.tuning.attn_heads_per_block},
                     {"attn_wgmma", a.tuning.attn_wgmma},
                     {"attn_split", a.tuning.attn_split},
                     {"bf16_gemv_max_n", a.tuning.bf16_gemv_max_n},
                     {"act_pack", a.tuning.act_pack},
                     {"hc_post_partial", a.tuning.hc_post_partial},
                     {"lt_timed", a.tuning.lt_timed},
                     {"sampling", device_sampling ? "device (greedy)" : "host (logits copied)"},
                     {"decode_profile_ms", profile},
                     {"prefill_profile_ms", prefill_profile},
                     {"devices", list_devices()}};
    if (eng) {
      auto run_json = [](const EngineBenchRun& r) {
        return nlohmann::json{{"decode_tokens_per_s", r.decode_tokens_per_s}, {"decode_s", r.decode_s},
                              {"decode_tokens", r.decode_tokens}, {"total_s", r.total_s}};
      };
      j["engine_decode_tokens_per_s"] = eng->overlap.decode_tokens_per_s;
      j["engine_decode_tokens_per_s_no_overlap"] = eng->sync.decode_tokens_per_s;
      j["engine_overlap_applies"] = m.samples_on_device();  // else both runs are synchronous
      j["engine"] = {{"overlap", run_json(eng->overlap)}, {"no_overlap", run_json(eng->sync)}};
      if (eng->churn)
        j["engine"]["churn"] = {{"requests", eng->churn->requests},     {"tokens", eng->churn->tokens},
                                {"total_s", eng->churn->total_s},       {"tokens_per_s", eng->churn->tokens_per_s},
                                {"itl_p50_ms", eng->churn->itl_p50_ms}, {"itl_p99_ms", eng->churn->itl_p99_ms},
                                {"itl_max_ms", eng->churn->itl_max_ms}};
    }
    if (synthetic) j["synthetic"] = {{"spec", a.synthetic}, {"layers", spec.layers}, {"experts", spec.experts},
                                     {"seed", a.seed}};
    if (!cpu) j["decode_floor_parts"] = {{"dense_bytes", db.dense}, {"expert_bytes", db.experts},
                                         {"state_bytes", db.state}};
    // Prefill floor (cuda; null on cpu or when the rate was not measured): prefill_flops is one
    // prompt's, the floor batch x that over fp8_tflops.
    j["fp8_tflops"] = fp8_tflops > 0 ? nlohmann::json(fp8_tflops) : nlohmann::json(nullptr);
    j["bf16_tflops"] = bf16_tflops > 0 ? nlohmann::json(bf16_tflops) : nlohmann::json(nullptr);
    j["prefill_flops"] = cpu ? nlohmann::json(nullptr) : nlohmann::json(pf.total());
    j["prefill_floor_ms"] = prefill_floor_ms > 0 ? nlohmann::json(prefill_floor_ms) : nlohmann::json(nullptr);
    if (!cpu)
      j["prefill_flops_parts"] = {{"linear", pf.linear}, {"attention", pf.attention}, {"indexer", pf.indexer},
                                  {"head", pf.head}};
    std::ofstream(a.json_out) << j.dump(2) << '\n';
  }
  return 0;
}

}  // namespace

void register_bench_commands(CLI::App& app, Registry& reg) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* b = app.add_subcommand("bench", "prefill and decode throughput on a checkpoint or a synthetic V4-Flash");
  b->add_option("model_dir", a->model_dir, "model folder (or --synthetic)");
  b->add_option("--synthetic", a->synthetic,
                "no checkpoint: V4-Flash shapes with random weights made on the GPU (needs --device cuda): "
                "v4-flash[:LAYERS[:EXPERTS]] (LAYERS 1..43, default 4; EXPERTS 1..256, default 256) or "
                "v4-flash-ep8 (43 layers, 32 experts)");
  b->add_option("--seed", a->seed, "seed of the synthetic weights");
  b->add_option("--prefill-chunk", a->prefill_chunk, "most prompt tokens per prefill forward");
  b->add_flag("!--no-warmup", a->warmup, "--device cuda: time the first pass too (no untimed warm-up pass)");
  b->add_option("--prompt-len", a->prompt_len, "prompt tokens per sequence");
  b->add_option("--gen-len", a->gen_len, "decode steps");
  b->add_flag("--fill-state", a->fill_state,
              "decode only: each sequence's state filled with random entries of --prompt-len tokens instead of "
              "prefilled (long contexts at large batches without their prefill; the CUDA model)");
  b->add_option("--batch", a->batch, "sequences decoded together");
  b->add_option("--threads", a->threads, "CPU threads (0: all)");
  add_device_option(b, a->device);
  b->add_option("--moe-group-rows", a->tuning.moe_group_rows,
                "--device cuda: rows per routed-expert group, 16, 32 or 64 (0: the default, 16)");
  b->add_option("--moe-wide-rows", a->tuning.moe_wide_rows,
                "--device cuda: routed rows (tokens x top-k) of a forward from which the wide expert kernels run "
                "(0: the default, 1 where the experts take the FP8 kernels, else 32; -1: never)");
  b->add_flag("!--no-moe-wgmma", a->tuning.moe_wgmma,
              "--device cuda: the wide expert kernels on mma.sync (64-row groups) instead of warpgroup MMA");
  b->add_flag("--moe-wgmma-exact", a->tuning.moe_wgmma_exact,
              "--device cuda: the wgmma expert kernels' variant for any scales even when every scale folds");
  b->add_flag("!--no-moe-fp8", a->tuning.moe_fp8,
              "--device cuda: routed-expert groups on the f16 wgmma kernels instead of the FP8 ones");
  b->add_option("--moe-fp8-max-rows", a->tuning.moe_fp8_max_rows,
                "--device cuda: the FP8 expert kernels for groups of up to this many rows, 64 or 128 (0: the default, "
                "128; prefill's 128-row groups then take the f16 wgmma kernel)");
  b->add_option("--moe-split-k", a->tuning.moe_split_k,
                "--device cuda: the FP8 expert kernels' K split over clusters of 2 blocks at decode widths (groups of "
                "<= 16 rows): 0 (the default) by their rule (few groups, K of >= 32 chunks), 1 never, 2 always");
  b->add_option("--route-gemm-rows", a->tuning.route_gemm_rows,
                "--device cuda: router logits of more than this many rows from one bf16 GEMM of three-part rows, "
                "fewer on the fp32 kernel (0: the default, 256; -1: never)");
  b->add_option("--fp8-wgmma-rows", a->tuning.fp8_wgmma_rows,
                "--device cuda: FP8 linears from this many rows (up to 64) on the wgmma decode kernel (0: the default, 1; "
                "-1: never)");
  b->add_option("--fp8-wgmma-max-rows", a->tuning.fp8_wgmma_max_rows,
                "--device cuda: ... and up to this many rows, 64 to 256 (past 64 every FP8 linear, which cuBLASLt "
                "runs by default; 0: the default, 64)");
  b->add_option("--attn-heads-per-block", a->tuning.attn_heads_per_block,
                "--device cuda: decode attention's heads per block, 16 or 64 (0: the default, by the launch size)");
  b->add_option("--attn-split", a->tuning.attn_split,
                "--device cuda: decode attention's base split in rows, a multiple of 64 (0: the default, 64 for batches "
                "that leave most SMs idle, else 256); fewer, longer splits where the batch fills the GPU");
  b->add_option("--bf16-gemv-max-n", a->tuning.bf16_gemv_max_n,
                "--device cuda: bf16 linears of up to 8 rows with at most this many outputs on the GEMV kernel (0: the "
                "default: 16384, the compressors' and indexer's projections, and any width at 1-2 rows, the head too; -1: "
                "never, cuBLASLt)");
  b->add_flag("!--no-attn-wgmma", a->tuning.attn_wgmma,
              "--device cuda: attention on the mma.sync kernel at every launch size (default: the warpgroup-MMA "
              "kernel where it would run 64-head blocks)");
  b->add_flag("!--no-act-pack", a->tuning.act_pack,
              "--device cuda: each linear quantises / casts its input itself (default: a norm writes the FP8 and "
              "bf16 forms its linears read, in the same pass, and past 256 rows the grouped wo_a's FP8 input is "
              "written group-major and wo_b's from its groups' outputs, with no transposed copies)");
  b->add_flag("!--no-hc-post-partial", a->tuning.hc_post_partial,
              "--device cuda: every mHC pre makes its own partial sums (default: up to 16 tokens the post before it "
              "makes them in its launch; the same bits)");
  b->add_flag("!--no-lt-timed", a->tuning.lt_timed,
              "--device cuda: cuBLASLt's FP8 GEMMs of up to 512 rows on the heuristic's first algorithm (default: the "
              "fastest of its candidates, timed when a shape is first seen)");
  b->add_flag("--host-sampling", a->host_sampling,
              "--device cuda: copy the decode logits to the host instead of sampling on the device");
  b->add_flag("--profile", a->tuning.profile,
              "--device cuda: device time of the prefill and of the decode steps by part, each next to its floor (steps "
              "run eagerly, synchronised per part)");
  b->add_flag("--engine", a->engine,
              "also decode --batch requests of --prompt-len random tokens and --gen-len tokens each through the "
              "serving engine, with the overlapped step loop on and off (steady-state decode tokens/s)");
  b->add_option("--churn", a->churn,
                "with --engine: also N x --batch requests of --gen-len/2 .. 3 --gen-len/2 tokens through --batch slots "
                "(overlap on), so sequences finish at different steps and waiting ones are admitted while others "
                "decode; tokens/s from the first submit to the last token, inter-token latency p50 / p99 / max");
  b->add_option("--floors", a->floors,
                "GB/S,FP8_TFLOPS,BF16_TFLOPS: print the floor of each part of the decode step (at context prompt + "
                "gen/2) and of the prefill at these rates, from the config alone (--synthetic's, or MODEL_DIR's "
                "config.json with the weights in DeepSeek's published formats); no device, runs nothing");
  b->add_option("--json", a->json_out, "write the results as JSON to this file");
  reg.add(b, [a] { return run_bench(*a); });

  CLI::App* d = app.add_subcommand("devices", "backends compiled in and the devices they see");
  reg.add(d, [] {
    for (const auto& dev : list_devices()) std::printf("%s\n", dev.c_str());
    return 0;
  });
}

}  // namespace deepinfer::cli
