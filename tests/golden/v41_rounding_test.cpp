// V4.1 with Numerics::reference_rounding. With kv_only (no activation rounding) against the NumPy
// reference's kv_quant=True forward (`logits_kv_quant` of tests/data/tiny-v41-{a,b}: window KV FP8 /
// 32, compressed KV FP4 with e4m3 scales / 16, index q and keys FP4 / 32). The full option adds [O]'s
// FP8 / 32 activation rounding before the FP8/FP4 linears, which no reference here computes: checked
// like golden_v4_rounding (prefill == chunked == decode == batched, bitwise; the logits move, within
// stated bounds of the exact and kv_quant fixtures). The default stays the exact model.
//
// tiny-v41-b has no tie under kv_quant (worst gap 5.7e-5, reference.json): compared strictly at every
// position. tiny-v41-a has an exact FP4 tie in an index top-k (tools/reference/README.md, open point
// 2), so its stored logits are only one valid answer from the tied position on; the rule here: the
// positions before the first one that differs by more than the strict bound must be within it, and
// the sequence must also match on at least half of its positions overall (loose check).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "loader/safetensors.h"
#include "model/deepseek_v41/model.h"

namespace deepinfer {
namespace {

constexpr int64_t kMinExactPrefix = 32;  // full rounding vs act_quant: positions that must match before a flip
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

