// Sizing sequence state from a device's memory (engine/memory_budget.h, EngineOptions::
// gpu_memory_utilization): the arithmetic and its refusals, the warm-up step that runs before the
// memory is read, and the engine that takes the result, on tiny-v4-b behind a model that reports
// a device's memory (the CPU models report none and keep the configured capacity).
#include <gtest/gtest.h>

#include <atomic>

#include "engine/engine.h"
#include "engine/memory_budget.h"

namespace deepinfer {
namespace {

const std::string kModel = std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b";
constexpr int64_t kMiB = int64_t{1} << 20, kGiB = int64_t{1} << 30;

TEST(MemoryBudget, ShareOfTotalLessUsedLessPrefixCache) {
  // 80 GiB device, 30 GiB in use: at 0.9, 72 - 30 - 1 (prefix cache) = 41 GiB for state
  auto cap = state_capacity_from_device({50 * kGiB, 80 * kGiB}, 0.9, kGiB);
  ASSERT_TRUE(cap.is_ok()) << cap.status().to_string();
  EXPECT_NEAR(static_cast<double>(*cap), 41.0 * kGiB, 1.0);
  auto all = state_capacity_from_device({50 * kGiB, 80 * kGiB}, 1.0, 0);
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(*all, 50 * kGiB);
}

TEST(MemoryBudget, NothingLeftOrBadFiguresAreErrors) {
  auto none = state_capacity_from_device({10 * kGiB, 80 * kGiB}, 0.8, 512 * kMiB);  // 64 - 70 - 0.5 < 0
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("no device memory left"), std::string::npos) << none.status().to_string();
  EXPECT_NE(none.status().message().find("71680 MiB in use"), std::string::npos) << none.status().to_string();
  for (double u : {0.0, -0.5, 1.5})
    EXPECT_FALSE(state_capacity_from_device({50 * kGiB, 80 * kGiB}, u, 0).is_ok()) << u;
  EXPECT_FALSE(state_capacity_from_device({90 * kGiB, 80 * kGiB}, 0.9, 0).is_ok()) << "free > total";
  EXPECT_FALSE(state_capacity_from_device({0, 0}, 0.9, 0).is_ok()) << "no total";
}

// tiny-v4-b behind a device of `total` bytes whose free memory drops by `workspace` once a forward
// has run (the workspaces a first step allocates); counts forwards and their tokens.
class DeviceModel final : public Model {
 public:
  DeviceModel(std::unique_ptr<Model> inner, int64_t free, int64_t total, int64_t workspace)
      : inner_(std::move(inner)), free_(free), total_(total), workspace_(workspace) {}
  const ModelSpec& info() const override { return inner_->info(); }
  std::unique_ptr<ModelState> new_state() const override { return inner_->new_state(); }
  Status forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) override {
    ++forwards;
    for (const ModelInput& in : batch) tokens += static_cast<int64_t>(in.tokens.size());
    return inner_->forward(batch, out);
  }
  std::optional<DeviceMemory> device_memory() const override {
    return DeviceMemory{free_ - (forwards > 0 ? workspace_ : 0), total_};
  }
  std::atomic<int> forwards{0};
  std::atomic<int64_t> tokens{0};

 private:
  std::unique_ptr<Model> inner_;
  int64_t free_, total_, workspace_;
};

TEST(MemoryBudget, EngineSizesStateAfterAWarmUpStep) {
  DeviceModel* seen = nullptr;
  EngineOptions o;
  o.threads = 2;
  o.prefix_cache_bytes = 64 * kMiB;
  o.sched.max_batch_tokens = 96;
  o.gpu_memory_utilization = 0.5;
  o.wrap_model = [&seen](std::unique_ptr<Model> m) {
    auto d = std::make_unique<DeviceModel>(std::move(m), 6 * kGiB, 8 * kGiB, kGiB);
    seen = d.get();
    return d;
  };
  auto e = make_engine(kModel, o);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  ASSERT_NE(seen, nullptr);
  EXPECT_EQ(seen->forwards.load(), 1) << "one warm-up step before the memory is read";
  EXPECT_EQ(seen->tokens.load(), 96) << "of max_batch_tokens tokens";
  // 4 GiB allowed - 3 GiB in use after the warm-up - 64 MiB of prefix cache
  const EngineStats st = (*e)->stats();
  EXPECT_EQ(st.state_bytes_capacity - o.prefix_cache_bytes, kGiB - 64 * kMiB);
}

TEST(MemoryBudget, EngineRefusesWhenTheWeightsLeaveNoRoom) {
  EngineOptions o;
  o.threads = 2;
  o.gpu_memory_utilization = 0.5;
  o.wrap_model = [](std::unique_ptr<Model> m) { return std::make_unique<DeviceModel>(std::move(m), 3 * kGiB, 8 * kGiB, 0); };
  auto e = make_engine(kModel, o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("no device memory left"), std::string::npos) << e.status().to_string();
  o.gpu_memory_utilization = 1.5;
  EXPECT_EQ(make_engine(kModel, o).status().code(), StatusCode::kInvalidArgument);
}

TEST(MemoryBudget, HostModelKeepsTheConfiguredCapacity) {
  EngineOptions o;
  o.threads = 2;
  o.gpu_memory_utilization = 0.9;
  o.state_capacity_bytes = 123 * kMiB;
  o.prefix_cache_bytes = 0;
  auto e = make_engine(kModel, o);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ((*e)->stats().state_bytes_capacity, 123 * kMiB);
}

}  // namespace
}  // namespace deepinfer
