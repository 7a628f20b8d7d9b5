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
// `finish`: each sample's finish reason (sized by the caller).
std::vector<SampledToken> drain(RequestStream& stream, const std::string& what,
                                std::vector<std::string>* finish = nullptr) {
  std::vector<SampledToken> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!stream.closed_and_drained() && std::chrono::steady_clock::now() < deadline) {
    auto ev = stream.next(std::chrono::milliseconds(200));
    if (!ev) continue;
    if (ev->kind == StreamEvent::Kind::kError) {
      ADD_FAILURE() << what << ": " << ev->error.message();
      break;
    }
    if (ev->kind == StreamEvent::Kind::kFinished && finish && ev->sample_index < static_cast<int>(finish->size()))
      (*finish)[ev->sample_index] = ev->finish_reason;
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

// The engine over the synthetic checkpoint on `device`, and one greedy request per prompt
// (ignore_eos; prompt_logprobs -1: none). No streams when something failed (reported).
struct Submitted {
  std::unique_ptr<EngineClient> engine;
  std::vector<std::shared_ptr<RequestStream>> streams;
};
Submitted submit_greedy(const std::string& dir, const std::string& device, const std::vector<std::vector<int32_t>>& prompts,
                        int64_t max_tokens, int prompt_logprobs = -1) {
  EngineOptions eo;
  eo.device = device;
  eo.load_tokenizer = false;
  eo.max_context = 1024;
  Submitted out;
  auto engine = make_engine(dir, eo);
  EXPECT_TRUE(engine.is_ok()) << engine.status().message();
  if (!engine.is_ok()) return out;
  out.engine = std::move(engine).value();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.id = device + "-" + std::to_string(i);
    r.prompt = prompts[i];
    r.sampling.temperature = 0.f;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    r.sampling.prompt_logprobs = prompt_logprobs;
    auto s = out.engine->submit(std::move(r));
    EXPECT_TRUE(s.is_ok()) << s.status().message();
    if (!s.is_ok()) return {};
    out.streams.push_back(std::move(s).value());
  }
  return out;
}

std::vector<std::vector<int32_t>> run_engine(const std::string& dir, const std::string& device,
                                             const std::vector<std::vector<int32_t>>& prompts) {
  Submitted sub = submit_greedy(dir, device, prompts, 8);
  std::vector<std::vector<int32_t>> out(sub.streams.size());
  for (size_t i = 0; i < sub.streams.size(); ++i)
    for (const SampledToken& t : drain(*sub.streams[i], device + " request " + std::to_string(i))) out[i].push_back(t.id);
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

// serve --gpu-memory-utilization on the GPU model: the state capacity comes from the device's
// memory after the weights and a warm-up step (V4GpuModel::device_memory, engine/memory_budget.h):
// positive, below the granted share, at least the weights' worth below the free memory before the
// model loaded; the engine then serves a request as usual.
TEST(CudaV4Engine, StateCapacityFromDeviceMemory) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir("v4-flash-engine-mem");
  testing::write_v4_flash_checkpoint(dir.path, testing::V4FlashSpec{});
  size_t free0 = 0, total = 0;
  ASSERT_TRUE(cuda::device_memory_info(&free0, &total)) << cuda::last_error();
  EngineOptions eo;
  eo.device = "cuda";
  eo.load_tokenizer = false;
  eo.max_context = 1024;
  eo.prefix_cache_bytes = int64_t{64} << 20;
  eo.gpu_memory_utilization = 0.5;
  auto engine = make_engine(dir.path, eo);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const int64_t cap = (*engine)->stats().state_bytes_capacity - eo.prefix_cache_bytes;
  std::printf("device %.1f GiB, free before load %.1f GiB, state capacity at 0.5: %.1f GiB\n", total / 1073741824.0,
              free0 / 1073741824.0, cap / 1073741824.0);
  EXPECT_GT(cap, 0);
  EXPECT_LT(cap, static_cast<int64_t>(total / 2));
  EXPECT_LT(cap, static_cast<int64_t>(free0) - static_cast<int64_t>(total / 2) + 1);
  EngineRequest r;
  r.id = "mem";
  r.prompt = random_prompts(5, {30})[0];
  r.sampling.temperature = 0.f;
  r.sampling.max_tokens = 4;
  r.sampling.ignore_eos = true;
  auto s = (*engine)->submit(std::move(r));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(drain(**s, "mem").size(), 4u);
}

