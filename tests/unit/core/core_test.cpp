#include <gtest/gtest.h>

#include <atomic>

#include "core/dtype.h"
#include "core/result.h"
#include "core/thread_pool.h"

namespace deepinfer {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::invalid_argument("not positive: " + std::to_string(v));
  return v;
}

Status twice(int v, int* out) {
  DI_ASSIGN_OR_RETURN(int x, parse_positive(v));
  *out = 2 * x;
  return Status::ok();
}

TEST(Status, OkIsCheapAndErrorsCarryContext) {
  EXPECT_TRUE(Status::ok().is_ok());
  Status s = Status::data_loss("truncated").with_context("model.safetensors");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "model.safetensors: truncated");
  EXPECT_EQ(s.to_string(), "data loss: model.safetensors: truncated");
}

TEST(Result, PropagatesThroughMacros) {
  int out = 0;
  EXPECT_TRUE(twice(4, &out).is_ok());
  EXPECT_EQ(out, 8);
  Status s = twice(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "not positive: -1");
}

TEST(ThreadPool, CoversEveryIndexOnceWithStaticRanges) {
  ThreadPool pool(4);
  for (int64_t n : {1, 7, 100, 1001}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, 3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << i;
  }
  // Nested calls run inline instead of deadlocking.
  std::atomic<int64_t> total{0};
  pool.parallel_for(8, 1, [&](int64_t b, int64_t e) {
    pool.parallel_for(10, 1, [&](int64_t b2, int64_t e2) { total += (e - b) * (e2 - b2); });
  });
  EXPECT_EQ(total.load(), 80);
}

TEST(DType, NamesRoundTrip) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF8E4M3, DType::kF8E8M0, DType::kI64, DType::kI8}) {
    auto back = dtype_from_name(dtype_name(t));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, t);
  }
  EXPECT_FALSE(dtype_from_name("F4").has_value());
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.0f + 1.0f / 256), f32_to_bf16(1.0f));  // tie -> even
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(3.14159f)), 3.140625f);
}

}  // namespace
}  // namespace deepinfer
