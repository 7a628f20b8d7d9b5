// Whole-model GPU bench of DeepSeek-V4-Flash shapes (issue 5, point 4): random weights in the
// stored formats generated on the GPU, the decode step as ONE CUDA graph (B in 1..256, context
// 4k / 32k) and chunked prefill (1k..32k tokens), each next to its floor measured in the same run
// (decode: bytes / copy bandwidth; prefill: FLOPs / FP8 GEMM rate), JSON in the format,
// optionally with the transformers peer's tokens/s merged in (--peer, bench/peer_transformers.py).
//
// Models: v4-flash-4 (the peer's shape: first 4 layers), v4-flash-N (first N layers, N the most
// that fit with the B=64, C=32k state in the memory budget), v4-flash-ep8-slice (43 layers, 32 of
// 256 experts per layer, routing over those 32), and the prefill models (routed experts stored as
// FP8 128x128 blocks, re-blocked once at load: v4-flash-4 and the most layers that fit).
// Usage: cuda_model_bench [--out F] [--peer F] [--rev R] [--time-budget S] [--budget-gb G]
//        [--models small,main,ep8,prefill-small,prefill] [--layers N] [--prefill-layers M]
//        [--batches 1,8,...] [--contexts 4096,...] [--prefill-tokens 1024,...]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "decode.h"
#include "floors.h"
#include "json_out.h"
#include "prefill.h"

namespace db = deepinfer::bench;

namespace {

struct Options {
  std::string out = "cuda-model.json", peer, rev = "unknown", models = "small,main,ep8,prefill-small,prefill";
  double time_budget = 170, budget_gb = 125;
  int layers = 0, prefill_layers = 0;
  std::vector<int64_t> batches{1, 8, 32, 64, 128, 256}, contexts{4096, 32768};
  std::vector<int64_t> prefill_tokens{1024, 2048, 4096, 8192, 16384, 32768};
};

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(std::atoll(x.c_str()));
  return v;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "missing value for %s\n", a.c_str());
      return false;
    }
    const std::string v = argv[++i];
    if (a == "--out") o.out = v;
    else if (a == "--peer") o.peer = v;
    else if (a == "--rev") o.rev = v;
    else if (a == "--models") o.models = v;
    else if (a == "--time-budget") o.time_budget = std::atof(v.c_str());
    else if (a == "--budget-gb") o.budget_gb = std::atof(v.c_str());
    else if (a == "--layers") o.layers = std::atoi(v.c_str());
    else if (a == "--prefill-layers") o.prefill_layers = std::atoi(v.c_str());
    else if (a == "--batches") o.batches = parse_list(v);
    else if (a == "--contexts") o.contexts = parse_list(v);
    else if (a == "--prefill-tokens") o.prefill_tokens = parse_list(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return false;
    }
  }
  return true;
}

bool wants(const Options& o, const std::string& m) { return ("," + o.models + ",").find("," + m + ",") != std::string::npos; }

/// A model with only the layer schedule (for sizing before anything is allocated).
void schedule_only(db::Model& m, int layers) {
  m.layers.clear();
  for (int l = 0; l < layers; ++l) {
    db::LayerW L;
    L.ratio = db::compress_ratio(l);
    m.layers.push_back(L);
  }
}

double model_bytes(int layers, int experts, bool prefill) {
  double b = 2.0 * db::kVocab * db::kD * 2;  // embed + head
  for (int l = 0; l < layers; ++l) b += db::layer_weight_bytes(l, experts, prefill);
  if (prefill) b += experts * db::mxfp4_expert_bytes();  // the re-blocking scratch
  return b;
}

/// The most layers (<= 43) whose weights + `state(layers)` fit in `budget` bytes.
template <class F>
int layers_that_fit(double budget, int experts, bool prefill, F state) {
  int n = 0;
  for (int l = 1; l <= db::kAllLayers; ++l) {
    db::Model probe;
    schedule_only(probe, l);
    if (model_bytes(l, experts, prefill) + state(probe) > budget) break;
    n = l;
  }
  return n;
}

struct Runner {
  Options& o;
  db::Ctx& c;
  db::JsonOut& js;
  double t0 = db::now_s();
  bool dead = false;  // the CUDA context hit a sticky error: nothing more can run

  bool over_budget() const { return db::now_s() - t0 > o.time_budget; }

  /// Runs fn for the row unless skipped; records errors and whether the context survived.
  template <class F>
  void run_row(db::ResultRow r, double need_bytes, F fn) {
    if (dead) {
      r.error = "CUDA context lost earlier in the run";
    } else if (over_budget()) {
      r.skipped = "time budget (" + std::to_string(int(o.time_budget)) + " s) spent";
    } else if (need_bytes > double(db::device_free_bytes()) - 512e6) {
      r.skipped = "does not fit: needs " + std::to_string(need_bytes / 1e9) + " GB, " +
                  std::to_string(db::device_free_bytes() / 1e9) + " GB free";
    } else {
      try {
        fn(r);
      } catch (const std::exception& e) {
        const std::string what = e.what();
        if (what.rfind("cudaMalloc", 0) == 0)  // out of memory: the estimate was short
          r.skipped = "does not fit: " + what;
        else
          r.error = what;
        cudaGetLastError();
        if (cudaDeviceSynchronize() != cudaSuccess) {
          dead = true;
          std::fprintf(stderr, "CUDA context lost: %s\n", cudaGetErrorString(cudaGetLastError()));
        }
      }
    }
    if (!r.skipped.empty()) std::printf("skip %s %s B=%d C=%lld: %s\n", r.model.c_str(), r.phase.c_str(), r.batch,
                                        (long long)r.context, r.skipped.c_str());
    js.add(r);
    js.write();
  }