  enum Mode { kExact, kKvOnly, kFull };
  explicit Fixture(const std::string& name, Mode mode) {
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
    lo.numerics.reference_rounding = mode != kExact;
    lo.numerics.kv_only = mode == kKvOnly;
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
  Fixture r("tiny-v41-b", Fixture::kKvOnly);
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
  Fixture r("tiny-v41-a", Fixture::kKvOnly);
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
  for (const auto mode : {Fixture::kKvOnly, Fixture::kFull}) {
    Fixture r("tiny-v41-b", mode);
    for (int64_t b = 0; b < r.B; ++b) {
      const std::vector<float> full = r.logits(b);
      EXPECT_EQ(full, r.logits(b, 29)) << "chunked, sequence " << b << " mode " << mode;
      EXPECT_EQ(full, r.logits(b, 1)) << "decode, sequence " << b << " mode " << mode;
    }
  }
}

// Both sequences of the fixture in one batch (prefill chunks of 13 and 7, then one token each)
// give bitwise the logits each gives alone.
TEST(V41ReferenceRounding, FullRoundingIsBatchInvariant) {
  for (const char* name : {"tiny-v41-a", "tiny-v41-b"}) {
    Fixture r(name, Fixture::kFull);
    ASSERT_GE(r.B, 2);
    std::vector<float> alone[2] = {r.logits(0), r.logits(1)};
    v41::V41SequenceState st[2] = {r.model->new_sequence(), r.model->new_sequence()};
    std::vector<float> got[2];
    int64_t at[2] = {0, 0};
    const int64_t step[2] = {13, 7};
    while (at[0] < r.T || at[1] < r.T) {
      std::vector<v41::SeqInput> batch;
      std::vector<int> who;
      for (int s = 0; s < 2; ++s) {
        const int64_t n = std::min(step[s], r.T - at[s]);
        if (n <= 0) continue;
        batch.push_back({&st[s], std::span<const int32_t>(r.ids.data() + s * r.T + at[s], n), true});
        who.push_back(s);
        at[s] += n;
      }
      v4::ForwardOutput out;
      ASSERT_TRUE(r.model->forward(batch, out).is_ok());
      for (size_t i = 0; i < who.size(); ++i) {
        const int64_t r0 = out.row_offsets[i];
        const int64_t r1 = i + 1 < who.size() ? out.row_offsets[i + 1] : static_cast<int64_t>(out.logits.size()) / r.V;
        got[who[i]].insert(got[who[i]].end(), out.logits.begin() + r0 * r.V, out.logits.begin() + r1 * r.V);
      }
    }
    for (int s = 0; s < 2; ++s) {
      ASSERT_EQ(got[s].size(), alone[s].size());
      size_t first = got[s].size();
      for (size_t i = 0; i < got[s].size() && first == got[s].size(); ++i)
        if (got[s][i] != alone[s][i]) first = i;
      EXPECT_EQ(first, got[s].size()) << name << " sequence " << s << ": batched differs from alone at logit " << first;
    }
  }
}

// The full option against tools/reference/v41_act_quant.py (the NumPy reference with kv_quant and the
// same activation rounding sites; tests/data/v41-act-quant/<fixture>.safetensors). Reported per
// sequence: max |diff| and the first position beyond the strict bound; tiny-v41-b must match on at
// least its first kMinExactPrefix positions (a rounding flip from an ulp-level, CPU-dependent
// difference may part it later), tiny-v41-a (FP4 tie, see above) before its first mismatch and on
// at least half.
TEST(V41ReferenceRounding, FullRoundingMatchesTheActQuantReference) {
  for (const char* name : {"tiny-v41-b", "tiny-v41-a"}) {
    Fixture r(name, Fixture::kFull);
    auto f = SafetensorsFile::open(std::string(DI_TEST_DATA_DIR) + "/v41-act-quant/" + name + ".safetensors");
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    const std::vector<float> want = read_all(**f, "logits_act_quant");
    ASSERT_EQ(want.size(), static_cast<size_t>(r.B * r.T * r.V));
    for (int64_t b = 0; b < r.B; ++b) {
      const std::vector<float> d = r.per_position(b, r.logits(b), want);
      int64_t first_bad = r.T, good = 0;
      float worst = 0;
      for (int64_t t = 0; t < r.T; ++t) {
        worst = std::max(worst, d[t]);
        if (d[t] <= kStrict) ++good;
        else if (first_bad == r.T) first_bad = t;
      }
      std::printf("%s seq %lld vs act_quant reference: max %.3g, %lld of %lld positions within %.0e, first beyond at %lld\n",
                  name, static_cast<long long>(b), worst, static_cast<long long>(good), static_cast<long long>(r.T),
                  kStrict, static_cast<long long>(first_bad));
      if (std::string(name) == "tiny-v41-b") {
        // Every position before the first mismatch is within the bound (by construction of
        // first_bad), and at least kMinExactPrefix of them: with thousands of FP8 / 32 rounding sites
        // per position, an ulp-level difference can flip one rounding later in the sequence and
        // the logits part from there. Which ulp depends on the CPU: GCC contracts a*b+c into FMA
        // under -march=native, so on an AVX-512 host tiny-v41-b sequence 0 parts at position 35
        // (with -ffp-contract=off it matches all 72, as on the hosts this test was written on).
        EXPECT_GE(first_bad, kMinExactPrefix) << name << " sequence " << b;
      } else {
        EXPECT_GE(2 * good, r.T) << name << " sequence " << b;
        EXPECT_GT(first_bad, 0) << name << " sequence " << b;
      }
    }
  }
}

// The activation rounding moves the logits (measured on the fixtures, see docs/v41.md section 5):
// bounded against the exact model and against kv_quant, and the argmax mostly kept.
TEST(V41ReferenceRounding, FullRoundingStaysWithinStatedBoundsOfTheFixtures) {
  // Measured: max 8.9-9.7, mean 0.66-0.74 (mean |logit| 1.6), argmax agreement 40-44%; the KV rounding
  // alone (checked against the reference) already moves the mean by 0.36-0.38 with 65-67% agreement:
  // the random tiny models are very sensitive.
  constexpr float kMaxDiff = 12.f, kMeanDiff = 1.f;
  constexpr double kMinArgmaxAgreement = 0.35;
  for (const char* name : {"tiny-v41-a", "tiny-v41-b"}) {
    Fixture r(name, Fixture::kFull);
    Fixture kv(name, Fixture::kKvOnly);
    for (const char* ref_name : {"logits", "logits_kv_quant"}) {
      const std::vector<float> want = read_all(*r.ref, ref_name);
      double sum = 0, mag = 0, kv_sum = 0;
      float worst = 0, kv_worst = 0;
      int64_t agree = 0, kv_agree = 0, n = 0;
      for (int64_t b = 0; b < r.B; ++b) {
        const std::vector<float> got = r.logits(b);
        const std::vector<float> kvl = kv.logits(b);
        for (int64_t t = 0; t < r.T; ++t) {
          const float* g = got.data() + t * r.V;
          const float* w = want.data() + (b * r.T + t) * r.V;
          for (int64_t v = 0; v < r.V; ++v) {
            const float d = std::fabs(g[v] - w[v]);
            worst = std::max(worst, d);
            kv_worst = std::max(kv_worst, std::fabs(g[v] - kvl[t * r.V + v]));
            sum += d;
            kv_sum += std::fabs(kvl[t * r.V + v] - w[v]);
            mag += std::fabs(w[v]);
          }
          const float* k = kvl.data() + t * r.V;
          agree += std::max_element(g, g + r.V) - g == std::max_element(w, w + r.V) - w;
          kv_agree += std::max_element(k, k + r.V) - k == std::max_element(w, w + r.V) - w;
          ++n;
        }
      }
      const double mean = sum / static_cast<double>(n * r.V), agreement = static_cast<double>(agree) / n;
      std::printf("%s full rounding vs %s: max %.3g mean %.3g (mean |ref| %.3g), argmax agreement %.1f%%; "
                  "max vs kv_only engine %.3g (kv_only vs %s: mean %.3g, argmax agreement %.1f%%)\n",
                  name, ref_name, worst, mean, mag / static_cast<double>(n * r.V), 100 * agreement, kv_worst, ref_name,
                  kv_sum / static_cast<double>(n * r.V), 100.0 * static_cast<double>(kv_agree) / n);
      EXPECT_LE(worst, kMaxDiff) << name << " vs " << ref_name;
      EXPECT_LE(mean, kMeanDiff) << name << " vs " << ref_name;
      EXPECT_GE(agreement, kMinArgmaxAgreement) << name << " vs " << ref_name;
      EXPECT_GT(kv_worst, 10 * kStrict) << name << ": the activation rounding must visibly move the logits";
    }
  }
}

TEST(V41ReferenceRounding, DefaultIsUnchanged) {
  Fixture exact("tiny-v41-b", Fixture::kExact);
  const std::vector<float> want = read_all(*exact.ref, "logits");
  float worst = 0;
  for (int64_t b = 0; b < exact.B; ++b)
    for (float v : exact.per_position(b, exact.logits(b), want)) worst = std::max(worst, v);
  EXPECT_LE(worst, kStrict);
}

}  // namespace
}  // namespace deepinfer