// Forwards to the model (the asynchronous calls too) and counts the steps that sampled on the
// device, and the ones launched while another was still in flight.
class CountingModel final : public Model {
 public:
  CountingModel(std::unique_ptr<Model> m, int* device_calls, int* overlapped = nullptr)
      : m_(std::move(m)), calls_(device_calls), overlapped_(overlapped) {}
  const ModelSpec& info() const override { return m_->info(); }
  std::unique_ptr<ModelState> new_state() const override { return m_->new_state(); }
  Status forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) override { return m_->forward(batch, out); }
  bool samples_on_device() const override { return m_->samples_on_device(); }
  Status forward_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                        std::vector<SampleResult>& out) override {
    ++*calls_;
    return m_->forward_sample(batch, rows, out);
  }
  Status launch_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                       std::span<const int32_t> feed) override {
    ++*calls_;
    if (overlapped_ && m_->pending_samples() > 0) ++*overlapped_;
    return m_->launch_sample(batch, rows, feed);
  }
  Status collect_sample(std::vector<SampleResult>& out) override { return m_->collect_sample(out); }
  int pending_samples() const override { return m_->pending_samples(); }

 private:
  std::unique_ptr<Model> m_;
  int* calls_;
  int* overlapped_;
};

struct Sampled {
  std::vector<SampledToken> tokens;  // every sample's, in stream order
};

// One request at a time (n samples each, admitted together), so both engines run the same steps.
std::vector<Sampled> run_sampled(const std::string& dir, bool device_sampling, int* device_calls,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 const std::vector<SamplingParams>& params, bool overlap = true,
                                 int* overlapped = nullptr, std::vector<std::vector<std::string>>* finish = nullptr) {
  EngineOptions eo;
  eo.device = "cuda";
  eo.load_tokenizer = false;
  eo.max_context = 1024;
  eo.device_sampling = device_sampling;
  eo.overlap = overlap;
  eo.wrap_model = [device_calls, overlapped](std::unique_ptr<Model> m) -> std::unique_ptr<Model> {
    return std::make_unique<CountingModel>(std::move(m), device_calls, overlapped);
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
    std::vector<std::string>* reasons = nullptr;
    if (finish) reasons = &finish->emplace_back(static_cast<size_t>(params[i].n));
    Sampled got{drain(**s, "request " + std::to_string(i), reasons)};
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

// The overlapped step loop (EngineOptions::overlap, Forward::launch_sampled: step N+1 queued
// before step N's tokens reach the host, its decoding sequences fed step N's tokens on the
// device) gives the synchronous loop's streams exactly: same tokens, logprobs and top logprobs,
// finish reasons. One request at a time (n samples), so both loops run the same steps; where a
// sample stops early (a stop id), the overlapped loop has computed one token more for it in the
// next step (discarded), so the other samples' rows ran in a batch one row larger there (rows
// are batch-independent at these sizes: below the cuBLASLt and wide-expert row thresholds).
TEST(CudaV4Engine, OverlappedLoopGivesTheSynchronousStreams) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir("v4-flash-engine-overlap");
  testing::write_v4_flash_checkpoint(dir.path, testing::V4FlashSpec{});
  const auto prompts = random_prompts(11, {60, 130, 33, 17});
  std::vector<SamplingParams> params(4);
  params[0].temperature = 0.0f;
  params[1].temperature = 0.9f, params[1].top_k = 40, params[1].top_p = 0.9f, params[1].n = 3;
  params[1].logit_bias = {{5, 2.0f}};
  params[2].temperature = 0.7f, params[2].min_p = 0.05f, params[2].n = 2;
  params[3].temperature = 1.0f, params[3].n = 3;
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].seed = 2000 + i;
    params[i].max_tokens = 12 + static_cast<int64_t>(i);
    params[i].ignore_eos = true;
    params[i].logprobs = true;
    params[i].top_logprobs = i == 2 ? 0 : 5;
  }
  // A stop id for request 3: a token its first synchronous run samples early in some sample.
  {
    int calls = 0;
    const auto probe = run_sampled(dir.path, true, &calls, {prompts[3]}, {params[3]}, false);
    ASSERT_EQ(probe.size(), 1u);
    ASSERT_GT(probe[0].tokens.size(), 4u);
    params[3].stop_token_ids = {probe[0].tokens[3].id};
  }
  int on_calls = 0, off_calls = 0, overlapped = 0, off_overlapped = 0;
  std::vector<std::vector<std::string>> on_finish, off_finish;
  const auto on = run_sampled(dir.path, true, &on_calls, prompts, params, true, &overlapped, &on_finish);
  const auto off = run_sampled(dir.path, true, &off_calls, prompts, params, false, &off_overlapped, &off_finish);
  EXPECT_GT(overlapped, 0) << "no step was launched before the previous one was collected";
  EXPECT_EQ(off_overlapped, 0);
  ASSERT_EQ(on.size(), params.size());
  ASSERT_EQ(off.size(), params.size());
  EXPECT_EQ(on_finish, off_finish);
  bool some_stop = false;
  for (const auto& f : on_finish)
    for (const auto& r : f) some_stop |= r == "stop";
  EXPECT_TRUE(some_stop) << "request 3's stop id ended no sample";
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_EQ(on[i].tokens.size(), off[i].tokens.size());
    for (size_t t = 0; t < on[i].tokens.size(); ++t) {
      const SampledToken &a = on[i].tokens[t], &b = off[i].tokens[t];
      ASSERT_EQ(a.id, b.id) << "token " << t;
      EXPECT_EQ(a.logprob, b.logprob) << "token " << t;
      EXPECT_EQ(a.top, b.top) << "token " << t;
    }
    std::printf("request %zu: %zu tokens equal with and without overlap\n", i, on[i].tokens.size());
  }
}