  /// Builds the model (or records why not) and runs its decode / prefill rows.
  void model(const db::ModelSpec& spec, bool profile_decode, bool profile_prefill) {
    std::printf("== model %s: %d layers, %d experts/layer, %s experts\n", spec.name.c_str(), spec.layers, spec.experts,
                spec.prefill ? "FP8-block" : "MXFP4");
    std::fflush(stdout);
    auto m = std::make_unique<db::Model>();
    m->spec = spec;
    std::string build_error;
    if (!dead) {
      try {
        const double t = db::now_s();
        db::build_model(*m, c.st.main);
        std::printf("   weights %.1f GB generated in %.1f s (dense %.2f GB, head+embed %.2f GB)\n", m->arena.bytes() / 1e9,
                    db::now_s() - t, m->dense_bytes / 1e9, 2 * m->head_bytes / 1e9);
      } catch (const std::exception& e) {
        build_error = std::string("model build: ") + e.what();
        cudaGetLastError();
        if (cudaDeviceSynchronize() != cudaSuccess) dead = true;
      }
    }
    auto base = [&](const char* phase, int B, int64_t C) {
      db::ResultRow r;
      r.model = spec.name, r.phase = phase, r.batch = B, r.context = C, r.error = build_error;
      return r;
    };
    if (!spec.prefill) {
      for (int64_t C : o.contexts)
        for (int64_t B : o.batches) {
          db::ResultRow r = base("decode", int(B), C);
          if (!build_error.empty()) {
            js.add(r);
            continue;
          }
          const bool prof = profile_decode && B == 32 && C == 4096;
          run_row(r, db::decode_config_bytes(*m, int(B), C), [&](db::ResultRow& row) {
            db::run_decode(c, *m, int(B), C, prof, row);
          });
        }
    } else {
      for (int64_t T : o.prefill_tokens) {
        db::ResultRow r = base("prefill", 1, T);
        if (!build_error.empty()) {
          js.add(r);
          continue;
        }
        const bool prof = profile_prefill && T == 8192;
        run_row(r, db::prefill_config_bytes(*m, T), [&](db::ResultRow& row) { db::run_prefill(c, *m, T, prof, row); });
      }
    }
    js.write();
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  db::JsonOut js(o.out, o.rev, cmd);
  if (!o.peer.empty()) js.merge_peer(o.peer);  // read first: every rewrite of the JSON carries it
  if (!deepinfer::cuda::device_available()) {
    std::printf("no CUDA device: nothing to measure (writing an empty result)\n");
    js.note("no CUDA device");
    js.write();
    return 0;
  }
  db::Ctx c;
  try {
    c.init(8192);
    c.copy_Bps = db::measure_copy_bandwidth(c.st.main);
    c.fp8_flops = db::measure_fp8_rate(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "floors failed: %s\n", e.what());
    js.note(std::string("floors failed: ") + e.what());
  }
  std::printf("floors: copy %.1f GB/s (read + write), FP8 GEMM %.1f TFLOP/s (8192^3, fp8_linear_lt)\n", c.copy_Bps / 1e9,
              c.fp8_flops / 1e12);
  js.floors(c.copy_Bps, c.fp8_flops);
  js.write();
  const double budget = std::min(o.budget_gb * 1e9, double(db::device_free_bytes()) - 4e9);
  Runner run{o, c, js};
  if (wants(o, "small")) run.model({"v4-flash-4", 4, 256, false}, false, false);
  if (wants(o, "main")) {
    const int n = o.layers > 0 ? o.layers : layers_that_fit(budget, 256, false, [](const db::Model& p) {
      return db::decode_config_bytes(p, 64, 32768);
    });
    if (n > 0) run.model({"v4-flash-" + std::to_string(n), n, 256, false}, true, false);
  }
  if (wants(o, "ep8")) run.model({"v4-flash-ep8-slice", db::kAllLayers, 32, false}, false, false);
  if (wants(o, "prefill-small")) run.model({"v4-flash-4", 4, 256, true}, false, false);
  if (wants(o, "prefill")) {
    const int n = o.prefill_layers > 0 ? o.prefill_layers : layers_that_fit(budget, 256, true, [](const db::Model& p) {
      return db::prefill_config_bytes(p, 32768);
    });
    if (n > 0) run.model({"v4-flash-" + std::to_string(n), n, 256, true}, false, true);
  }
  js.write();
  js.print_table();
  std::printf("wrote %s (%.0f s)\n", o.out.c_str(), db::now_s() - run.t0);
  return 0;
}
