// Host-side pieces of the whole-model bench (bench/cuda_model/): the layer schedule, the RoPE
// tables (YaRN only on compressed layers), and the JSON output with the peer merged by
// (model, phase, batch, context). Runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/cuda_model/json_out.h"
#include "bench/cuda_model/weights.h"

namespace db = deepinfer::bench;

TEST(CudaModelBench, LayerScheduleIsTwoSwaThenCsaHcaAlternatingEndingOnCsa) {
  int swa = 0, csa = 0, hca = 0;
  for (int l = 0; l < db::kAllLayers; ++l) {
    const int r = db::compress_ratio(l);
    swa += r == 0, csa += r == 4, hca += r == 128;
  }
  EXPECT_EQ(swa, 2);
  EXPECT_EQ(csa, 21);
  EXPECT_EQ(hca, 20);
  EXPECT_EQ(db::compress_ratio(2), 4);
  EXPECT_EQ(db::compress_ratio(3), 128);
  EXPECT_EQ(db::compress_ratio(42), 4);
}

TEST(CudaModelBench, RopeTablesBlendYarnOnlyOnCompressedLayers) {
  const auto swa = db::rope_inv_freq(0), cmp = db::rope_inv_freq(4);
  ASSERT_EQ(swa.size(), 32u);
  ASSERT_EQ(cmp.size(), 32u);
  for (int i = 0; i < 32; ++i) {
    EXPECT_NEAR(swa[i], std::pow(10000.0, -2.0 * i / 64), 1e-6 * std::fabs(swa[i]) + 1e-12) << i;
    const double f = std::pow(160000.0, -2.0 * i / 64);
    if (i <= 15) {
      EXPECT_NEAR(cmp[i], f, 1e-6 * f) << "pair " << i << " must be unchanged (low = 15)";
    } else if (i >= 25) {
      EXPECT_NEAR(cmp[i], f / 16, 1e-6 * f) << "pair " << i << " must be divided by 16 (high = 25)";
    } else {
      EXPECT_TRUE(cmp[i] < f && cmp[i] > f / 16) << "pair " << i << " is blended";
    }
  }
}

TEST(CudaModelBench, JsonRowsCarryThePeerOfTheSameShapeOnly) {
  const std::string peer = ::testing::TempDir() + "peer.json", out = ::testing::TempDir() + "model.json";
  {
    std::ofstream f(peer);
    f << R"({"machine": "x", "rows": [
      {"model": "v4-flash-4", "phase": "decode", "batch": 32, "context": 4096, "tokens_per_s": 700.0, "step_ms": 45.7},
      {"model": "v4-flash-4", "phase": "decode", "batch": 1, "context": 4096, "error": "oom"},
      {"model": "v4-flash-4", "phase": "prefill", "batch": 1, "context": 2048, "tokens_per_s": 23000.0}]})";
  }
  db::JsonOut js(out, "abc123", "cuda_model_bench --out x");
  js.floors(4.2e12, 1.36e15);
  db::ResultRow a;
  a.model = "v4-flash-4", a.phase = "decode", a.batch = 32, a.context = 4096;
  a.step_ms = 2.0, a.tokens_per_s = 16000, a.floor_ms = 1.0;
  db::ResultRow b = a;
  b.batch = 1, b.step_ms = 1.0, b.tokens_per_s = 1000, b.floor_ms = 0.5;
  db::ResultRow c = a;
  c.context = 32768, c.skipped = "does not fit", c.step_ms = 0;
  js.add(a), js.add(b), js.add(c);
  EXPECT_EQ(js.merge_peer(peer), 1);  // the error row of the peer has no tokens_per_s
  js.write();
  std::ifstream f(out);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["git_rev"], "abc123");
  ASSERT_EQ(j["rows"].size(), 3u);
  const auto& r0 = j["rows"][0];
  EXPECT_EQ(r0["peer"]["name"], "transformers");
  EXPECT_DOUBLE_EQ(r0["peer"]["tokens_per_s"].get<double>(), 700.0);
  EXPECT_DOUBLE_EQ(r0["floor_ratio"].get<double>(), 2.0);
  EXPECT_TRUE(j["rows"][1]["peer"].is_null());
  EXPECT_DOUBLE_EQ(j["rows"][1]["floor_ratio"].get<double>(), 2.0);
  EXPECT_EQ(j["rows"][2]["skipped"], "does not fit");
  EXPECT_FALSE(j["rows"][2].contains("tokens_per_s"));
  EXPECT_TRUE(j.contains("peer_file"));
  std::remove(peer.c_str());
  std::remove(out.c_str());
}
