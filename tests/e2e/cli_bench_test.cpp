// `deepinfer bench` argument errors through the built binary: --synthetic without --device cuda,
// a bad --synthetic spelling, both or neither of MODEL_DIR and --synthetic, the CUDA tuning flags on
// the CPU or out of range are usage errors (exit
// code 2, a message on stderr naming the problem), checked before any device is touched, so they
// hold on machines without a GPU. One well-formed CPU run first, so a binary that always fails
// can't pass; one CPU run of the engine mode (--engine).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/util/checkpoint_writer.h"

namespace deepinfer {
namespace {

using namespace deepinfer::testing;

struct CliRun {
  int exit_code;
  std::string out, err;
};

class CliBench : public ::testing::Test {
 protected:
  CliRun bench(const std::string& args) {
    const std::string out = dir_.path + "/stdout", err = dir_.path + "/stderr";
    const std::string cmd = std::string("'") + DI_CLI_PATH + "' bench " + args + " > '" + out + "' 2> '" + err + "'";
    const int st = std::system(cmd.c_str());
    return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), read_file(out), read_file(err)};
  }
  void expect_usage_error(const std::string& args, const std::string& needle) {
    const CliRun r = bench(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": '" << needle << "' not in stderr: " << r.err;
  }

  static std::string tiny() { return "'" + fixture_dir("tiny-v4-a") + "'"; }

  TempDir dir_{"cli-bench"};
};

TEST_F(CliBench, CpuCheckpointRuns) {
  const CliRun r = bench(tiny() + " --prompt-len 4 --gen-len 2 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("decode"), std::string::npos) << r.out;
}

// --engine: the serving engine's steady decode rate, overlap on and off, printed and in --json.
TEST_F(CliBench, CpuEngineModeReportsBothRates) {
  const std::string json = dir_.path + "/bench.json";
  const CliRun r = bench(tiny() + " --prompt-len 4 --gen-len 4 --batch 2 --threads 1 --engine --json '" + json + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("engine"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("with overlap"), std::string::npos) << r.out;
  const std::string j = read_file(json);
  for (const char* field : {"\"engine_decode_tokens_per_s\"", "\"engine_decode_tokens_per_s_no_overlap\"",
                            "\"engine_overlap_applies\"", "\"no_overlap\""})
    EXPECT_NE(j.find(field), std::string::npos) << field << " not in " << j;
  expect_usage_error(tiny() + " --engine --gen-len 1", "--gen-len >= 2");
}

// --engine --churn: batch x churn requests of gen/2 .. 3 gen/2 tokens through the batch's slots,
// every token of every request counted (run_requests checks each request's count).
TEST_F(CliBench, CpuEngineChurnCountsEveryRequest) {
  const std::string json = dir_.path + "/churn.json";
  const CliRun r = bench(tiny() + " --prompt-len 3 --gen-len 4 --batch 2 --threads 1 --engine --churn 3 --json '" + json + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("churn"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(json));
  const auto& c = j["engine"]["churn"];
  EXPECT_EQ(c["requests"].get<int64_t>(), 6);
  EXPECT_GE(c["tokens"].get<int64_t>(), 6 * 2);
  EXPECT_LE(c["tokens"].get<int64_t>(), 6 * 6);
  EXPECT_GT(c["tokens_per_s"].get<double>(), 0.0);
  const double p50 = c["itl_p50_ms"].get<double>(), p99 = c["itl_p99_ms"].get<double>();
  EXPECT_GE(p50, 0.0);
  EXPECT_LE(p50, p99);
  EXPECT_LE(p99, c["itl_max_ms"].get<double>());
  expect_usage_error(tiny() + " --churn 2", "applies to --engine");
  expect_usage_error(tiny() + " --engine --churn -1", "applies to --engine");
}

// --floors: the parts' floors of a --synthetic shape from its config alone, on any machine. The
// prefill's FLOPs are 8,192 tokens through the first four V4-Flash layers' weights (the same count
// prefill_flops makes, worked out in model_prefill_flops_test) and the parts' floors add up.
TEST_F(CliBench, FloorsNeedNoDevice) {
  const std::string json = dir_.path + "/floors.json";
  const CliRun r = bench("--synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 0 --floors 4250,1318,809 --json '" +
                         json + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("decode step at context 8192"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(json));
  for (const char* phase : {"decode", "prefill"}) {
    const auto& parts = j[phase]["parts"];
    ASSERT_EQ(parts.size(), 15u) << phase;
    double sum = 0, flops = 0;
    for (const auto& p : parts) sum += p["floor_ms"].get<double>(), flops += p["floor_fp8_flops"].get<double>() + p["floor_bf16_flops"].get<double>();
    EXPECT_NEAR(sum, j[phase]["floor_ms"].get<double>(), 1e-9 * sum) << phase;
    if (std::string(phase) == "prefill") {
      // the linears: 2 x 8192 x (every weight a token multiplies); attention over its window and
      // compressed rows, the indexer's scores, the head once: 19,005.2 + 1,060.3 + 137.4 + 1.06 GFLOP
      EXPECT_NEAR(flops / 1e9, 20204.0, 1.0);
      EXPECT_EQ(parts[12]["part"], "moe: routed experts (MXFP4 grouped w1/w3, SwiGLU, w2)");
      EXPECT_NEAR(parts[12]["floor_ms"].get<double>(), 2.0 * 8192 * 6 * 3 * 2048 * 4096 * 4 / 1318e12 * 1e3, 1e-6);
    }
  }
  expect_usage_error("--synthetic v4-flash --floors 4250,1318", "--floors takes");
  expect_usage_error("--synthetic v4-flash --floors 4250,0,809", "--floors takes");
  // a checkpoint's config.json (the tiny fixture's: 2 layers), no weights read
  const CliRun t = bench(tiny() + " --batch 4 --prompt-len 100 --floors 4250,1318,809");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("decode step at context 116"), std::string::npos) << t.out;
  const CliRun missing = bench("'" + dir_.path + "' --floors 4250,1318,809");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("config.json"), std::string::npos) << missing.err;
}

TEST_F(CliBench, SyntheticNeedsDeviceCuda) {
  expect_usage_error("--synthetic v4-flash", "--device cuda");
  expect_usage_error("--synthetic v4-flash-ep8 --device cpu", "--device cuda");
  expect_usage_error("--synthetic v4-flash:2:16", "--device cuda");
}

TEST_F(CliBench, BadSyntheticSpec) {
  expect_usage_error("--synthetic v4-flash:0 --device cuda", "1..43");
  expect_usage_error("--synthetic v4-flash:44 --device cuda", "1..43");
  expect_usage_error("--synthetic foo --device cuda", "unknown model");
  expect_usage_error("--synthetic v4-flash:4:0 --device cuda", "1..256");
  expect_usage_error("--synthetic v4-flash:4:257 --device cuda", "1..256");
  expect_usage_error("--synthetic v4-flash:x --device cuda", "LAYERS");
  expect_usage_error("--synthetic v4-flash:0", "1..43");  // the spec first, then the device
}

TEST_F(CliBench, FillStateIsDecodeOnlyOnCuda) {
  expect_usage_error(tiny() + " --fill-state", "--fill-state apply to --device cuda");
  expect_usage_error(tiny() + " --fill-state --gen-len 0", "--gen-len >= 1");
  expect_usage_error(tiny() + " --fill-state --engine", "no --engine");
}

TEST_F(CliBench, CudaKnobsAreCheckedFirst) {
  expect_usage_error(tiny() + " --moe-wide-rows 4", "apply to --device cuda");
  expect_usage_error(tiny() + " --moe-group-rows 32", "apply to --device cuda");
  expect_usage_error(tiny() + " --profile", "apply to --device cuda");
  expect_usage_error(tiny() + " --no-moe-wgmma", "apply to --device cuda");
  expect_usage_error(tiny() + " --no-moe-fp8", "apply to --device cuda");
  expect_usage_error(tiny() + " --moe-wgmma-exact", "apply to --device cuda");
  expect_usage_error(tiny() + " --attn-heads-per-block 16", "apply to --device cuda");
  expect_usage_error(tiny() + " --attn-split 128", "apply to --device cuda");
  expect_usage_error(tiny() + " --fp8-wgmma-rows 16", "apply to --device cuda");
  expect_usage_error(tiny() + " --fp8-wgmma-max-rows 256", "apply to --device cuda");
  expect_usage_error(tiny() + " --moe-fp8-max-rows 64", "apply to --device cuda");
  expect_usage_error(tiny() + " --route-gemm-rows 32", "apply to --device cuda");
  expect_usage_error("--synthetic v4-flash --device cuda --route-gemm-rows -2", "--route-gemm-rows must be");
  expect_usage_error("--synthetic v4-flash --device cuda --moe-fp8-max-rows 96", "--moe-fp8-max-rows must be");
  expect_usage_error("--synthetic v4-flash --device cuda --moe-split-k 3", "--moe-split-k must be");
  expect_usage_error("--synthetic v4-flash --device cuda --fp8-wgmma-rows -2", "--fp8-wgmma-rows must be");
  expect_usage_error("--synthetic v4-flash --device cuda --fp8-wgmma-max-rows 300", "--fp8-wgmma-max-rows must be");
  expect_usage_error("--synthetic v4-flash --device cuda --fp8-wgmma-max-rows 32", "--fp8-wgmma-max-rows must be");
  expect_usage_error("--synthetic v4-flash --device cuda --attn-heads-per-block 32", "--attn-heads-per-block must be");
  expect_usage_error("--synthetic v4-flash --device cuda --attn-split 100", "--attn-split must be");
  expect_usage_error("--synthetic v4-flash --device cuda --moe-wide-rows -2", "--moe-wide-rows must be");
  expect_usage_error("--synthetic v4-flash --device cuda --moe-group-rows 48", "--moe-group-rows must be");
}

TEST_F(CliBench, ModelDirXorSynthetic) {
  expect_usage_error("", "--synthetic");
  expect_usage_error(tiny() + " --synthetic v4-flash --device cuda", "not both");
}

}  // namespace
}  // namespace deepinfer
