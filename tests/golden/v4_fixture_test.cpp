// The CPU forward against transformers 5.17 references (tests/data/tiny-v4-{a,b}), and the
// invariants any correct engine keeps: prefill == chunked prefill == token-by-token decode,
// appending tokens never changes earlier positions, results independent of the batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/offline.h"
#include "loader/safetensors.h"
#include "model/deepseek_v4/model.h"
#include "sample/logprobs.h"

namespace deepinfer {
namespace {

struct Reference {
  int64_t B = 0, T = 0, V = 0;
  std::vector<int32_t> input_ids, greedy_prompt, greedy_output;
  std::vector<float> logits, logprobs, incremental_logits;
};

template <class T>
std::vector<T> read_all(const SafetensorsFile& f, const char* name) {
  const TensorInfo* info = f.find(name);
  EXPECT_NE(info, nullptr) << name;
  Tensor t = f.tensor(*info);
  auto s = t.span<T>();
  return {s.begin(), s.end()};
}

Reference load_reference(const std::string& dir) {
  auto f = SafetensorsFile::open(dir + "/reference.safetensors");
  EXPECT_TRUE(f.is_ok()) << f.status().to_string();
  Reference r;
  const TensorInfo* ids = (*f)->find("input_ids");
  r.B = ids->shape[0];
  r.T = ids->shape[1];
  r.V = (*f)->find("logits")->shape[2];
  r.input_ids = read_all<int32_t>(**f, "input_ids");
  r.greedy_prompt = read_all<int32_t>(**f, "greedy_prompt");
  r.greedy_output = read_all<int32_t>(**f, "greedy_output");
  r.logits = read_all<float>(**f, "logits");
  r.logprobs = read_all<float>(**f, "logprobs");
  r.incremental_logits = read_all<float>(**f, "incremental_logits");
  return r;
}

class V4Fixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::string(DI_TEST_DATA_DIR) + "/" + GetParam();
    ref_ = load_reference(dir_);
    auto be = Backend::create({});
    ASSERT_TRUE(be.is_ok());
    backend_ = std::move(be).value();
    auto m = v4::V4Model::load(dir_, *backend_);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value();
  }
  std::vector<int32_t> seq(int64_t b) const {
    return {ref_.input_ids.begin() + b * ref_.T, ref_.input_ids.begin() + (b + 1) * ref_.T};
  }
  // Logits of every position of `tokens`, fed in chunks of `chunk` (0: all at once).
  std::vector<float> run(const std::vector<int32_t>& tokens, int64_t chunk = 0) {
    v4::SequenceState st = model_->new_sequence();
    std::vector<float> all;
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (chunk <= 0) chunk = n;
    for (int64_t i = 0; i < n; i += chunk) {
      const int64_t c = std::min(chunk, n - i);
      v4::SeqInput in{&st, std::span<const int32_t>(tokens.data() + i, c), true};
      v4::ForwardOutput out;
      Status s = model_->forward(std::span<const v4::SeqInput>(&in, 1), out);
      EXPECT_TRUE(s.is_ok()) << s.to_string();
      all.insert(all.end(), out.logits.begin(), out.logits.end());
    }
    return all;
  }
  static float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    float m = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
  }

  std::string dir_;
  Reference ref_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<v4::V4Model> model_;
};

TEST_P(V4Fixture, LogprobsMatchTransformersAtEveryPosition) {
  std::vector<float> lp(ref_.V);
  for (int64_t b = 0; b < ref_.B; ++b) {
    const std::vector<float> logits = run(seq(b));
    float worst = 0;
    for (int64_t t = 0; t < ref_.T; ++t) {
      log_softmax({logits.data() + t * ref_.V, static_cast<size_t>(ref_.V)}, lp);
      for (int64_t v = 0; v < ref_.V; ++v)
        worst = std::max(worst, std::fabs(lp[v] - ref_.logprobs[(b * ref_.T + t) * ref_.V + v]));
    }
    EXPECT_LE(worst, 1e-3) << "sequence " << b;
    RecordProperty("max_abs_logprob_diff_seq" + std::to_string(b), std::to_string(worst));
  }
}

TEST_P(V4Fixture, PrefillChunkedAndDecodeAgree) {
  for (int64_t b = 0; b < ref_.B; ++b) {
    const std::vector<int32_t> s = seq(b);
    const std::vector<float> whole = run(s);
    for (int64_t chunk : {1, 3, 7, 16}) {
      const std::vector<float> chunked = run(s, chunk);
      // Row-independent kernels with fixed reduction orders: identical, not merely close.
      EXPECT_LE(max_abs_diff(whole, chunked), 1e-4) << "chunk " << chunk;
      EXPECT_EQ(whole, chunked) << "chunk " << chunk << " is not bitwise equal to the whole prefill";
    }
  }
}

