#include "gpus_flag.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/registry.h"
#include "parallel/gpus_option.h"

namespace deepinfer::cli {

namespace {

// n_routed_experts from config.json, 0 when it cannot be read (the model load reports that).
int64_t routed_experts(const std::string& model_dir) {
  std::ifstream in(model_dir + "/config.json");
  if (!in) return 0;
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("n_routed_experts") || !j["n_routed_experts"].is_number_integer()) return 0;
  return j["n_routed_experts"].get<int64_t>();
}

}  // namespace

int check_gpus_flag(const char* command, int gpus, const std::string& model_dir) {
  parallel::GpusRequest r;
  r.gpus = gpus;
  if (gpus != 1) {  // N == 1 is today's path: no device query, no config read
    r.cuda_devices = static_cast<int>(list_devices().size()) - 1;  // list_devices() starts with "cpu"
    r.n_routed_experts = routed_experts(model_dir);
  }
  r.backend = "cpu";  // the serving engine runs the CPU backend (make_engine)
  const Status s = parallel::validate_gpus(r);
  if (s.is_ok()) return 0;
  std::fprintf(stderr, "deepinfer %s: %s\n", command, s.to_string().c_str());
  return s.code() == StatusCode::kUnsupported ? 1 : 2;
}

}  // namespace deepinfer::cli
