// src/engine itself on the DeepSeek-V4 GPU model (EngineOptions::device = "cuda"): 4 concurrent
// greedy requests on the synthetic V4-Flash-shaped checkpoint (v4_flash_synthetic.h), against the
// same requests on the CPU engine. Full tree only (src/engine needs the tokenizer, utf8proc and
// xxhash, which the device project does not build); the device project's cuda_v4_model_test runs
// the same scheduling over the Model interface. Tokens of both are printed; the first generated
// token of each request comes from logits within cuda_v4_model_test's tolerance of each other,
// so at least 2 of 4 must agree (greedy paths may part at near-ties later).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "backend/cuda/cuda_ops.h"
#include "engine/engine.h"
#include "tests/cuda/v4_flash_synthetic.h"

namespace deepinfer {
namespace {

std::vector<std::vector<int32_t>> run_engine(const std::string& dir, const std::string& device,
                                             const std::vector<std::vector<int32_t>>& prompts) {
  EngineOptions eo;
  eo.device = device;
  eo.load_tokenizer = false;
  eo.max_context = 1024;
  auto engine = make_engine(dir, eo);
  EXPECT_TRUE(engine.is_ok()) << engine.status().message();
  if (!engine.is_ok()) return {};
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.id = device + "-" + std::to_string(i);
    r.prompt = prompts[i];
    r.sampling.temperature = 0.f;
    r.sampling.max_tokens = 8;
    r.sampling.ignore_eos = true;
    auto s = (*engine)->submit(std::move(r));
    EXPECT_TRUE(s.is_ok()) << s.status().message();
    if (!s.is_ok()) return {};
    streams.push_back(std::move(s).value());
  }
  std::vector<std::vector<int32_t>> out(prompts.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    while (!streams[i]->closed_and_drained() && std::chrono::steady_clock::now() < deadline) {
      auto ev = streams[i]->next(std::chrono::milliseconds(200));
      if (!ev) continue;
      if (ev->kind == StreamEvent::Kind::kError) {
        ADD_FAILURE() << device << " request " << i << ": " << ev->error.message();
        break;
      }
      for (const SampledToken& t : ev->tokens) out[i].push_back(t.id);
    }
  }
  return out;
}

TEST(CudaV4Engine, FourConcurrentGreedyRequestsMatchCpuEngine) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir("v4-flash-engine");
  testing::write_v4_flash_checkpoint(dir.path, testing::V4FlashSpec{});
  std::vector<std::vector<int32_t>> prompts;
  testing::SyntheticRng r(99);
  for (int64_t len : {40, 150, 7, 130}) {
    std::vector<int32_t> p(len);
    for (auto& t : p) t = static_cast<int32_t>(2 + r.next() % 2046);
    prompts.push_back(p);
  }
  const auto gpu = run_engine(dir.path, "cuda", prompts);
  const auto cpu = run_engine(dir.path, "cpu", prompts);
  ASSERT_EQ(gpu.size(), 4u);
  ASSERT_EQ(cpu.size(), 4u);
  int first_agree = 0;
  for (size_t i = 0; i < 4; ++i) {
    std::printf("request %zu (prompt %zu tokens)\n  cpu engine:", i, prompts[i].size());
    for (int32_t t : cpu[i]) std::printf(" %d", t);
    std::printf("\n  gpu engine:");
    for (int32_t t : gpu[i]) std::printf(" %d", t);
    std::printf("\n");
    EXPECT_EQ(gpu[i].size(), 8u);
    first_agree += !gpu[i].empty() && !cpu[i].empty() && gpu[i][0] == cpu[i][0];
  }
  EXPECT_GE(first_agree, 2);
}

}  // namespace
}  // namespace deepinfer
