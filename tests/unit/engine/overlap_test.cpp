// The overlapped step loop (EngineOptions::overlap) on tiny-v4-b: step N+1 launched before step
// N is collected must give exactly the streams of the synchronous loop (tokens, logprobs, finish
// reasons, stop strings, completion counts). The CPU model gets the overlapped path through a
// view that says it samples on its device (host_forward_sample) and keeps Model's default
// launch_sample / collect_sample (forward_sample run at launch, fed tokens taken from the
// previous results).
// Also: Model's default asynchronous API against forward_sample.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

using engine_test::make_req;
using engine_test::prompt_of;

const std::string kModel = std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b";

// Counts of the calls that reached the asynchronous API, shared with the test.
struct Calls {
  std::atomic<int> launches{0}, overlapped{0}, sync_samples{0};
};

// The CPU model, presented as one that samples on its device: forward_sample is
// host_forward_sample, launch_sample and collect_sample are Model's defaults. `eos` replaces the
// model's EOS id.
class DeviceView final : public Model {
 public:
  DeviceView(std::unique_ptr<Model> m, Calls* calls, std::optional<int32_t> eos) : m_(std::move(m)), calls_(calls) {
    info_ = m_->info();
    if (eos) info_.eos_token_id = *eos;
  }
  const ModelSpec& info() const override { return info_; }
  std::unique_ptr<ModelState> new_state() const override { return m_->new_state(); }
  Status forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) override { return m_->forward(batch, out); }
  bool samples_on_device() const override { return true; }
  Status forward_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                        std::vector<SampleResult>& out) override {
    if (pending_samples() == 0) ++calls_->sync_samples;
    return host_forward_sample(*m_, batch, rows, out);
  }
  Status launch_sample(std::span<const ModelInput> batch, std::span<const SampleRow> rows,
                       std::span<const int32_t> feed = {}) override {
    ++calls_->launches;
    if (pending_samples() > 0) ++calls_->overlapped;
    return Model::launch_sample(batch, rows, feed);
  }

 private:
  std::unique_ptr<Model> m_;
  Calls* calls_;
  ModelSpec info_;
};

struct Options {
  bool overlap = true;
  int64_t state_capacity = int64_t{4} << 30;
  int64_t prefix_cache = int64_t{512} << 20;
  int64_t max_context = 65536;
  int max_running = 256;
  std::optional<int32_t> eos = std::nullopt;
};

std::unique_ptr<EngineClient> engine(const Options& o, Calls* calls) {
  EngineOptions eo;
  eo.threads = 2;
  eo.overlap = o.overlap;
  eo.state_capacity_bytes = o.state_capacity;
  eo.prefix_cache_bytes = o.prefix_cache;
  eo.max_context = o.max_context;
  eo.sched.max_running = o.max_running;
  eo.wrap_model = [calls, eos = o.eos](std::unique_ptr<Model> m) -> std::unique_ptr<Model> {
    return std::make_unique<DeviceView>(std::move(m), calls, eos);
  };
  auto e = make_engine(kModel, eo);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return std::move(e).value();
}

// Everything a stream says, per sample, in order.
struct Sample {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> top;
  std::string finish;
  std::optional<std::string> stop;
  int64_t completion = -1, prompt = -1;
  bool operator==(const Sample&) const = default;
};
struct Streamed {
  std::vector<Sample> samples;
  std::vector<int64_t> cached;
  bool error = false;
  bool operator==(const Streamed& o) const { return samples == o.samples && error == o.error; }
};

Streamed read_all(RequestStream& s, int n, int stop_after_tokens = -1, const std::function<void()>& at_stop = {}) {
  Streamed c;
  c.samples.resize(n);
  c.cached.resize(n);
  int seen = 0;
  for (;;) {
    auto ev = s.next(std::chrono::milliseconds(30000));
    if (!ev) break;
    if (ev->kind == StreamEvent::Kind::kTokens) {
      for (const auto& t : ev->tokens) {
        Sample& x = c.samples[ev->sample_index];
        x.ids.push_back(t.id), x.logprobs.push_back(t.logprob), x.top.push_back(t.top);
        if (++seen == stop_after_tokens && at_stop) at_stop();
      }
    } else if (ev->kind == StreamEvent::Kind::kFinished) {
      Sample& x = c.samples[ev->sample_index];
      x.finish = ev->finish_reason, x.stop = ev->stop_string;
      x.completion = ev->completion_tokens, x.prompt = ev->prompt_tokens;
      c.cached[ev->sample_index] = ev->cached_prompt_tokens;
    } else {
      c.error = true;
    }
  }
  return c;
}