TEST_P(V4Fixture, DecodeMatchesTransformersIncrementalReference) {
  const std::vector<float> decoded = run(seq(0), 1);
  const std::vector<float> ref(ref_.incremental_logits.begin(), ref_.incremental_logits.begin() + ref_.T * ref_.V);
  EXPECT_LE(max_abs_diff(decoded, ref), 1e-3);
}

TEST_P(V4Fixture, AppendingTokensNeverChangesEarlierPositions) {
  const std::vector<int32_t> s = seq(1);
  const std::vector<float> full = run(s);
  for (int64_t k : {int64_t{1}, int64_t{5}, int64_t{17}, int64_t{33}, ref_.T - 1}) {
    const std::vector<int32_t> prefix(s.begin(), s.begin() + k);
    const std::vector<float> part = run(prefix);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), full.begin())) << "prefix " << k;
  }
}

TEST_P(V4Fixture, FutureTokensDoNotLeakIntoThePast) {
  std::vector<int32_t> s = seq(0);
  const std::vector<float> base = run(s);
  const int64_t k = ref_.T / 2;
  for (int64_t t = k; t < ref_.T; ++t) s[t] = (s[t] + 1 + static_cast<int32_t>(t)) % static_cast<int32_t>(ref_.V);
  const std::vector<float> changed = run(s);
  EXPECT_TRUE(std::equal(base.begin(), base.begin() + k * ref_.V, changed.begin()));
  EXPECT_FALSE(std::equal(base.begin() + k * ref_.V, base.end(), changed.begin() + k * ref_.V));
}

TEST_P(V4Fixture, BatchOfBothSequencesIsBitwiseEqualToEachAlone) {
  const std::vector<int32_t> s0 = seq(0), s1 = seq(1);
  const std::vector<float> a0 = run(s0), a1 = run(s1);
  v4::SequenceState st0 = model_->new_sequence(), st1 = model_->new_sequence();
  v4::SeqInput in[2] = {{&st0, s0, true}, {&st1, s1, true}};
  v4::ForwardOutput out;
  ASSERT_TRUE(model_->forward(in, out).is_ok());
  const size_t n = s0.size() * ref_.V;
  EXPECT_TRUE(std::equal(a0.begin(), a0.end(), out.logits.begin()));
  EXPECT_TRUE(std::equal(a1.begin(), a1.end(), out.logits.begin() + n));

  // Mixed step: one sequence decoding while the other prefills a chunk.
  v4::SequenceState m0 = model_->new_sequence(), m1 = model_->new_sequence();
  std::vector<float> got0, got1;
  v4::SeqInput first{&m0, std::span<const int32_t>(s0.data(), 10), true};
  ASSERT_TRUE(model_->forward(std::span<const v4::SeqInput>(&first, 1), out).is_ok());
  got0 = out.logits;
  for (int64_t i = 10, j = 0; i < ref_.T; ++i, j += 9) {
    std::vector<v4::SeqInput> step{{&m0, std::span<const int32_t>(s0.data() + i, 1), true}};
    if (j < ref_.T) step.push_back({&m1, std::span<const int32_t>(s1.data() + j, std::min<int64_t>(9, ref_.T - j)), true});
    ASSERT_TRUE(model_->forward(step, out).is_ok());
    got0.insert(got0.end(), out.logits.begin(), out.logits.begin() + ref_.V);
    if (step.size() > 1) got1.insert(got1.end(), out.logits.begin() + ref_.V, out.logits.end());
  }
  EXPECT_EQ(got0, a0);
  EXPECT_EQ(got1, a1);
}

TEST_P(V4Fixture, GreedyGenerationMatchesTransformersGenerate) {
  GenerateRequest req{ref_.greedy_prompt, static_cast<int64_t>(ref_.greedy_output.size() - ref_.greedy_prompt.size())};
  auto res = generate_greedy(*model_, {req});
  ASSERT_TRUE(res.is_ok()) << res.status().to_string();
  std::vector<int32_t> full = ref_.greedy_prompt;
  full.insert(full.end(), (*res)[0].tokens.begin(), (*res)[0].tokens.end());
  // transformers stops at EOS; compare up to what it produced.
  ASSERT_LE(ref_.greedy_output.size(), full.size() + 0);
  EXPECT_EQ(std::vector<int32_t>(full.begin(), full.begin() + ref_.greedy_output.size()), ref_.greedy_output);
}