// Model::launch_sample on the GPU model directly: two steps in flight, the second fed the first's
// tokens on the device, equal to forward_sample steps fed from the host.
TEST(CudaV4Engine, LaunchSampleFedOnTheDeviceEqualsForwardSample) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir("v4-flash-launch-sample");
  testing::write_v4_flash_checkpoint(dir.path, testing::V4FlashSpec{});
  auto be = Backend::create({});
  ASSERT_TRUE(be.is_ok());
  LoadOptions lo;
  lo.device = "cuda";
  auto loaded = load_model(dir.path, **be, lo);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  Model& m = **loaded;
  const auto prompts = random_prompts(5, {40, 9, 70});
  SamplingParams p;
  p.temperature = 0.8f;
  p.logprobs = true;
  p.top_logprobs = 3;
  auto rows_for = [&](int64_t pos) {
    std::vector<SampleRow> rows(prompts.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i].params = &p, rows[i].rng = {31, uint32_t(i)}, rows[i].position = pos;
    return rows;
  };
  constexpr int kSteps = 6;
  // Reference: forward_sample, each step's tokens fed from the host.
  std::vector<std::vector<SampleResult>> ref(kSteps);
  {
    std::vector<std::unique_ptr<ModelState>> st;
    for (size_t i = 0; i < prompts.size(); ++i) st.push_back(m.new_state());
    std::vector<int32_t> last(prompts.size());
    for (int k = 0; k < kSteps; ++k) {
      std::vector<ModelInput> batch;
      for (size_t i = 0; i < prompts.size(); ++i)
        batch.push_back({st[i].get(), k == 0 ? std::span<const int32_t>(prompts[i]) : std::span<const int32_t>(&last[i], 1), false});
      ASSERT_TRUE(m.forward_sample(batch, rows_for(k), ref[k]).is_ok());
      for (size_t i = 0; i < prompts.size(); ++i) last[i] = ref[k][i].token;
    }
  }
  // Pipelined: step k+1 launched, fed on the device, before step k is collected.
  std::vector<std::unique_ptr<ModelState>> st;
  for (size_t i = 0; i < prompts.size(); ++i) st.push_back(m.new_state());
  const int32_t placeholder = 0;
  std::vector<ModelInput> first;
  for (size_t i = 0; i < prompts.size(); ++i) first.push_back({st[i].get(), prompts[i], false});
  ASSERT_TRUE(m.launch_sample(first, rows_for(0)).is_ok());
  std::vector<int32_t> feed(prompts.size());
  for (size_t i = 0; i < feed.size(); ++i) feed[i] = static_cast<int32_t>(i);
  std::vector<SampleResult> got;
  for (int k = 1; k <= kSteps; ++k) {
    if (k < kSteps) {
      std::vector<ModelInput> fed;
      for (size_t i = 0; i < prompts.size(); ++i) fed.push_back({st[i].get(), std::span<const int32_t>(&placeholder, 1), false});
      ASSERT_TRUE(m.launch_sample(fed, rows_for(k), feed).is_ok());
      EXPECT_EQ(m.pending_samples(), 2);
    }
    ASSERT_TRUE(m.collect_sample(got).is_ok());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got[i].token, ref[k - 1][i].token) << "step " << k - 1 << " sequence " << i;
      EXPECT_EQ(got[i].logprob, ref[k - 1][i].logprob) << "step " << k - 1 << " sequence " << i;
      EXPECT_EQ(got[i].top_logprobs, ref[k - 1][i].top_logprobs) << "step " << k - 1 << " sequence " << i;
    }
  }
  EXPECT_EQ(m.pending_samples(), 0);
}