// The stats are published after each step: wait for the one after the last stream closed.
void expect_idle(EngineClient& e) {
  for (int i = 0; i < 400 && e.stats().running > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(e.stats().running, 0);
}

// Submits every request at once and reads every stream.
std::vector<Streamed> run(const Options& o, const std::vector<EngineRequest>& reqs, Calls* calls = nullptr) {
  Calls local;
  auto e = engine(o, calls ? calls : &local);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) {
    auto s = e->submit(r);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    streams.push_back(*s);
  }
  std::vector<Streamed> out;
  for (size_t i = 0; i < streams.size(); ++i) out.push_back(read_all(*streams[i], reqs[i].sampling.n));
  expect_idle(*e);
  return out;
}

void expect_same(const std::vector<Streamed>& a, const std::vector<Streamed>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].samples.size(), b[i].samples.size()) << "request " << i;
    for (size_t k = 0; k < a[i].samples.size(); ++k) {
      const Sample &x = a[i].samples[k], &y = b[i].samples[k];
      EXPECT_EQ(x.ids, y.ids) << "request " << i << " sample " << k;
      EXPECT_EQ(x.logprobs, y.logprobs) << "request " << i << " sample " << k;
      EXPECT_EQ(x.top, y.top) << "request " << i << " sample " << k;
      EXPECT_EQ(x.finish, y.finish) << "request " << i << " sample " << k;
      EXPECT_EQ(x.stop, y.stop) << "request " << i << " sample " << k;
      EXPECT_EQ(x.completion, y.completion) << "request " << i << " sample " << k;
      EXPECT_EQ(x.completion, static_cast<int64_t>(x.ids.size())) << "request " << i << " sample " << k;
    }
    EXPECT_EQ(a[i].error, b[i].error);
  }
}

// Overlap on and off; the overlapped run must have launched steps ahead.
void expect_overlap_changes_nothing(const Options& base, const std::vector<EngineRequest>& reqs) {
  Options on = base, off = base;
  on.overlap = true, off.overlap = false;
  Calls c_on, c_off;
  const auto a = run(on, reqs, &c_on);
  const auto b = run(off, reqs, &c_off);
  expect_same(a, b);
  EXPECT_GT(c_on.overlapped.load(), 0) << "no step was launched before the previous one was collected";
  EXPECT_EQ(c_off.launches.load(), 0);
}

TEST(EngineOverlap, GreedyConcurrentRequestsWithDifferentLengths) {
  std::vector<EngineRequest> reqs;
  const int64_t max_tokens[] = {1, 2, 5, 17, 9, 30};
  for (int i = 0; i < 6; ++i) reqs.push_back(make_req("g" + std::to_string(i), prompt_of(i, 5 + 9 * i), max_tokens[i]));
  expect_overlap_changes_nothing({}, reqs);
}

TEST(EngineOverlap, SeededSamplingWithNSamplesAndLogprobs) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    EngineRequest r = make_req("s" + std::to_string(i), prompt_of(40 + i, 12 + 7 * i), 14 + i, 0.9f, 100 + i, 1 + i);
    r.sampling.top_k = 50;
    r.sampling.top_p = 0.9f;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 3;
    r.sampling.logit_bias = {{7, 2.0f}};
    reqs.push_back(std::move(r));
  }
  expect_overlap_changes_nothing({}, reqs);
}

