#include "json_out.h"

#include <cmath>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

namespace deepinfer::bench {

using nlohmann::json;

std::string row_key(const std::string& model, const std::string& phase, int64_t batch, int64_t context) {
  return model + "|" + phase + "|" + std::to_string(batch) + "|" + std::to_string(context);
}

JsonOut::JsonOut(std::string path, std::string rev, std::string command)
    : path_(std::move(path)), rev_(std::move(rev)), command_(std::move(command)) {
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  date_ = date;
  cudaDeviceProp p{};
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0 && cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
    machine_ = std::string(p.name) + ", " + std::to_string(p.multiProcessorCount) + " SMs, " +
               std::to_string(int(p.totalGlobalMem / 1073741824.0)) + " GiB";
  } else {
    cudaGetLastError();
    machine_ = "no CUDA device";
  }
}

int JsonOut::merge_peer(const std::string& peer_path) {
  std::ifstream f(peer_path);
  if (!f) {
    std::fprintf(stderr, "peer file %s not readable: no peer values\n", peer_path.c_str());
    notes_.push_back("peer file " + peer_path + " not readable");
    return 0;
  }
  json pj;
  try {
    pj = json::parse(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peer file %s: %s\n", peer_path.c_str(), e.what());
    notes_.push_back("peer file unparsable: " + std::string(e.what()));
    return 0;
  }
  peer_raw_ = pj.dump();
  int hits = 0;
  if (!pj.contains("rows") || !pj["rows"].is_array()) return 0;
  for (const json& r : pj["rows"]) {
    if (!r.contains("tokens_per_s") || !r["tokens_per_s"].is_number()) continue;  // error rows
    const std::string key = row_key(r.value("model", ""), r.value("phase", ""), r.value("batch", int64_t(0)),
                                    r.value("context", int64_t(0)));
    peer_.push_back({key, r["tokens_per_s"].get<double>()});
  }
  for (const ResultRow& r : rows_)
    for (auto& [k, v] : peer_)
      if (k == row_key(r.model, r.phase, r.batch, r.context)) ++hits;
  std::printf("peer: %zu measured rows read from %s (%d match rows so far)\n", peer_.size(), peer_path.c_str(), hits);
  return hits;
}

void JsonOut::write() const {
  json j;
  j["machine"] = machine_, j["git_rev"] = rev_, j["command"] = command_, j["date"] = date_;
  j["copy_GBps"] = copy_ / 1e9, j["fp8_gemm_TFLOPs"] = fp8_ / 1e12;
  j["floors"] = "decode: (dense weights + distinct routed experts of this step's routing + state read + head) / "
                "copy bandwidth; prefill: (all GEMM FLOPs incl. routed/shared experts, router, compressor and "
                "indexer projections + indexer scoring 2*64*128*visible + attention 4*64*512*rows per query) / FP8 rate";
  if (!notes_.empty()) j["notes"] = notes_;
  json rows = json::array();
  for (const ResultRow& r : rows_) {
    json x;
    x["model"] = r.model, x["phase"] = r.phase, x["batch"] = r.batch, x["context"] = r.context;
    const bool ok = r.skipped.empty() && r.error.empty() && r.step_ms > 0;
    if (ok) {
      x["tokens_per_s"] = r.tokens_per_s, x["step_ms"] = r.step_ms;
      x["floor_ms"] = r.floor_ms;
      x["floor_ratio"] = r.floor_ms > 0 ? json(r.step_ms / r.floor_ms) : json(nullptr);
    }
    if (!r.skipped.empty()) x["skipped"] = r.skipped;
    if (!r.error.empty()) x["error"] = r.error;
    x["peer"] = nullptr;
    for (auto& [k, v] : peer_)
      if (k == row_key(r.model, r.phase, r.batch, r.context)) {
        x["peer"] = {{"name", "transformers"}, {"tokens_per_s", v}};
        if (ok) x["speedup_vs_peer"] = r.tokens_per_s / v;
      }
    for (auto& [k, v] : r.extra) x[k] = std::isfinite(v) ? json(v) : json(nullptr);
    rows.push_back(x);
  }
  j["rows"] = rows;
  if (!peer_raw_.empty()) j["peer_file"] = json::parse(peer_raw_);
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream f(tmp);
    f << j.dump(1) << "\n";
  }
  std::rename(tmp.c_str(), path_.c_str());
}

void JsonOut::print_table() const {
  std::printf("\n%-20s %-7s %5s %7s %12s %10s %10s %7s %12s\n", "model", "phase", "batch", "context", "tokens/s",
              "step_ms", "floor_ms", "ratio", "peer tok/s");
  for (const ResultRow& r : rows_) {
    double pv = 0;
    for (auto& [k, v] : peer_)
      if (k == row_key(r.model, r.phase, r.batch, r.context)) pv = v;
    if (!r.skipped.empty() || !r.error.empty()) {
      std::printf("%-20s %-7s %5d %7lld  %s\n", r.model.c_str(), r.phase.c_str(), r.batch, (long long)r.context,
                  (r.skipped.empty() ? ("ERROR " + r.error) : ("skipped: " + r.skipped)).substr(0, 90).c_str());
      continue;
    }
    std::printf("%-20s %-7s %5d %7lld %12.1f %10.3f %10.3f %7.2f %12.1f\n", r.model.c_str(), r.phase.c_str(), r.batch,
                (long long)r.context, r.tokens_per_s, r.step_ms, r.floor_ms, r.floor_ms > 0 ? r.step_ms / r.floor_ms : 0,
                pv);
  }
}

}  // namespace deepinfer::bench
