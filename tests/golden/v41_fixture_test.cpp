// The V4.1 CPU forward against the independent NumPy reference (tools/reference/deepseek_v41.py,
// tests/data/tiny-v41-{a,b}): logprobs at every position, the invariants (prefill == chunked
// prefill == decode, causality, batch invariance), greedy generation, and Engram hashing
// (multipliers, primes, token map, hash ids with collisions and padding) against stored values.
#include <gtest/gtest.h>

#include <cmath>

#include "loader/safetensors.h"
#include "model/deepseek_v41/model.h"
#include "sample/logprobs.h"

namespace deepinfer {
namespace {

template <class T>
std::vector<T> read_all(const SafetensorsFile& f, const char* name) {
  const TensorInfo* info = f.find(name);
  EXPECT_NE(info, nullptr) << name;
  if (!info) return {};
  auto s = f.tensor(*info).span<T>();
  return {s.begin(), s.end()};
}

class V41Fixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::string(DI_TEST_DATA_DIR) + "/" + GetParam();
    auto f = SafetensorsFile::open(dir_ + "/reference.safetensors");
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    ref_ = std::move(f).value();
    const TensorInfo* ids = ref_->find("input_ids");
    B_ = ids->shape[0];
    T_ = ids->shape[1];
    V_ = ref_->find("logits")->shape[2];
    ids_ = read_all<int32_t>(*ref_, "input_ids");
    auto be = Backend::create({});
    ASSERT_TRUE(be.is_ok());
    backend_ = std::move(be).value();
    auto m = v41::V41Model::load(dir_, *backend_);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value();
  }
  std::vector<int32_t> seq(int64_t b) const { return {ids_.begin() + b * T_, ids_.begin() + (b + 1) * T_}; }
  std::vector<float> run(const std::vector<int32_t>& tokens, int64_t chunk = 0) {
    v41::V41SequenceState st = model_->new_sequence();
    std::vector<float> all;
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (chunk <= 0) chunk = n;
    for (int64_t i = 0; i < n; i += chunk) {
      v41::SeqInput in{&st, std::span<const int32_t>(tokens.data() + i, std::min(chunk, n - i)), true};
      v4::ForwardOutput out;
      Status s = model_->forward(std::span<const v41::SeqInput>(&in, 1), out);
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
  std::shared_ptr<const SafetensorsFile> ref_;
  int64_t B_ = 0, T_ = 0, V_ = 0;
  std::vector<int32_t> ids_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<v41::V41Model> model_;
};

TEST_P(V41Fixture, LogprobsMatchTheReferenceAtEveryPosition) {
  const std::vector<float> ref = read_all<float>(*ref_, "logprobs");
  std::vector<float> lp(V_);
  for (int64_t b = 0; b < B_; ++b) {
    const std::vector<float> logits = run(seq(b));
    float worst = 0;
    for (int64_t t = 0; t < T_; ++t) {
      log_softmax({logits.data() + t * V_, static_cast<size_t>(V_)}, lp);
      for (int64_t v = 0; v < V_; ++v) worst = std::max(worst, std::fabs(lp[v] - ref[(b * T_ + t) * V_ + v]));
    }
    EXPECT_LE(worst, 1e-3) << "sequence " << b;
    std::printf("[ %s ] sequence %lld: max |logprob - reference| = %.3g\n", GetParam().c_str(), (long long)b, worst);
    RecordProperty("max_abs_logprob_diff_seq" + std::to_string(b), std::to_string(worst));
  }
}

TEST_P(V41Fixture, PrefillChunkedAndDecodeAgreeBitwise) {
  for (int64_t b = 0; b < B_; ++b) {
    const std::vector<int32_t> s = seq(b);
    const std::vector<float> whole = run(s);
    for (int64_t chunk : {1, 3, 7, 16}) {
      const std::vector<float> chunked = run(s, chunk);
      EXPECT_LE(max_abs_diff(whole, chunked), 1e-4) << "chunk " << chunk;
      EXPECT_EQ(whole, chunked) << "chunk " << chunk << " is not bitwise equal to the whole prefill";
    }
  }
}

TEST_P(V41Fixture, AppendingTokensNeverChangesEarlierPositions) {
  const std::vector<int32_t> s = seq(1);
  const std::vector<float> full = run(s);
  for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{13}, int64_t{33}, T_ - 1}) {
    const std::vector<float> part = run(std::vector<int32_t>(s.begin(), s.begin() + k));
    EXPECT_TRUE(std::equal(part.begin(), part.end(), full.begin())) << "prefix " << k;
  }
  std::vector<int32_t> changed = seq(0);
  const std::vector<float> base = run(changed);
  const int64_t k = T_ / 2;
  for (int64_t t = k; t < T_; ++t) changed[t] = (changed[t] + 1 + static_cast<int32_t>(t)) % static_cast<int32_t>(V_);
  const std::vector<float> after = run(changed);
  EXPECT_TRUE(std::equal(base.begin(), base.begin() + k * V_, after.begin()));
  EXPECT_FALSE(std::equal(base.begin() + k * V_, base.end(), after.begin() + k * V_));
}