// A sample that ends at step N (EOS, a stop id, a stop string) was already launched in step N+1:
// that token is discarded, never streamed.
TEST(EngineOverlap, EosStopIdsAndStopStringsEndTheSameWay) {
  // The greedy continuation of one prompt, without stops, to pick stops that occur in it.
  const auto ref = run({.overlap = false}, {make_req("ref", prompt_of(7, 20), 24)});
  const std::vector<int32_t>& ids = ref[0].samples[0].ids;
  ASSERT_EQ(ids.size(), 24u);
  auto tok = tokenizer::Tokenizer::from_path(kModel + "/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  auto text = (*tok)->decode(std::vector<int32_t>(ids.begin() + 6, ids.begin() + 9));
  ASSERT_TRUE(text.is_ok());
  std::vector<EngineRequest> reqs;
  EngineRequest stop_id = make_req("stop-id", prompt_of(7, 20), 24);
  stop_id.sampling.stop_token_ids = {ids[5]};
  reqs.push_back(stop_id);
  ASSERT_FALSE(text->empty());
  EngineRequest stop_str = make_req("stop-str", prompt_of(7, 20), 24);
  stop_str.sampling.stop = {*text};
  reqs.push_back(stop_str);
  EngineRequest sampled = make_req("sampled", prompt_of(8, 15), 20, 1.0f, 5, 3);
  sampled.sampling.stop_token_ids = {ids[3], ids[10]};
  reqs.push_back(sampled);
  reqs.push_back(make_req("long", prompt_of(9, 30), 25));
  expect_overlap_changes_nothing({}, reqs);
  // EOS: the view reports a token of the reference as the model's EOS.
  std::vector<EngineRequest> eos_reqs;
  for (int i = 0; i < 3; ++i) {
    EngineRequest r = make_req("eos" + std::to_string(i), prompt_of(7, 20), 24, i == 0 ? 0.0f : 1.0f, 9 + i, 2);
    r.sampling.ignore_eos = false;
    eos_reqs.push_back(r);
  }
  Options eos;
  eos.eos = ids[4];
  expect_overlap_changes_nothing(eos, eos_reqs);
  const auto got = run(eos, {eos_reqs[0]});
  EXPECT_EQ(got[0].samples[0].finish, "stop");
  EXPECT_EQ(got[0].samples[0].ids.size(), 5u);
}

// max_tokens and the context limit end samples at known steps: they are not fed into the next one.
TEST(EngineOverlap, MaxTokensAndContextLimit) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    EngineRequest r = make_req("c" + std::to_string(i), prompt_of(60 + i, 20 + 3 * i), 40, 0.7f, 3 + i);
    r.sampling.max_tokens.reset();  // until the context: 48 tokens
    reqs.push_back(r);
  }
  reqs.push_back(make_req("m", prompt_of(70, 10), 3));
  Options o;
  o.max_context = 48;
  Calls calls;
  expect_overlap_changes_nothing(o, reqs);
  const auto got = run(o, reqs, &calls);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].samples[0].finish, "length");
    EXPECT_EQ(got[i].samples[0].ids.size(), static_cast<size_t>(48 - 20 - 3 * i));
  }
}

// Preemption under a small state capacity: a sequence in flight is collected before it is
// evicted; recomputed sequences continue exactly.
TEST(EngineOverlap, PreemptionUnderSmallCapacity) {
  Options o;
  o.prefix_cache = 0;
  o.state_capacity = 100000;  // tiny-v4-b: 42.5 kB fixed + 152 B per token (engine_test.cpp)
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(make_req("p" + std::to_string(i), prompt_of(20 + i, 40), 30, 0.8f, 100 + i));
  expect_overlap_changes_nothing(o, reqs);
  // The published reservations never exceed the capacity between steps, overlapped or not.
  Calls calls;
  auto e = engine(o, &calls);
  std::atomic<bool> stop{false};
  int64_t worst = 0;
  std::thread watch([&] {
    while (!stop.load()) worst = std::max(worst, e->stats().state_bytes_used);
  });
  std::vector<std::shared_ptr<RequestStream>> s;
  for (const auto& r : reqs) s.push_back(*e->submit(r));
  for (auto& x : s) EXPECT_EQ(read_all(*x, 1).samples[0].finish, "length");
  stop = true;
  watch.join();
  EXPECT_LE(worst, o.state_capacity);
  EXPECT_GT(calls.overlapped.load(), 0);
  expect_idle(*e);
  EXPECT_GT(e->stats().preemptions, 0);
  EXPECT_EQ(e->stats().state_bytes_used, 0);
}

