// The bench's floors on the device (model/device_models.h): v4::decode_part_floors of a synthetic
// V4-Flash's config against cuda_decode_bytes, which counts the uploaded weights' bytes (the parts
// must add up to the step: the same state, the same weights to the scale formats and the head's
// padded mHC site), and the two tensor rates measured as the bench does.
#include <gtest/gtest.h>

#include <cstdio>

#include "backend/registry.h"
#include "model/deepseek_v4/flash_config.h"
#include "model/device_models.h"
#include "model/model.h"

namespace deepinfer {
namespace {

TEST(CudaFloor, PartsAddUpToTheDecodeFloor) {
  if (list_devices().size() < 2) GTEST_SKIP() << "no CUDA device";
  auto cfg = v4::flash_config(4, 16);
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  cfg->vocab_size = 4096;
  auto model = synthetic_cuda_model(*cfg, 5, {});
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  for (const int64_t B : {1, 64}) {
    for (const int64_t C : {100, 4096}) {
      auto db = cuda_decode_bytes(**model, B, C);
      auto cfg_of = cuda_v4_config(**model);
      ASSERT_TRUE(db.is_ok() && cfg_of.is_ok());
      double weights = 0, state = 0;
      for (const auto& p : v4::decode_part_floors(*cfg_of, B, C)) weights += p.weight_bytes, state += p.state_bytes;
      std::printf("B %lld C %lld: parts' weights %.1f MB, uploaded %.1f MB; state %.1f MB\n", (long long)B, (long long)C,
                  weights / 1e6, (db->dense + db->experts) / 1e6, state / 1e6);
      EXPECT_DOUBLE_EQ(state, db->state);
      EXPECT_NEAR(weights, db->dense + db->experts, 0.01 * (db->dense + db->experts)) << "B " << B << " C " << C;
    }
  }
}

TEST(CudaFloor, TensorRatesAreMeasured) {
  if (list_devices().size() < 2) GTEST_SKIP() << "no CUDA device";
  const double fp8 = cuda_fp8_tflops(), bf16 = cuda_bf16_tflops();
  std::printf("FP8 %.0f TFLOP/s, bf16 %.0f TFLOP/s\n", fp8, bf16);
  EXPECT_GT(fp8, 0);
  EXPECT_GT(bf16, 0);
}

}  // namespace
}  // namespace deepinfer