TEST_P(V41Fixture, BatchOfBothSequencesIsBitwiseEqualToEachAlone) {
  const std::vector<int32_t> s0 = seq(0), s1 = seq(1);
  const std::vector<float> a0 = run(s0), a1 = run(s1);
  v41::V41SequenceState st0 = model_->new_sequence(), st1 = model_->new_sequence();
  v41::SeqInput in[2] = {{&st0, s0, true}, {&st1, s1, true}};
  v4::ForwardOutput out;
  ASSERT_TRUE(model_->forward(in, out).is_ok());
  EXPECT_TRUE(std::equal(a0.begin(), a0.end(), out.logits.begin()));
  EXPECT_TRUE(std::equal(a1.begin(), a1.end(), out.logits.begin() + s0.size() * V_));
  // Mixed steps: one sequence decoding while the other prefills chunks of 9.
  v41::V41SequenceState m0 = model_->new_sequence(), m1 = model_->new_sequence();
  v41::SeqInput first{&m0, std::span<const int32_t>(s0.data(), 10), true};
  ASSERT_TRUE(model_->forward(std::span<const v41::SeqInput>(&first, 1), out).is_ok());
  std::vector<float> got0 = out.logits, got1;
  for (int64_t i = 10, j = 0; i < T_; ++i, j += 9) {
    std::vector<v41::SeqInput> step{{&m0, std::span<const int32_t>(s0.data() + i, 1), true}};
    if (j < T_) step.push_back({&m1, std::span<const int32_t>(s1.data() + j, std::min<int64_t>(9, T_ - j)), true});
    ASSERT_TRUE(model_->forward(step, out).is_ok());
    got0.insert(got0.end(), out.logits.begin(), out.logits.begin() + V_);
    if (step.size() > 1) got1.insert(got1.end(), out.logits.begin() + V_, out.logits.end());
  }
  EXPECT_EQ(got0, a0);
  EXPECT_EQ(got1, a1);
}

TEST_P(V41Fixture, GreedyGenerationMatchesTheReference) {
  const std::vector<int32_t> prompt = read_all<int32_t>(*ref_, "greedy_prompt");
  const std::vector<int32_t> want = read_all<int32_t>(*ref_, "greedy_output");
  v41::V41SequenceState st = model_->new_sequence();
  std::vector<int32_t> got = prompt, feed = prompt;
  while (got.size() < want.size()) {
    v41::SeqInput in{&st, feed, false};
    v4::ForwardOutput out;
    ASSERT_TRUE(model_->forward(std::span<const v41::SeqInput>(&in, 1), out).is_ok());
    const int32_t tok = argmax({out.logits.data(), static_cast<size_t>(V_)});
    got.push_back(tok);
    feed = {tok};
  }
  EXPECT_EQ(got, want);
}

