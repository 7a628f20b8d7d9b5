// The serving engine end to end on tiny-v4-b: continuous batching gives the same tokens as
// running alone, seeded sampling is reproducible in any company, prefix-cache hits and
// preemption (recompute) change nothing, cancellation frees state, bad requests are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "engine/offline.h"
#include "loader/safetensors.h"

namespace deepinfer {
namespace {

using engine_test::make_req;
using engine_test::prompt_of;

const std::string kModel = std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b";

struct Collected {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> finish;
  std::vector<int64_t> cached;
  std::vector<int64_t> finish_index;
  Status error;
};

Collected collect(RequestStream& s, int n) {
  Collected c;
  c.tokens.resize(n);
  c.finish.resize(n);
  c.cached.resize(n);
  c.finish_index.resize(n);
  for (;;) {
    auto ev = s.next(std::chrono::milliseconds(20000));
    if (!ev) break;
    if (ev->kind == StreamEvent::Kind::kTokens)
      for (const auto& t : ev->tokens) c.tokens[ev->sample_index].push_back(t.id);
    else if (ev->kind == StreamEvent::Kind::kFinished) {
      c.finish[ev->sample_index] = ev->finish_reason;
      c.cached[ev->sample_index] = ev->cached_prompt_tokens;
      c.finish_index[ev->sample_index] = ev->finish_index;
    } else
      c.error = ev->error;
  }
  return c;
}

// Request ids in the order the engine finished them (reader threads may wake in any order).
std::vector<std::string> finish_order(std::vector<std::pair<int64_t, std::string>> finished) {
  std::sort(finished.begin(), finished.end());
  std::vector<std::string> order;
  for (const auto& f : finished) order.push_back(f.second);
  return order;
}

std::unique_ptr<EngineClient> engine(EngineOptions o = {}) {
  o.threads = 2;
  auto e = make_engine(kModel, o);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return std::move(e).value();
}

TEST(Engine, ConcurrentGreedyEqualsOfflineAlone) {
  auto e = engine();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 6; ++i) {
    auto s = e->submit(make_req("r" + std::to_string(i), prompt_of(i, 5 + 9 * i), 12));
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    streams.push_back(*s);
  }
  auto be = Backend::create({});
  auto model = v4::V4Model::load(kModel, **be);
  for (int i = 0; i < 6; ++i) {
    Collected c = collect(*streams[i], 1);
    auto alone = generate_greedy(**model, {GenerateRequest{prompt_of(i, 5 + 9 * i), 12}});
    ASSERT_TRUE(alone.is_ok());
    EXPECT_EQ(c.tokens[0].size(), 12u);
    EXPECT_EQ(c.finish[0], "length");
    // ignore_eos: offline greedy may stop at EOS earlier; compare the common part.
    const auto& ref = (*alone)[0].tokens;
    EXPECT_TRUE(std::equal(ref.begin(), ref.end(), c.tokens[0].begin())) << "request " << i;
  }
}

TEST(Engine, SeededSamplingIsReproducibleInAnyCompany) {
  auto e = engine();
  auto alone = e->submit(make_req("alone", prompt_of(3, 20), 16, 0.9f, 42));
  Collected a = collect(**alone, 1);
  std::vector<std::shared_ptr<RequestStream>> noise;
  for (int i = 0; i < 4; ++i) noise.push_back(*e->submit(make_req("n" + std::to_string(i), prompt_of(10 + i, 30), 20, 1.0f)));
  auto busy = e->submit(make_req("busy", prompt_of(3, 20), 16, 0.9f, 42));
  Collected b = collect(**busy, 1);
  EXPECT_EQ(a.tokens[0], b.tokens[0]);
  auto other = e->submit(make_req("other", prompt_of(3, 20), 16, 0.9f, 43));
  EXPECT_NE(collect(**other, 1).tokens[0], a.tokens[0]);
  for (auto& s : noise) collect(*s, 1);
}

TEST(Engine, NSamplesDifferAndAreEachReproducible) {
  auto e = engine();
  auto r1 = collect(**e->submit(make_req("a", prompt_of(5, 12), 10, 1.0f, 7, 3)), 3);
  auto r2 = collect(**e->submit(make_req("b", prompt_of(5, 12), 10, 1.0f, 7, 3)), 3);
  EXPECT_EQ(r1.tokens, r2.tokens);
  EXPECT_NE(r1.tokens[0], r1.tokens[1]);
  EXPECT_NE(r1.tokens[1], r1.tokens[2]);
}

TEST(Engine, PrefixCacheHitGivesTheColdResult) {
  EngineOptions cold_opts;
  cold_opts.prefix_cache_bytes = 0;
  auto cold = engine(cold_opts);
  auto warm = engine();
  std::vector<int32_t> shared = prompt_of(9, 70);
  std::vector<int32_t> p1 = shared, p2 = shared;
  p1.push_back(11);
  p2.push_back(12);
  auto first = collect(**warm->submit(make_req("w1", p1, 8)), 1);
  auto second = collect(**warm->submit(make_req("w2", p2, 8)), 1);
  auto ref = collect(**cold->submit(make_req("c2", p2, 8)), 1);
  EXPECT_EQ(first.cached[0], 0);
  EXPECT_GE(second.cached[0], 64);  // block boundary inside the shared 70 tokens
  EXPECT_EQ(second.tokens[0], ref.tokens[0]);
  EXPECT_GT(warm->stats().prefix_cache_hit_tokens, 0);
}

TEST(Engine, PreemptionByRecomputeChangesNothing) {
  EngineOptions small;
  small.prefix_cache_bytes = 0;
  // Room for two sequences at admission but not as they grow (tiny-v4-b: 42.5 kB fixed +
  // 152 B per token): one is preempted, recomputed later, and must continue identically.
  small.state_capacity_bytes = 100000;
  auto e = engine(small);
  auto big = engine();
  std::vector<std::shared_ptr<RequestStream>> a, b;
  for (int i = 0; i < 3; ++i) {
    a.push_back(*e->submit(make_req("p" + std::to_string(i), prompt_of(20 + i, 40), 30, 0.8f, 100 + i)));
    b.push_back(*big->submit(make_req("q" + std::to_string(i), prompt_of(20 + i, 40), 30, 0.8f, 100 + i)));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(collect(*a[i], 1).tokens[0], collect(*b[i], 1).tokens[0]) << i;
  EXPECT_GT(e->stats().preemptions, 0);
}

// The published state memory (reservations of running sequences: their state once the next token
// is computed, plus prefix-cache snapshots) never exceeds the capacity, even while sequences grow
// past what fits and get preempted.
TEST(Engine, StateMemoryNeverExceedsCapacityBetweenSteps) {
  EngineOptions small;
  small.prefix_cache_bytes = 0;
  small.state_capacity_bytes = 100000;  // as in PreemptionByRecomputeChangesNothing
  auto e = engine(small);
  std::vector<std::shared_ptr<RequestStream>> s;
  for (int i = 0; i < 3; ++i) s.push_back(*e->submit(make_req("m" + std::to_string(i), prompt_of(20 + i, 40), 60)));
  std::atomic<bool> stop{false};
  int64_t worst = 0, cap = 0, polls = 0;
  std::thread watch([&] {
    while (!stop.load()) {
      EngineStats st = e->stats();
      worst = std::max(worst, st.state_bytes_used);
      cap = st.state_bytes_capacity;
      ++polls;
    }
  });
  for (auto& x : s) EXPECT_EQ(collect(*x, 1).finish[0], "length");
  stop = true;
  watch.join();
  EXPECT_GT(e->stats().preemptions, 0);
  EXPECT_GT(polls, 0);
  EXPECT_EQ(cap, small.state_capacity_bytes);
  EXPECT_LE(worst, cap);
}

// Fairness: with room for one running sequence, waiting requests are admitted by priority
// (larger first) and first come, first served within a priority.
TEST(Engine, HigherPriorityIsAdmittedFirstThenFcfs) {
  EngineOptions o;
  o.sched.max_running = 1;
  o.prefix_cache_bytes = 0;
  auto e = engine(o);
  std::mutex mu;
  std::vector<std::pair<int64_t, std::string>> finished;  // (engine finish index, id)
  std::vector<std::thread> readers;
  auto submit = [&](const std::string& id, int priority, int64_t max_tokens) {
    auto r = make_req(id, prompt_of(static_cast<int>(id[0]), 12), max_tokens);
    r.priority = priority;
    auto st = e->submit(std::move(r));
    ASSERT_TRUE(st.is_ok()) << st.status().to_string();
    readers.emplace_back([&, id, stream = *st] {
      Collected c = collect(*stream, 1);
      EXPECT_EQ(c.finish[0], "length") << id;
      std::lock_guard<std::mutex> lock(mu);
      finished.emplace_back(c.finish_index[0], id);
    });
  };
  submit("a-running", 0, 400);
  for (int i = 0; i < 2000 && e->stats().running == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(e->stats().running, 1);
  submit("b-low", -1, 4);
  submit("c-normal", 0, 4);
  submit("d-normal", 0, 4);
  submit("e-high", 5, 4);
  submit("f-high", 5, 4);
  for (auto& t : readers) t.join();
  const std::vector<std::string> order = finish_order(finished);
  const std::vector<std::string> want = {"a-running", "e-high", "f-high", "c-normal", "d-normal", "b-low"};
  EXPECT_EQ(order, want);
}

// Fairness under memory pressure: a preempted sequence goes back into the waiting queue in
// priority order, not ahead of a higher-priority request that was already waiting for room.
TEST(Engine, PreemptedSequenceDoesNotJumpAHigherPriorityWaitingOne) {
  EngineOptions o;
  o.prefix_cache_bytes = 0;
  // tiny-v4-b: 42.5 kB fixed + 152 B per token. Two 40-token prompts run together until ~100
  // tokens each, then the later one is preempted; a third request does not fit while both run.
  o.state_capacity_bytes = 2 * 42500 + 2 * 152 * (41 + 100);
  auto e = engine(o);
  std::mutex mu;
  std::vector<std::pair<int64_t, std::string>> finished;  // (engine finish index, id)
  std::vector<std::thread> readers;
  auto submit = [&](const std::string& id, int priority, int prompt_len, int64_t max_tokens) {
    auto r = make_req(id, prompt_of(static_cast<int>(id[0]), prompt_len), max_tokens);
    r.priority = priority;
    auto st = e->submit(std::move(r));
    ASSERT_TRUE(st.is_ok()) << st.status().to_string();
    readers.emplace_back([&, id, stream = *st] {
      Collected c = collect(*stream, 1);
      EXPECT_EQ(c.finish[0], "length") << id;
      std::lock_guard<std::mutex> lock(mu);
      finished.emplace_back(c.finish_index[0], id);
    });
  };
  submit("a-first", 0, 40, 300);
  submit("b-second", 0, 40, 300);
  for (int i = 0; i < 2000 && e->stats().running < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(e->stats().running, 2);
  submit("h-high", 5, 10, 4);  // waits for room; b's preemption makes some
  for (auto& t : readers) t.join();
  EXPECT_GT(e->stats().preemptions, 0);
  const std::vector<std::string> order = finish_order(finished);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], "h-high") << order[0] << " " << order[1] << " " << order[2];
  EXPECT_EQ(order.back(), "b-second");
}

TEST(Engine, CancelFreesState) {
  auto e = engine();
  auto s = e->submit(make_req("long", prompt_of(1, 10), 5000));
  ASSERT_TRUE(s.is_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  e->cancel("long");
  Collected c = collect(**s, 1);
  EXPECT_EQ(c.finish[0], "cancelled");
  EXPECT_LT(c.tokens[0].size(), 5000u);
  for (int i = 0; i < 100 && e->stats().running > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(e->stats().running, 0);
}

TEST(Engine, InvalidRequestsAreRefusedBeforeAnyWork) {
  auto e = engine();
  EXPECT_EQ(e->submit(make_req("x", {}, 4)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->submit(make_req("x", {1, 5000}, 4)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->submit(make_req("x", prompt_of(1, 10), 1 << 20)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->submit(make_req("x", prompt_of(1, 10), 4, 1.0f, 1, 1000)).status().code(),
            StatusCode::kInvalidArgument);
  auto bad = make_req("x", prompt_of(1, 10), 4);
  bad.sampling.top_p = 0;
  EXPECT_EQ(e->submit(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->stats().running + e->stats().waiting, 0);
}

TEST(Engine, FullQueueAnswersResourceExhausted) {
  EngineOptions o;
  o.sched.max_waiting = 2;
  o.sched.max_running = 1;
  auto e = engine(o);
  std::vector<std::shared_ptr<RequestStream>> ok;
  int refused = 0;
  for (int i = 0; i < 8; ++i) {
    auto s = e->submit(make_req("f" + std::to_string(i), prompt_of(i, 30), 50));
    if (s.is_ok()) ok.push_back(*s);
    else if (s.status().code() == StatusCode::kResourceExhausted) ++refused;
  }
  EXPECT_GT(refused, 0);
  for (auto& s : ok) EXPECT_EQ(collect(*s, 1).finish[0], "length");
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

// V4.1 through the same engine: greedy equals the NumPy reference's greedy continuation, with
// other requests running, and a prefix-cache hit (window rings, shared caches, Engram history
// restored from a snapshot) changes nothing.
TEST(EngineV41, GreedyMatchesReferenceAndPrefixHitsChangeNothing) {
  const std::string dir = std::string(DI_TEST_DATA_DIR) + "/tiny-v41-a";
  auto f = SafetensorsFile::open(dir + "/reference.safetensors");
  ASSERT_TRUE(f.is_ok());
  auto ids = [&](const char* n) {
    auto s = (*f)->tensor(*(*f)->find(n)).span<int32_t>();
    return std::vector<int32_t>(s.begin(), s.end());
  };
  const auto prompt = ids("greedy_prompt"), full = ids("greedy_output");
  EngineOptions o;
  o.threads = 2;
  auto e = make_engine(dir, o);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  const int64_t n_new = static_cast<int64_t>(full.size() - prompt.size());
  auto noise = (*e)->submit(make_req("noise", prompt_of(4, 50), 30, 1.0f, 9));
  auto main = (*e)->submit(make_req("main", prompt, n_new));
  ASSERT_TRUE(main.is_ok() && noise.is_ok());
  EXPECT_EQ(collect(**main, 1).tokens[0], std::vector<int32_t>(full.begin() + prompt.size(), full.end()));
  collect(**noise, 1);

  EngineOptions cold = o;
  cold.prefix_cache_bytes = 0;
  auto c = make_engine(dir, cold);
  std::vector<int32_t> shared = prompt_of(11, 40), p2 = shared;
  p2.push_back(5);
  collect(**(*e)->submit(make_req("w1", shared, 4)), 1);
  auto warm = collect(**(*e)->submit(make_req("w2", p2, 10)), 1);
  EXPECT_GE(warm.cached[0], 32);
  EXPECT_EQ(warm.tokens[0], collect(**(*c)->submit(make_req("c2", p2, 10)), 1).tokens[0]);
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

// Records the inputs of every forward and prefetch call (state, its length then, the tokens).
struct CallLog {
  struct Input {
    const ModelState* state;
    int64_t at;
    std::vector<int32_t> tokens;
  };
  std::mutex mu;
  std::vector<std::pair<bool, std::vector<Input>>> calls;  // (is_prefetch, inputs) in call order
  void add(bool prefetch, std::span<const ModelInput> batch) {
    std::vector<Input> in;
    for (const auto& b : batch) in.push_back({b.state, b.state->length(), {b.tokens.begin(), b.tokens.end()}});
    std::lock_guard<std::mutex> lock(mu);
    calls.emplace_back(prefetch, std::move(in));
  }
};

class RecordingModel final : public Model {
 public:
  RecordingModel(std::unique_ptr<Model> inner, CallLog* log) : inner_(std::move(inner)), log_(log) {}
  const ModelSpec& info() const override { return inner_->info(); }
  std::unique_ptr<ModelState> new_state() const override { return inner_->new_state(); }
  Status forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) override {
    log_->add(false, batch);
    return inner_->forward(batch, out);
  }
  void prefetch(std::span<const ModelInput> upcoming) override {
    log_->add(true, upcoming);
    inner_->prefetch(upcoming);
  }

 private:
  std::unique_ptr<Model> inner_;
  CallLog* log_;
};

TEST(Engine, PrefetchAnnouncesEveryDecodeInputOneStepAhead) {
  auto log = std::make_shared<CallLog>();
  EngineOptions o;
  o.sched.max_batch_tokens = 16;  // prompts of 5..41 tokens take several prefill chunks
  o.wrap_model = [log](std::unique_ptr<Model> m) { return std::make_unique<RecordingModel>(std::move(m), log.get()); };
  auto e = engine(o);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(*e->submit(make_req("p" + std::to_string(i), prompt_of(i, 5 + 12 * i), 6)));
  for (auto& s : streams) EXPECT_EQ(collect(*s, 1).tokens[0].size(), 6u);
  e.reset();  // joins the loop: the log is complete
  int64_t decode_inputs = 0, chunk_inputs_announced = 0;
  const CallLog::Input* none = nullptr;
  for (size_t k = 0; k < log->calls.size(); ++k) {
    if (log->calls[k].first) continue;
    // The announcement for this forward is the prefetch call right before it (if any).
    const auto* ann = (k > 0 && log->calls[k - 1].first) ? &log->calls[k - 1].second : nullptr;
    for (const auto& in : log->calls[k].second) {
      const CallLog::Input* match = none;
      if (ann)
        for (const auto& a : *ann)
          if (a.state == in.state) match = &a;
      const bool decode = in.tokens.size() == 1 && in.at > 0;
      if (decode) {
        ++decode_inputs;
        ASSERT_NE(match, nullptr) << "decode input of forward " << k << " was not prefetched";
      }
      if (!match) continue;  // a sequence admitted at this step
      if (!decode) ++chunk_inputs_announced;
      EXPECT_EQ(match->at, in.at) << "forward " << k;
      ASSERT_LE(in.tokens.size(), match->tokens.size()) << "forward " << k;
      EXPECT_TRUE(std::equal(in.tokens.begin(), in.tokens.end(), match->tokens.begin())) << "forward " << k;
    }
  }
  EXPECT_GE(decode_inputs, 4 * 5);        // 5 decode steps per request after the first token
  EXPECT_GT(chunk_inputs_announced, 0);   // later prefill chunks are announced too
}

// A model whose new_state() fails while `full` is set (a device out of memory).
class FullModel final : public Model {
 public:
  FullModel(std::unique_ptr<Model> inner, std::atomic<bool>* full) : inner_(std::move(inner)), full_(full) {}
  const ModelSpec& info() const override { return inner_->info(); }
  std::unique_ptr<ModelState> new_state() const override { return *full_ ? nullptr : inner_->new_state(); }
  Status forward(std::span<const ModelInput> batch, v4::ForwardOutput& out) override { return inner_->forward(batch, out); }

 private:
  std::unique_ptr<Model> inner_;
  std::atomic<bool>* full_;
};

TEST(Engine, NoMemoryForStateIsAnErrorAndTheEngineKeepsServing) {
  auto full = std::make_shared<std::atomic<bool>>(true);
  EngineOptions o;
  o.prefix_cache_bytes = 0;
  o.wrap_model = [full](std::unique_ptr<Model> m) { return std::make_unique<FullModel>(std::move(m), full.get()); };
  auto e = engine(o);
  Collected c = collect(**e->submit(make_req("full", prompt_of(1, 9), 4)), 1);
  EXPECT_EQ(c.error.code(), StatusCode::kResourceExhausted) << c.error.to_string();
  EXPECT_EQ(c.finish[0], "error");
  *full = false;
  Collected ok = collect(**e->submit(make_req("after", prompt_of(1, 9), 4)), 1);
  EXPECT_TRUE(ok.error.is_ok()) << ok.error.to_string();
  EXPECT_EQ(ok.tokens[0].size(), 4u);
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

// Everything a sampled request reports per token: id, logprob, top alternatives (as bits).
struct TokenBits {
  int32_t id;
  uint32_t logprob;
  std::vector<std::pair<int32_t, uint32_t>> top;
  bool operator==(const TokenBits&) const = default;
};

std::vector<TokenBits> collect_bits(RequestStream& s) {
  std::vector<TokenBits> out;
  for (;;) {
    auto ev = s.next(std::chrono::milliseconds(60000));
    if (!ev) break;
    EXPECT_NE(ev->kind, StreamEvent::Kind::kError) << ev->error.to_string();
    for (const auto& t : ev->tokens) {
      TokenBits b{t.id, std::bit_cast<uint32_t>(t.logprob), {}};
      for (const auto& [id, lp] : t.top) b.top.emplace_back(id, std::bit_cast<uint32_t>(lp));
      out.push_back(std::move(b));
    }
  }
  return out;
}

// Batch invariance end to end: one seeded, sampled request (temperature, top_p, logprobs and
// top_logprobs) gives bitwise the same tokens, logprobs and alternatives alone and among other
// requests, with steps of 1, 7 and any number of tokens, and with prefill chunks sized by the
// step-cost model (a tiny target: one prefix-cache block per step once fitted). The forwards are recorded to
// check each configuration really chunked as intended.
TEST(Engine, SampledRequestIsBitwiseInvariantToBatchAndChunking) {
  const std::vector<int32_t> prompt = prompt_of(7, 37);
  auto main_req = [&] {
    EngineRequest r = make_req("main", prompt, 20, 0.8f, 1234);
    r.sampling.top_p = 0.9f;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 5;
    return r;
  };
  struct Config {
    const char* name;
    int64_t max_batch_tokens;
    double target_step_ms;
  };
  const Config configs[] = {{"steps of 1", 1, 0}, {"steps of 7", 7, 0}, {"whole prompt", 4096, 0}, {"cost model", 4096, 1e-3}};
  std::vector<TokenBits> ref;
  for (const Config& cfg : configs) {
    for (bool company : {false, true}) {
      SCOPED_TRACE(std::string(cfg.name) + (company ? ", in company" : ", alone"));
      auto log = std::make_shared<CallLog>();
      auto block = std::make_shared<int64_t>(0);  // the prefix-cache block (chunk alignment)
      EngineOptions o;
      o.sched.max_batch_tokens = cfg.max_batch_tokens;
      o.sched.target_step_ms = cfg.target_step_ms;
      o.wrap_model = [log, block](std::unique_ptr<Model> m) {
        *block = m->info().prefix_block_tokens;
        return std::make_unique<RecordingModel>(std::move(m), log.get());
      };
      auto e = engine(o);
      ASSERT_GT(*block, 1);
      if (cfg.target_step_ms > 0) {  // enough measured steps for the cost model to be fitted
        Collected warm = collect(**e->submit(make_req("warmup", prompt_of(90, 5), 12)), 1);
        ASSERT_EQ(warm.tokens[0].size(), 12u);
      }
      std::vector<std::shared_ptr<RequestStream>> noise;
      auto add_noise = [&](int i, int len, int64_t max_tokens) {
        EngineRequest r = make_req("noise" + std::to_string(i), prompt_of(40 + i, len), max_tokens, 1.0f, 77 + i);
        r.sampling.logprobs = true;
        r.sampling.top_logprobs = 3;
        auto st = e->submit(std::move(r));
        ASSERT_TRUE(st.is_ok()) << st.status().to_string();
        noise.push_back(*st);
      };
      if (company) add_noise(0, 23, 4);  // ahead of main: its prefill and decodes go first
      auto s = e->submit(main_req());
      ASSERT_TRUE(s.is_ok()) << s.status().to_string();
      if (company)
        for (int i = 1; i < 4; ++i) add_noise(i, 11 + 13 * i, 30);  // prefills beside main's decodes
      std::vector<TokenBits> got = collect_bits(**s);
      for (auto& n : noise) collect_bits(*n);
      e.reset();  // joins the loop: the log is complete

      int64_t widest_step = 0, widest_input = 0, shared_steps = 0;
      for (const auto& [prefetch, inputs] : log->calls) {
        if (prefetch) continue;
        int64_t step = 0;
        for (const auto& in : inputs) {
          step += static_cast<int64_t>(in.tokens.size());
          widest_input = std::max(widest_input, static_cast<int64_t>(in.tokens.size()));
        }
        widest_step = std::max(widest_step, step);
        shared_steps += inputs.size() > 1;
      }
      EXPECT_LE(widest_step, cfg.max_batch_tokens);
      if (cfg.max_batch_tokens == 7) EXPECT_EQ(widest_input, 7);
      // A whole prompt is cut at the last block boundary it crosses.
      if (cfg.max_batch_tokens == 4096 && cfg.target_step_ms == 0) EXPECT_GE(widest_input, 37 / *block * *block);
      if (cfg.target_step_ms > 0) EXPECT_LE(widest_input, *block);  // one block per step
      if (company && cfg.max_batch_tokens > 1) EXPECT_GT(shared_steps, 0);

      ASSERT_EQ(got.size(), 20u);
      for (const auto& t : got) ASSERT_EQ(t.top.size(), 5u);
      if (ref.empty()) ref = got;
      for (size_t k = 0; k < got.size(); ++k)
        if (!(got[k] == ref[k])) {
          ADD_FAILURE() << "first difference at token " << k << ": id " << got[k].id << " vs " << ref[k].id
                        << ", logprob bits " << got[k].logprob << " vs " << ref[k].logprob;
          break;
        }
    }
  }
}

}  // namespace
}  // namespace deepinfer