// Prompt logprobs (SamplingParams::prompt_logprobs) per request: the engine's kPromptLogprobs
// events in order, and whether each started where the last one ended.
struct PromptLogprobs {
  std::vector<SampledToken> tokens;
  bool contiguous = true;
};
std::vector<PromptLogprobs> run_prompt_logprobs(const std::string& dir, const std::string& device,
                                                const std::vector<std::vector<int32_t>>& prompts, int k) {
  Submitted sub = submit_greedy(dir, device, prompts, 2, k);
  const auto& streams = sub.streams;
  std::vector<PromptLogprobs> out(streams.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  for (size_t i = 0; i < streams.size(); ++i) {
    while (!streams[i]->closed_and_drained() && std::chrono::steady_clock::now() < deadline) {
      auto ev = streams[i]->next(std::chrono::milliseconds(200));
      if (!ev) continue;
      if (ev->kind == StreamEvent::Kind::kError) ADD_FAILURE() << device << ": " << ev->error.message();
      if (ev->kind != StreamEvent::Kind::kPromptLogprobs) continue;
      out[i].contiguous = out[i].contiguous && ev->prompt_offset == static_cast<int64_t>(out[i].tokens.size()) + 1;
      for (auto& t : ev->tokens) out[i].tokens.push_back(std::move(t));
    }
  }
  return out;
}

// The engine on the GPU model with prompt logprobs: every logits row of each prefill step comes
// back from the device (a 530-token prompt: two steps of at most 512 rows). Against the CPU
// engine: the same tokens in order, logprobs within the model's logits tolerance (relative RMS
// 0.08, cuda_v4_model_test), the best alternative mostly the same.
TEST(CudaV4Engine, PromptLogprobsMatchCpuEngine) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir("v4-flash-engine-plp");
  testing::write_v4_flash_checkpoint(dir.path, testing::V4FlashSpec{});
  const auto prompts = random_prompts(7, {530, 21});
  const auto gpu = run_prompt_logprobs(dir.path, "cuda", prompts, 2);
  const auto cpu = run_prompt_logprobs(dir.path, "cpu", prompts, 2);
  ASSERT_EQ(gpu.size(), 2u);
  ASSERT_EQ(cpu.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(gpu[i].tokens.size(), prompts[i].size() - 1) << i;
    ASSERT_EQ(cpu[i].tokens.size(), prompts[i].size() - 1) << i;
    EXPECT_TRUE(gpu[i].contiguous && cpu[i].contiguous) << i;
    double diff2 = 0, ref2 = 0;
    size_t top_agree = 0;
    for (size_t t = 0; t < gpu[i].tokens.size(); ++t) {
      const SampledToken &g = gpu[i].tokens[t], &c = cpu[i].tokens[t];
      EXPECT_EQ(g.id, prompts[i][t + 1]);
      diff2 += (g.logprob - c.logprob) * (g.logprob - c.logprob);
      ref2 += c.logprob * c.logprob;
      top_agree += !g.top.empty() && !c.top.empty() && g.top[0].first == c.top[0].first;
    }
    const double rel = std::sqrt(diff2 / std::max(ref2, 1e-30));
    std::printf("prompt %zu (%zu tokens): logprob rel RMS %.4g, best alternative agrees %zu/%zu\n", i,
                prompts[i].size(), rel, top_agree, gpu[i].tokens.size());
    EXPECT_LE(rel, 0.08) << i;
    EXPECT_GE(static_cast<double>(top_agree), 0.6 * static_cast<double>(gpu[i].tokens.size())) << i;
  }
}

}  // namespace
}  // namespace deepinfer
