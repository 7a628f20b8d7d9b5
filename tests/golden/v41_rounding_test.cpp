// V4.1 with Numerics::reference_rounding against the NumPy reference's kv_quant=True forward
// (`logits_kv_quant` of tests/data/tiny-v41-{a,b}: window KV FP8 / 32, compressed KV FP4 with e4m3
// scales / 16, index q and keys FP4 / 32). The default stays the exact model (golden_v41_fixtures).
//
// tiny-v41-b has no tie under kv_quant (worst gap 5.7e-5, reference.json): compared strictly at every
// position. tiny-v41-a has an exact FP4 tie in an index top-k (tools/reference/README.md, open point
// 2), so its stored logits are only one valid answer from the tied position on; the rule here: the
// positions before the first one that differs by more than the strict bound must be within it, and
// the sequence must also match on at least half of its positions overall (loose check).
#include <gtest/gtest.h>

#include <cmath>

#include "loader/safetensors.h"
#include "model/deepseek_v41/model.h"

namespace deepinfer {
namespace {

constexpr float kStrict = 1e-4f;  // logits (f32 engine vs float64 reference stored as f32; measured <= 1.8e-5)

std::vector<float> read_all(const SafetensorsFile& f, const char* name) {
  auto s = f.tensor(*f.find(name)).span<float>();
  return {s.begin(), s.end()};
}

struct Fixture {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<v41::V41Model> model;
  std::shared_ptr<const SafetensorsFile> ref;
  int64_t B = 0, T = 0, V = 0;
  std::vector<int32_t> ids;

  explicit Fixture(const std::string& name, bool rounding) {
    const std::string dir = std::string(DI_TEST_DATA_DIR) + "/" + name;
    ref = std::move(SafetensorsFile::open(dir + "/reference.safetensors")).value();
    const TensorInfo* ti = ref->find("input_ids");
    B = ti->shape[0];
    T = ti->shape[1];
    V = ref->find("logits")->shape[2];
    auto s = ref->tensor(*ti).span<int32_t>();
    ids.assign(s.begin(), s.end());
    backend = std::move(Backend::create({})).value();
    LoadOptions lo;
    lo.numerics.reference_rounding = rounding;
    model = std::move(v41::V41Model::load(dir, *backend, std::nullopt, lo)).value();
  }
  // Logits [T, V] of sequence b, fed in chunks of `chunk` (0: all at once).
  std::vector<float> logits(int64_t b, int64_t chunk = 0) {
    v41::V41SequenceState st = model->new_sequence();
    std::vector<float> all;
    if (chunk <= 0) chunk = T;
    for (int64_t i = 0; i < T; i += chunk) {
      v41::SeqInput in{&st, std::span<const int32_t>(ids.data() + b * T + i, std::min(chunk, T - i)), true};
      v4::ForwardOutput out;
      EXPECT_TRUE(model->forward(std::span<const v41::SeqInput>(&in, 1), out).is_ok());
      all.insert(all.end(), out.logits.begin(), out.logits.end());
    }
    return all;
  }
  // Max |diff| per position against a [B, T, V] reference tensor.
  std::vector<float> per_position(int64_t b, const std::vector<float>& got, const std::vector<float>& want) const {
    std::vector<float> d(T, 0.f);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t v = 0; v < V; ++v)
        d[t] = std::max(d[t], std::fabs(got[t * V + v] - want[(b * T + t) * V + v]));
    return d;
  }
};

TEST(V41ReferenceRounding, TinyBMatchesKvQuantStrictly) {
  Fixture r("tiny-v41-b", true);
  const std::vector<float> want = read_all(*r.ref, "logits_kv_quant");
  const std::vector<float> exact = read_all(*r.ref, "logits");
  for (int64_t b = 0; b < r.B; ++b) {
    const std::vector<float> got = r.logits(b);
    const std::vector<float> d = r.per_position(b, got, want);
    const std::vector<float> de = r.per_position(b, got, exact);
    float worst = 0, moved = 0;
    for (int64_t t = 0; t < r.T; ++t) worst = std::max(worst, d[t]), moved = std::max(moved, de[t]);
    EXPECT_LE(worst, kStrict) << "sequence " << b;
    EXPECT_GT(moved, 10 * kStrict) << "the rounding must visibly move the logits";
    std::printf("tiny-v41-b seq %lld: max |logit - kv_quant ref| %.3g (vs exact: %.3g)\n",
                static_cast<long long>(b), worst, moved);
  }
}

TEST(V41ReferenceRounding, TinyAMatchesKvQuantUpToTheTie) {
  Fixture r("tiny-v41-a", true);
  const std::vector<float> want = read_all(*r.ref, "logits_kv_quant");
  for (int64_t b = 0; b < r.B; ++b) {
    const std::vector<float> d = r.per_position(b, r.logits(b), want);
    int64_t first_bad = r.T, good = 0;
    for (int64_t t = 0; t < r.T; ++t) {
      if (d[t] <= kStrict) ++good;
      else if (first_bad == r.T) first_bad = t;
    }
    std::printf("tiny-v41-a seq %lld: %lld of %lld positions within %.0e, first beyond at %lld\n",
                static_cast<long long>(b), static_cast<long long>(good), static_cast<long long>(r.T), kStrict,
                static_cast<long long>(first_bad));
    EXPECT_GE(2 * good, r.T) << "sequence " << b;
    EXPECT_GT(first_bad, 0);
  }
}

TEST(V41ReferenceRounding, PrefillChunkedAndDecodeAgreeBitwise) {
  Fixture r("tiny-v41-b", true);
  for (int64_t b = 0; b < r.B; ++b) {
    const std::vector<float> full = r.logits(b);
    EXPECT_EQ(full, r.logits(b, 29)) << "chunked, sequence " << b;
    EXPECT_EQ(full, r.logits(b, 1)) << "decode, sequence " << b;
  }
}

TEST(V41ReferenceRounding, DefaultIsUnchanged) {
  Fixture exact("tiny-v41-b", false);
  const std::vector<float> want = read_all(*exact.ref, "logits");
  float worst = 0;
  for (int64_t b = 0; b < exact.B; ++b)
    for (float v : exact.per_position(b, exact.logits(b), want)) worst = std::max(worst, v);
  EXPECT_LE(worst, kStrict);
}

}  // namespace
}  // namespace deepinfer