// Prefix-cache hits (snapshots are taken with no step in flight) give the cold result.
TEST(EngineOverlap, PrefixCacheHits) {
  std::vector<int32_t> shared = prompt_of(9, 70);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p = shared;
    p.push_back(11 + i);
    reqs.push_back(make_req("w" + std::to_string(i), p, 8, 0.5f, 4));
  }
  // One after the other, so later ones hit the snapshots of the first.
  for (bool overlap : {true, false}) {
    Calls calls;
    Options o;
    o.overlap = overlap;
    auto e = engine(o, &calls);
    Options cold;
    cold.prefix_cache = 0;
    cold.overlap = false;
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto got = read_all(**e->submit(reqs[i]), 1);
      auto ref = run(cold, {reqs[i]});
      expect_same({got}, ref);
      if (i > 0) {
        EXPECT_GE(got.cached[0], 64) << i;
      }
    }
    EXPECT_GT(e->stats().prefix_cache_hit_tokens, 0);
    if (overlap) {
      EXPECT_GT(calls.overlapped.load(), 0);
    }
  }
}

// Cancelling mid-stream: the cancelled stream is a prefix of the full one and ends "cancelled";
// the other requests are unchanged; every state is freed.
TEST(EngineOverlap, CancellationMidStream) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(make_req("x" + std::to_string(i), prompt_of(80 + i, 16), 40, 0.6f, 8 + i));
  const auto full = run({.overlap = false, .prefix_cache = 0}, reqs);
  Calls calls;
  auto e = engine({.overlap = true, .prefix_cache = 0}, &calls);
  std::vector<std::shared_ptr<RequestStream>> s;
  for (const auto& r : reqs) s.push_back(*e->submit(r));
  Streamed cancelled = read_all(*s[1], 1, 5, [&] { e->cancel("x1"); });
  const Sample& c = cancelled.samples[0];
  EXPECT_EQ(c.finish, "cancelled");
  EXPECT_GE(c.ids.size(), 5u);
  EXPECT_LT(c.ids.size(), 40u);
  EXPECT_EQ(c.completion, static_cast<int64_t>(c.ids.size()));
  const auto& want = full[1].samples[0];
  EXPECT_TRUE(std::equal(c.ids.begin(), c.ids.end(), want.ids.begin()));
  expect_same({read_all(*s[0], 1)}, {full[0]});
  expect_same({read_all(*s[2], 1)}, {full[2]});
  expect_idle(*e);
  EXPECT_EQ(e->stats().state_bytes_used, 0);
}

// Requests that need the host for each token (penalties, min_tokens) run synchronous steps, in
// the same engine as overlapped ones; results are unchanged.
TEST(EngineOverlap, HostOnlyRequestsFallBackToSynchronousSteps) {
  std::vector<EngineRequest> reqs;
  EngineRequest pen = make_req("pen", prompt_of(90, 14), 12, 0.8f, 21);
  pen.sampling.repetition_penalty = 1.3f;
  pen.sampling.frequency_penalty = 0.2f;
  reqs.push_back(pen);
  EngineRequest min = make_req("min", prompt_of(91, 9), 10, 0.8f, 22);
  min.sampling.min_tokens = 4;
  reqs.push_back(min);
  reqs.push_back(make_req("plain", prompt_of(92, 11), 20, 0.8f, 23));
  expect_overlap_changes_nothing({}, reqs);
}

