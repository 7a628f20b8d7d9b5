// validate_gpus: the checks behind `deepinfer serve|generate --gpus N`.
#include <gtest/gtest.h>

#include "parallel/gpus_option.h"

namespace deepinfer::parallel {
namespace {

TEST(GpusOption, Validation) {
  EXPECT_TRUE(validate_gpus({.gpus = 1, .cuda_devices = 0, .n_routed_experts = 256}).is_ok());  // today's path
  EXPECT_TRUE(validate_gpus({.gpus = 1, .cuda_devices = 8, .n_routed_experts = 7}).is_ok());

  Status zero = validate_gpus({.gpus = 0});
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.to_string().find(">= 1"), std::string::npos) << zero.to_string();

  Status divide = validate_gpus({.gpus = 3, .cuda_devices = 8, .n_routed_experts = 256});
  EXPECT_EQ(divide.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(divide.to_string().find("does not divide"), std::string::npos) << divide.to_string();

  Status devices = validate_gpus({.gpus = 4, .cuda_devices = 1, .n_routed_experts = 256});
  EXPECT_EQ(devices.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(devices.to_string().find("1 CUDA device"), std::string::npos) << devices.to_string();

  Status backend = validate_gpus({.gpus = 4, .cuda_devices = 8, .n_routed_experts = 256, .backend = "cpu"});
  EXPECT_EQ(backend.code(), StatusCode::kUnsupported);
  EXPECT_NE(backend.to_string().find("not supported on the cpu backend"), std::string::npos) << backend.to_string();
}

}  // namespace
}  // namespace deepinfer::parallel