TEST_P(V41Fixture, EngramHashingEqualsTheStoredValues) {
  const v41::EngramHasher* h = model_->hasher();
  ASSERT_NE(h, nullptr);
  const v41::V41Config& c = model_->config();
  // Token map (engram_token_map.json) equals the reference's derivation.
  const std::vector<int64_t> tm = read_all<int64_t>(*ref_, "engram.token_map");
  for (int64_t i = 0; i < c.vocab_size; ++i) ASSERT_EQ(h->compressed(static_cast<int32_t>(i)), tm[i]) << i;
  // Primes, offsets, multipliers (PCG64 reproduced), and the released model's multipliers.
  const std::vector<int64_t> primes = read_all<int64_t>(*ref_, "engram.primes");
  const std::vector<int64_t> offsets = read_all<int64_t>(*ref_, "engram.offsets");
  const std::vector<int64_t> mult = read_all<int64_t>(*ref_, "engram.multipliers");
  size_t pi = 0, oi = 0, mi = 0;
  for (int64_t l = 0; l < h->layers(); ++l) {
    for (const auto& row : h->primes()[l])
      for (int64_t p : row) EXPECT_EQ(p, primes[pi++]);
    for (int64_t o : h->offsets(l)) EXPECT_EQ(o, offsets[oi++]);
    for (int64_t m : h->multipliers(l)) EXPECT_EQ(m, mult[mi++]);
  }
  const std::vector<int64_t> released = read_all<int64_t>(*ref_, "engram.released_multipliers");
  EXPECT_EQ(v41::engram_multipliers(1, 4, 99092), std::vector<int64_t>(released.begin(), released.begin() + 4));
  EXPECT_EQ(v41::engram_multipliers(14, 4, 99092), std::vector<int64_t>(released.begin() + 4, released.end()));
  // The released config's table sizes are the sums of its primes (16M vocabulary, 3 n-grams x 8 heads).
  v41::V41Config rc = c;
  rc.engram_layers = {1, 14};
  rc.engram_max_ngram = 4;
  rc.engram_n_heads = 8;
  rc.engram_vocab_size = 16000000;
  const auto rp = v41::engram_primes(rc);
  for (int64_t l = 0; l < 2; ++l) {
    int64_t sum = 0;
    for (const auto& row : rp[l]) for (int64_t p : row) sum += p;
    EXPECT_EQ(sum, l == 0 ? 384006168 : 384016682);
  }
  // Hash ids of both sequences, also when fed in chunks (the look-back crosses chunk borders).
  const std::vector<int64_t> want = read_all<int64_t>(*ref_, "engram.hash_ids");
  const int64_t per = h->layers() * h->columns();
  int64_t collisions = 0;
  for (int64_t b = 0; b < B_; ++b) {
    const std::vector<int32_t> s = seq(b);
    const std::vector<int64_t> all = model_->engram_rows({}, s);
    EXPECT_EQ(all, std::vector<int64_t>(want.begin() + b * T_ * per, want.begin() + (b + 1) * T_ * per));
    std::vector<int32_t> hist;
    for (int64_t i = 0; i < T_; i += 5) {
      const int64_t n = std::min<int64_t>(5, T_ - i);
      const std::vector<int64_t> part = model_->engram_rows(hist, std::span<const int32_t>(s.data() + i, n));
      EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + i * per)) << "chunk at " << i;
      for (int64_t j = 0; j < n; ++j) hist.push_back(h->compressed(s[i + j]));
    }
    for (int64_t t = 1; t < T_; ++t)
      for (int64_t u = 0; u < t; ++u)
        if (std::equal(all.begin() + t * per, all.begin() + (t + 1) * per, all.begin() + u * per)) ++collisions;
  }
  // Padding: a real pad token hashes like the look-back before position 0.
  const std::vector<int32_t> pads{static_cast<int32_t>(c.engram_pad_id), static_cast<int32_t>(c.engram_pad_id), 7};
  const std::vector<int64_t> with_pads = model_->engram_rows({}, pads);
  const std::vector<int64_t> alone = model_->engram_rows({}, std::vector<int32_t>{7});
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), with_pads.begin() + 2 * per));
  EXPECT_GT(collisions, 0) << "the fixtures repeat n-grams; identical rows must hash identically";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V41Fixture, ::testing::Values("tiny-v41-a", "tiny-v41-b"));

}  // namespace
}  // namespace deepinfer