// A shutdown with a step in flight: every stream still ends.
TEST(EngineOverlap, ShutdownWithAStepInFlight) {
  Calls calls;
  std::vector<std::shared_ptr<RequestStream>> s;
  {
    auto e = engine({}, &calls);
    for (int i = 0; i < 3; ++i) s.push_back(*e->submit(make_req("z" + std::to_string(i), prompt_of(i, 10), 5000)));
    for (int i = 0; i < 2000 && calls.overlapped.load() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto& x : s) EXPECT_EQ(read_all(*x, 1).samples[0].finish, "cancelled");
}

// Model's default asynchronous API (over host_forward_sample): launch_sample / collect_sample
// with fed entries equal forward_sample step by step; its errors.
TEST(ModelAsync, DefaultLaunchCollectEqualsForwardSample) {
  auto be = Backend::create({});
  ASSERT_TRUE(be.is_ok());
  auto m1 = load_model(kModel, **be);
  auto m2 = load_model(kModel, **be);
  ASSERT_TRUE(m1.is_ok() && m2.is_ok());
  Calls calls;
  DeviceView sync(std::move(m1).value(), &calls, std::nullopt), async(std::move(m2).value(), &calls, std::nullopt);
  SamplingParams p;
  p.temperature = 0.9f;
  p.logprobs = true;
  p.top_logprobs = 2;
  const std::vector<int32_t> pa = prompt_of(1, 9), pb = prompt_of(2, 13);
  auto rows_for = [&](int64_t pos) {
    std::vector<SampleRow> rows(2);
    for (int i = 0; i < 2; ++i) {
      rows[i].params = &p;
      rows[i].rng = RngKey{77, static_cast<uint32_t>(i)};
      rows[i].position = pos;
    }
    return rows;
  };
  // Reference: three steps, each fed the previous step's tokens from the host.
  auto sa = sync.new_state(), sb = sync.new_state();
  std::vector<std::vector<SampleResult>> ref(3);
  std::vector<int32_t> last(2);
  for (int step = 0; step < 3; ++step) {
    std::vector<ModelInput> batch;
    if (step == 0) {
      batch = {{sa.get(), pa, false}, {sb.get(), pb, false}};
    } else {
      batch = {{sa.get(), std::span<const int32_t>(&last[0], 1), false},
               {sb.get(), std::span<const int32_t>(&last[1], 1), false}};
    }
    ASSERT_TRUE(sync.forward_sample(batch, rows_for(step), ref[step]).is_ok());
    last = {ref[step][0].token, ref[step][1].token};
  }
  // Pipelined: step k+1 launched (fed rows 1 and 0 of step k, swapped order) before step k is collected.
  auto aa = async.new_state(), ab = async.new_state();
  const int32_t placeholder = 0;
  std::vector<SampleResult> got;
  EXPECT_FALSE(async.collect_sample(got).is_ok());
  std::vector<ModelInput> first = {{aa.get(), pa, false}, {ab.get(), pb, false}};
  std::vector<ModelInput> fed1 = {{aa.get(), std::span<const int32_t>(&placeholder, 1), false}};
  const std::vector<SampleRow> rows1 = rows_for(1);
  EXPECT_FALSE(async.launch_sample(fed1, std::span<const SampleRow>(rows1).first(1), std::vector<int32_t>{0})
                   .is_ok());  // nothing in flight to feed from
  ASSERT_TRUE(async.launch_sample(first, rows_for(0)).is_ok());
  EXPECT_EQ(aa->length(), 9);  // advanced at launch
  std::vector<int32_t> swap = {1, 0};
  for (int step = 1; step < 3; ++step) {
    std::vector<ModelInput> fed = {{ab.get(), std::span<const int32_t>(&placeholder, 1), false},
                                   {aa.get(), std::span<const int32_t>(&placeholder, 1), false}};
    auto rows = rows_for(step);
    std::swap(rows[0], rows[1]);
    // Row i of the previous launch: step 1's previous is in (a, b) order, later ones in (b, a).
    std::vector<int32_t> feed = step == 1 ? std::vector<int32_t>{1, 0} : std::vector<int32_t>{0, 1};
    ASSERT_TRUE(async.launch_sample(fed, rows, feed).is_ok());
    EXPECT_EQ(async.pending_samples(), 2);
    EXPECT_FALSE(async.launch_sample(fed, rows, feed).is_ok());  // a third step in flight
    ASSERT_TRUE(async.collect_sample(got).is_ok());
    const bool swapped = step - 1 >= 1;
    for (int i = 0; i < 2; ++i) {
      const SampleResult& r = got[swapped ? 1 - i : i];
      EXPECT_EQ(r.token, ref[step - 1][i].token) << "step " << step - 1;
      EXPECT_EQ(r.logprob, ref[step - 1][i].logprob);
      EXPECT_EQ(r.top_logprobs, ref[step - 1][i].top_logprobs);
    }
  }
  ASSERT_TRUE(async.collect_sample(got).is_ok());
  EXPECT_EQ(got[1].token, ref[2][0].token);
  EXPECT_EQ(got[0].token, ref[2][1].token);
  EXPECT_EQ(async.pending_samples(), 0);
  EXPECT_EQ(aa->length(), sa->length());
}

}  // namespace
}  // namespace deepinfer