TEST_P(V4Fixture, ScoringIsIndependentOfPacking) {
  const std::vector<int32_t> s1 = seq(1);
  const std::vector<std::vector<int32_t>> seqs{seq(0), s1, std::vector<int32_t>(s1.begin(), s1.begin() + 7)};
  ScoreOptions one{.top_logprobs = 3, .max_batch_tokens = 1};
  ScoreOptions all{.top_logprobs = 3, .max_batch_tokens = 1 << 20};
  auto a = score_sequences(*model_, seqs, one);
  auto b = score_sequences(*model_, seqs, all);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_EQ((*a)[i].token_logprobs, (*b)[i].token_logprobs);
    EXPECT_EQ((*a)[i].top_logprobs, (*b)[i].top_logprobs);
    EXPECT_FALSE((*a)[i].token_logprobs[0].has_value());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V4Fixture, ::testing::Values("tiny-v4-a", "tiny-v4-b"));

// docs/architecture.md: every output element is one fixed-order dot product and threads only
// split the elements, so results do not depend on the number of CPU threads. The same forwards
// (each sequence whole, chunked prefill then token-by-token decode, and both sequences in one
// batch) on pools of 1, 2, 3 and 8 threads give bitwise the same logits.
class V4ThreadCount : public ::testing::TestWithParam<std::string> {
 protected:
  struct Logits {
    std::vector<float> whole0, whole1, stepped0, batch;
  };
  static Logits run_with(const std::string& dir, const Reference& ref, int threads) {
    Logits r;
    BackendConfig bc;
    bc.num_threads = threads;
    auto be = Backend::create(bc);
    EXPECT_TRUE(be.is_ok());
    if (!be.is_ok()) return r;
    EXPECT_EQ((*be)->pool().size(), threads) << "the pool does not have the requested thread count";
    auto m = v4::V4Model::load(dir, **be);
    EXPECT_TRUE(m.is_ok()) << m.status().to_string();
    if (!m.is_ok()) return r;
    v4::V4Model& model = **m;
    const int64_t T = ref.T;
    const std::vector<int32_t> s0(ref.input_ids.begin(), ref.input_ids.begin() + T);
    const std::vector<int32_t> s1(ref.input_ids.begin() + T, ref.input_ids.begin() + 2 * T);
    auto forward = [&](std::vector<v4::SeqInput> in, std::vector<float>& dst) {
      v4::ForwardOutput out;
      const Status st = model.forward(in, out);
      EXPECT_TRUE(st.is_ok()) << st.to_string();
      dst.insert(dst.end(), out.logits.begin(), out.logits.end());
    };
    {
      v4::SequenceState a = model.new_sequence(), b = model.new_sequence();
      forward({{&a, s0, true}}, r.whole0);
      forward({{&b, s1, true}}, r.whole1);
    }
    {
      // A 7-token chunk, then one token at a time (the decode path).
      v4::SequenceState a = model.new_sequence();
      forward({{&a, std::span<const int32_t>(s0.data(), 7), true}}, r.stepped0);
      for (int64_t i = 7; i < T; ++i) forward({{&a, std::span<const int32_t>(s0.data() + i, 1), true}}, r.stepped0);
    }
    {
      v4::SequenceState a = model.new_sequence(), b = model.new_sequence();
      forward({{&a, s0, true}, {&b, s1, true}}, r.batch);
    }
    return r;
  }
  static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }
  static float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    float m = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
  }
};

TEST_P(V4ThreadCount, LogitsAreBitwiseIndependentOfTheThreadCount) {
  const std::string dir = std::string(DI_TEST_DATA_DIR) + "/" + GetParam();
  const Reference ref = load_reference(dir);
  ASSERT_GE(ref.B, 2);
  const Logits one = run_with(dir, ref, 1);
  ASSERT_EQ(one.whole0.size(), static_cast<size_t>(ref.T * ref.V));
  ASSERT_EQ(one.batch.size(), static_cast<size_t>(2 * ref.T * ref.V));
  for (int threads : {2, 3, 8}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    const Logits got = run_with(dir, ref, threads);
    EXPECT_TRUE(same_bits(one.whole0, got.whole0)) << "max diff " << max_abs_diff(one.whole0, got.whole0);
    EXPECT_TRUE(same_bits(one.whole1, got.whole1)) << "max diff " << max_abs_diff(one.whole1, got.whole1);
    EXPECT_TRUE(same_bits(one.stepped0, got.stepped0)) << "max diff " << max_abs_diff(one.stepped0, got.stepped0);
    EXPECT_TRUE(same_bits(one.batch, got.batch)) << "max diff " << max_abs_diff(one.batch, got.batch);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V4ThreadCount, ::testing::Values("tiny-v4-a", "tiny-v4-b"));

}  // namespace
}  // namespace deepinfer
