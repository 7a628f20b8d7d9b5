// src/engine itself on the DeepSeek-V4 GPU model (EngineOptions::device = "cuda"): 4 concurrent
// greedy requests on the synthetic V4-Flash-shaped checkpoint (v4_flash_synthetic.h), against the
// same requests on the CPU engine. Full tree only (src/engine needs the tokenizer, utf8proc and
// xxhash, which the device project does not build); the device project's cuda_v4_model_test runs
// the same scheduling over the Model interface. Tokens of both are printed; the first generated
// token of each request comes from logits within cuda_v4_model_test's tolerance of each other,
// so at least 2 of 4 must agree (greedy paths may part at near-ties later).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <initializer_list>
#include <cstdio>

#include "backend/cuda/cuda_ops.h"
#include "engine/engine.h"
#include "tests/cuda/v4_flash_synthetic.h"

namespace deepinfer {
namespace {

// Every token of `stream` until it closes (5 min at most); an error event fails the test.
std::vector<SampledToken> drain(RequestStream& stream, const std::string& what) {
  std::vector<SampledToken> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!stream.closed_and_drained() && std::chrono::steady_clock::now() < deadline) {
    auto ev = stream.next(std::chrono::milliseconds(200));
    if (!ev) continue;
    if (ev->kind == StreamEvent::Kind::kError) {
      ADD_FAILURE() << what << ": " << ev->error.message();
      break;
    }
    for (const SampledToken& t : ev->tokens) got.push_back(t);
  }
  return got;
}

// Prompts of the given lengths, ids in [2, 2048) (the synthetic checkpoint's vocabulary).
std::vector<std::vector<int32_t>> random_prompts(uint64_t seed, std::initializer_list<int64_t> lens) {
  std::vector<std::vector<int32_t>> prompts;
  testing::SyntheticRng r(seed);
  for (int64_t len : lens) {
    std::vector<int32_t> p(len);
    for (auto& t : p) t = static_cast<int32_t>(2 + r.next() % 2046);
    prompts.push_back(p);
  }
  return prompts;
}

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
  for (size_t i = 0; i < streams.size(); ++i)
    for (const SampledToken& t : drain(*streams[i], device + " request " + std::to_string(i))) out[i].push_back(t.id);
  return out;
}

TEST(CudaV4Engine, FourConcurrentGreedyRequestsMatchCpuEngine) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir("v4-flash-engine");
  testing::write_v4_flash_checkpoint(dir.path, testing::V4FlashSpec{});
  const auto prompts = random_prompts(99, {40, 150, 7, 130});
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

// Forwards to the model and counts the calls that sampled on the device.
class CountingModel final : public Model {
 public:
  CountingModel(std::unique_ptr<Model> m, int* device_calls) : m_(std::move(m)), calls_(device_calls) {}
  const ModelSpec& info() const override { return m_->info(); }
  std::unique_ptr<ModelState> new_state() const override { return m_->new_state(); }
  Status forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) override { return m_->forward(batch, out); }
  bool samples_on_device() const override { return m_->samples_on_device(); }
  Status forward_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                        std::vector<SampleResult>& out) override {
    ++*calls_;
    return m_->forward_sample(batch, rows, out);
  }

 private:
  std::unique_ptr<Model> m_;
  int* calls_;
};

struct Sampled {
  std::vector<SampledToken> tokens;  // every sample's, in stream order
};

// One request at a time (n samples each, admitted together), so both engines run the same steps.
std::vector<Sampled> run_sampled(const std::string& dir, bool device_sampling, int* device_calls,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 const std::vector<SamplingParams>& params) {
  EngineOptions eo;
  eo.device = "cuda";
  eo.load_tokenizer = false;
  eo.max_context = 1024;
  eo.device_sampling = device_sampling;
  eo.wrap_model = [device_calls](std::unique_ptr<Model> m) -> std::unique_ptr<Model> {
    return std::make_unique<CountingModel>(std::move(m), device_calls);
  };
  auto engine = make_engine(dir, eo);
  EXPECT_TRUE(engine.is_ok()) << engine.status().message();
  if (!engine.is_ok()) return {};
  std::vector<Sampled> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.id = "r" + std::to_string(i);
    r.prompt = prompts[i];
    r.sampling = params[i];
    auto s = (*engine)->submit(std::move(r));
    EXPECT_TRUE(s.is_ok()) << s.status().message();
    if (!s.is_ok()) return {};
    Sampled got{drain(**s, "request " + std::to_string(i))};
    out.push_back(std::move(got));
  }
  return out;
}

// Model::forward_sample in the engine (EngineOptions::device_sampling): seeded sampled requests
// with every sampler feature (temperature, top_k, top_p, min_p, penalties, logit_bias, min_tokens,
// n = 3, logprobs with top 5) and a greedy one give the same tokens as the same engine sampling
// on the host from the copied logits, logprobs within 1e-5 (the device sums in another order).
TEST(CudaV4Engine, DeviceSamplingMatchesHostSampling) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir("v4-flash-engine-sampling");
  testing::write_v4_flash_checkpoint(dir.path, testing::V4FlashSpec{});
  const auto prompts = random_prompts(7, {60, 130, 33});
  std::vector<SamplingParams> params(3);
  params[0].temperature = 0.9f, params[0].top_k = 40, params[0].top_p = 0.9f, params[0].n = 3;
  params[0].repetition_penalty = 1.2f, params[0].frequency_penalty = 0.3f, params[0].presence_penalty = 0.2f;
  params[0].logit_bias = {{5, 4.0f}, {17, -100.0f}};
  params[0].min_tokens = 3;
  params[1].temperature = 0.7f, params[1].min_p = 0.05f, params[1].n = 2;
  params[2].temperature = 0.0f;
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].seed = 1000 + i;
    params[i].max_tokens = 10;
    params[i].ignore_eos = true;
    params[i].logprobs = true;
    params[i].top_logprobs = i == 1 ? 0 : 5;
  }
  int on_calls = 0, off_calls = 0;
  const auto dev = run_sampled(dir.path, true, &on_calls, prompts, params);
  const auto host = run_sampled(dir.path, false, &off_calls, prompts, params);
  EXPECT_GT(on_calls, 0) << "the engine never sampled on the device";
  EXPECT_EQ(off_calls, 0);
  ASSERT_EQ(dev.size(), 3u);
  ASSERT_EQ(host.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_EQ(dev[i].tokens.size(), host[i].tokens.size());
    EXPECT_EQ(dev[i].tokens.size(), static_cast<size_t>(10 * params[i].n));
    double worst = 0;
    for (size_t t = 0; t < dev[i].tokens.size(); ++t) {
      const SampledToken &a = dev[i].tokens[t], &b = host[i].tokens[t];
      ASSERT_EQ(a.id, b.id) << "token " << t;
      worst = std::max(worst, std::abs(double(a.logprob) - b.logprob));
      ASSERT_EQ(a.top.size(), b.top.size()) << "token " << t;
      for (size_t j = 0; j < a.top.size(); ++j) {
        EXPECT_EQ(a.top[j].first, b.top[j].first) << "token " << t << " alternative " << j;
        worst = std::max(worst, std::abs(double(a.top[j].second) - b.top[j].second));
      }
    }
    EXPECT_LE(worst, 1e-5);
    std::printf("request %zu: %zu tokens equal, worst logprob difference %.2e\n", i, dev[i].tokens.size(), worst);
  }
}

}  // namespace
}  // namespace deepinfer
