// GPU sampling (backend/cuda/sampling_ops.h) against the CPU sampler (sample/sampler.h), whose
// sources are compiled into this test. Every row's token must equal sample_row's for the same
// (logits, params, history, rng key, position); logprobs and top-20 logprobs within 1e-5 with the
// same ids in the same order. A row's outputs are bitwise the same in batches of 1, 7 and 64.
// Skips without a device. Prints time per call for 64 / 256 rows x 129280 (not asserted).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/sampling_ops.h"
#include "cuda_test_util.h"
#include "sample/sampler.h"

namespace deepinfer::cudatest {
namespace {

constexpr int kTop = 20;
constexpr float kInf = std::numeric_limits<float>::infinity();

/// One row: logits, CPU params and history, and what the GPU call needs.
struct Case {
  std::string name;
  std::vector<float> logits;
  SamplingParams p;
  std::vector<int32_t> prompt, output, eos;
  RngKey key;
  int64_t position = 0;
};

int32_t draw_id(std::mt19937& rng, int vocab) { return std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng); }

/// Row `kind` (0..18) of the parameter table, with random logits and history.
Case make_case(int kind, int vocab, std::mt19937& rng) {
  Case c;
  c.logits = randn(vocab, rng, 2.0f);
  c.key = {rng() | (uint64_t(rng()) << 32), uint32_t(rng() % 4)};
  c.position = rng() % 10000;
  SamplingParams& p = c.p;
  auto history = [&](int np, int no) {
    for (int i = 0; i < np; ++i) c.prompt.push_back(draw_id(rng, vocab));
    for (int i = 0; i < no; ++i) c.output.push_back(i > 0 && i % 3 == 0 ? c.output[i - 1] : draw_id(rng, vocab));
  };
  auto integer_logits = [&] {
    for (float& x : c.logits) x = std::round(x);
  };
  switch (kind) {
    case 0: c.name = "greedy"; p.temperature = 0.f; break;
    case 1: c.name = "temperature"; p.temperature = 0.7f; break;
    case 2: c.name = "top_k"; p.top_k = 50; break;
    case 3: c.name = "top_p"; p.top_p = 0.9f; break;
    case 4: c.name = "min_p"; p.min_p = 0.1f; break;
    case 5:
      c.name = "combined";
      p.temperature = 0.8f, p.top_k = 40, p.top_p = 0.8f, p.min_p = 0.05f;
      break;
    case 6:
      c.name = "penalties+top_p";
      p.repetition_penalty = 1.3f, p.frequency_penalty = 0.5f, p.presence_penalty = 0.4f, p.top_p = 0.95f;
      history(50, 30);
      for (int32_t t : c.output) c.logits[t] += 3.f;  // make the penalties matter
      break;
    case 7:
      c.name = "bias+masks";
      p.temperature = 1.2f;
      for (int i = 0; i < 8; ++i) p.logit_bias[draw_id(rng, vocab)] = (i % 2 ? 5.f : -100.f);
      p.min_tokens = 5;
      c.eos = {0, 1, 2};
      p.stop_token_ids = {3, 4};
      c.logits[1] = 30.f;  // masked: must not win
      history(5, 2);
      break;
    case 8: c.name = "top_k=1"; p.top_k = 1; p.temperature = 0.9f; break;
    case 9:
      c.name = "logprobs20+top_p";
      p.top_p = 0.7f, p.logprobs = true, p.top_logprobs = 20;
      break;
    case 10:
      c.name = "greedy+penalties+logprobs5";
      p.temperature = 0.f, p.repetition_penalty = 1.5f, p.frequency_penalty = 1.f, p.logprobs = true;
      p.top_logprobs = 5;
      history(20, 20);
      for (int32_t t : c.output) c.logits[t] += 4.f;
      break;
    case 11:
      c.name = "large top_k+min_p";
      p.temperature = 1.5f, p.top_k = vocab / 2, p.min_p = 0.02f;
      break;
    case 12:
      c.name = "all masked (fallback)";
      p.min_tokens = 1;
      for (int i = 0; i < vocab; ++i) p.stop_token_ids.push_back(i);
      break;
    case 13:
      c.name = "NaN logits+top_k";
      p.top_k = 100;
      for (int i = 0; i < vocab; i += 7) c.logits[i] = std::numeric_limits<float>::quiet_NaN();
      break;
    case 14:
      c.name = "+inf logits+top_p";
      p.top_p = 0.6f;
      c.logits[draw_id(rng, vocab)] = kInf;
      c.logits[draw_id(rng, vocab)] = kInf;
      c.logits[draw_id(rng, vocab)] = kInf;
      break;
    case 15:
      c.name = "ties top_k+top_p";
      integer_logits();
      p.top_k = 10, p.top_p = 0.5f;
      break;
    case 16:
      c.name = "ties greedy+logprobs20";
      integer_logits();
      p.temperature = 0.f, p.logprobs = true, p.top_logprobs = 20;
      break;
    case 17:
      c.name = "sharp top_p+logprobs3";
      for (float& x : c.logits) x *= 2.5f;
      p.top_p = 0.3f, p.logprobs = true, p.top_logprobs = 3;
      break;
    default:
      c.name = "negative frequency+min_p";
      p.temperature = 2.f, p.frequency_penalty = -0.5f, p.presence_penalty = 0.3f, p.min_p = 0.2f;
      history(0, 40);
      break;
  }
  return c;
}
constexpr int kNumKinds = 19;

bool has_penalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.f || p.frequency_penalty != 0.f || p.presence_penalty != 0.f;
}

/// Host copies of the GPU call's inputs for a batch of cases.
struct Batch {
  int rows = 0, vocab = 0;
  std::vector<float> logits, bias;
  std::vector<int32_t> counts;
  std::vector<uint8_t> seen;
  std::vector<dc::GpuSampleParams> params;
};

/// Rows `order` of `cases`; the counts / seen tables keep one row per case (counts_row = case index).
Batch make_batch(const std::vector<Case>& cases, const std::vector<int>& order, int vocab) {
  Batch b;
  b.rows = static_cast<int>(order.size());
  b.vocab = vocab;
  b.counts.assign(cases.size() * vocab, 0);
  b.seen.assign(cases.size() * vocab, 0);
  bool any_bias = false;
  for (const Case& c : cases) any_bias |= !c.p.logit_bias.empty() || c.p.min_tokens > 0;
  if (any_bias) b.bias.assign(size_t(b.rows) * vocab, 0.f);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    for (int32_t t : cases[ci].output) ++b.counts[ci * vocab + t];
    for (int32_t t : cases[ci].prompt) b.seen[ci * vocab + t] = 1;
    for (int32_t t : cases[ci].output) b.seen[ci * vocab + t] = 1;
  }
  for (int r = 0; r < b.rows; ++r) {
    const Case& c = cases[order[r]];
    b.logits.insert(b.logits.end(), c.logits.begin(), c.logits.end());
    if (any_bias) {
      float* row = b.bias.data() + size_t(r) * vocab;
      for (const auto& [id, v] : c.p.logit_bias) row[id] += v;
      if (static_cast<int64_t>(c.output.size()) < c.p.min_tokens) {
        for (int32_t id : c.eos) row[id] = -kInf;
        for (int32_t id : c.p.stop_token_ids) row[id] = -kInf;
      }
    }
    dc::GpuSampleParams g;
    g.temperature = c.p.temperature;
    g.top_k = c.p.top_k;
    g.top_p = c.p.top_p;
    g.min_p = c.p.min_p;
    g.repetition_penalty = c.p.repetition_penalty;
    g.presence_penalty = c.p.presence_penalty;
    g.frequency_penalty = c.p.frequency_penalty;
    g.seed = c.key.seed;
    g.sample_index = c.key.sample_index;
    g.position = c.position;
    g.counts_row = has_penalties(c.p) ? order[r] : -1;
    g.want_logprobs = c.p.logprobs ? 1 + c.p.top_logprobs : 0;
    b.params.push_back(g);
  }
  return b;
}

struct GpuOut {
  std::vector<int32_t> token, top_ids;
  std::vector<float> logprob, top_lp;
};

/// Uploads `b`, samples `iters` times (timing printed when iters > 1), downloads.
GpuOut run_gpu(const Batch& b, int iters = 1, const char* label = nullptr) {
  const size_t n = size_t(b.rows) * b.vocab;
  Dev logits(b.logits.data(), n * 4), params(b.params.data(), b.params.size() * sizeof(dc::GpuSampleParams));
  Dev counts(b.counts.data(), b.counts.size() * 4), seen(b.seen.data(), b.seen.size());
  std::unique_ptr<Dev> bias;
  if (!b.bias.empty()) bias = std::make_unique<Dev>(b.bias.data(), n * 4);
  Dev token(b.rows * 4), logprob(b.rows * 4), top_ids(b.rows * kTop * 4), top_lp(b.rows * kTop * 4);
  Dev ws(dc::sample_workspace_bytes(b.rows, b.vocab));
  dc::GpuSampleArgs a;
  a.logits = logits.as<float>();
  a.params = params.as<dc::GpuSampleParams>();
  a.counts = counts.as<int32_t>();
  a.seen = seen.as<uint8_t>();
  a.bias = bias ? bias->as<float>() : nullptr;
  a.rows = b.rows;
  a.vocab = b.vocab;
  a.token = token.as<int32_t>();
  a.logprob = logprob.as<float>();
  a.top_ids = top_ids.as<int32_t>();
  a.top_logprobs = top_lp.as<float>();
  EXPECT_TRUE(dc::sample_tokens(a, ws.p)) << dc::last_error();
  EXPECT_TRUE(dc::synchronize()) << dc::last_error();
  if (iters > 1) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) EXPECT_TRUE(dc::sample_tokens(a, ws.p));
    EXPECT_TRUE(dc::synchronize()) << dc::last_error();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    std::printf("[ timing ] %s: %d rows x %d: %.1f us per call\n", label, b.rows, b.vocab, us);
  }
  GpuOut o;
  o.token = download<int32_t>(token, b.rows);
  o.logprob = download<float>(logprob, b.rows);
  o.top_ids = download<int32_t>(top_ids, size_t(b.rows) * kTop);
  o.top_lp = download<float>(top_lp, size_t(b.rows) * kTop);
  return o;
}

SampleRow cpu_row(const Case& c) {
  SampleRow r;
  r.logits = c.logits;
  r.params = &c.p;
  r.prompt_tokens = c.prompt;
  r.output_tokens = c.output;
  r.eos_token_ids = c.eos;
  r.rng = c.key;
  r.position = c.position;
  return r;
}

/// Compares GPU row r (case `c`) with sample_row; returns the number of failures (printed).
int compare_row(const Case& c, const GpuOut& g, int r, int row_tag) {
  const SampleRow row = cpu_row(c);
  const SampleResult ref = sample_row(row);
  int bad = 0;
  if (g.token[r] != ref.token) {
    std::vector<double> probs(c.logits.size());
    sampling_probs(row, probs);
    const int32_t gt = g.token[r];
    ADD_FAILURE() << "row " << row_tag << " (" << c.name << "): token gpu " << gt << " cpu " << ref.token
                  << "; cpu probs: p[gpu]=" << (gt >= 0 && gt < int(probs.size()) ? probs[gt] : -1.0)
                  << " p[cpu]=" << probs[ref.token] << " u=" << rng_uniform(c.key, c.position);
    ++bad;
  }
  if (!c.p.logprobs) return bad;
  const double err = std::fabs(double(g.logprob[r]) - ref.logprob);
  if (!(err <= 1e-5)) {
    ADD_FAILURE() << "row " << row_tag << " (" << c.name << "): logprob gpu " << g.logprob[r] << " cpu "
                  << ref.logprob << " abs err " << err;
    ++bad;
  }
  double max_err = 0.0;
  int first_mismatch = -1;
  for (int i = 0; i < c.p.top_logprobs; ++i) {
    const int32_t gid = g.top_ids[r * kTop + i];
    const float glp = g.top_lp[r * kTop + i];
    if (gid != ref.top_logprobs[i].first && first_mismatch < 0) first_mismatch = i;
    max_err = std::max(max_err, std::fabs(double(glp) - ref.top_logprobs[i].second));
  }
  if (first_mismatch >= 0 || !(max_err <= 1e-5)) {
    const int i = first_mismatch < 0 ? 0 : first_mismatch;
    ADD_FAILURE() << "row " << row_tag << " (" << c.name << "): top logprobs max abs err " << max_err
                  << ", first id mismatch at " << first_mismatch << ": gpu " << g.top_ids[r * kTop + i] << " ("
                  << g.top_lp[r * kTop + i] << ") cpu " << ref.top_logprobs[i].first << " ("
                  << ref.top_logprobs[i].second << ")";
    ++bad;
  }
  return bad;
}

/// `batches` batches of 64 rows cycling through every kind; returns the number of draws.
int parity_run(int vocab, int batches, uint32_t seed) {
  std::mt19937 rng(seed);
  int draws = 0, bad = 0;
  for (int bi = 0; bi < batches && bad < 20; ++bi) {
    std::vector<Case> cases;
    std::vector<int> order;
    for (int r = 0; r < 64; ++r) {
      cases.push_back(make_case((bi * 64 + r) % kNumKinds, vocab, rng));
      order.push_back(r);
    }
    const GpuOut g = run_gpu(make_batch(cases, order, vocab));
    for (int r = 0; r < 64; ++r) bad += compare_row(cases[r], g, r, bi * 64 + r);
    draws += 64;
  }
  std::printf("vocab %d: %d draws, %d failures\n", vocab, draws, bad);
  return draws;
}

TEST(CudaSampling, MatchesCpuSamplerVocab1000) {
  SKIP_WITHOUT_DEVICE();
  EXPECT_GE(parity_run(1000, 32, 1), 2000);
}

TEST(CudaSampling, MatchesCpuSamplerVocab129280) {
  SKIP_WITHOUT_DEVICE();
  parity_run(129280, 5, 2);
}

TEST(CudaSampling, SameDrawsAsRngAcrossPositions) {  // one row, many positions: the Philox port
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(3);
  std::vector<Case> cases;
  std::vector<int> order;
  const Case base = make_case(1, 1000, rng);
  for (int r = 0; r < 256; ++r) {
    cases.push_back(base);
    cases.back().position = int64_t(r) * 977 + (int64_t(r) << 33);
    cases.back().key.seed = 0xfedcba9876543210ull + r;
    order.push_back(r);
  }
  const GpuOut g = run_gpu(make_batch(cases, order, 1000));
  int bad = 0;
  for (int r = 0; r < 256 && bad < 10; ++r) bad += compare_row(cases[r], g, r, r);
}

// `x -= frequency_penalty * count` rounds once where the CPU build fuses it (GCC, -march=native)
// and twice where it does not: a greedy row where that last bit decides the argmax shows the two
// backends round alike.
TEST(CudaSampling, FrequencyPenaltyRoundsAsCpuBuild) {
  SKIP_WITHOUT_DEVICE();
  constexpr int kVocab = 1000, kA = 7, kB = 3;
  const float fp = 0.1f;
  const int count = 7;
  float xa = 1.0f, fused = 0.f, two_step = 0.f;
  for (int i = 0; i < 100000 && fused == two_step; ++i) {
    xa = std::nextafter(xa, 10.f);
    fused = std::fma(-fp, float(count), xa);
    volatile float prod = fp * float(count);  // volatile: two roundings
    two_step = xa - prod;
  }
  ASSERT_NE(fused, two_step) << "no x with a rounding difference found";
  const float xb = std::min(fused, two_step);  // kB ties the lower result and wins the tie
  std::mt19937 rng(6);
  Case c = make_case(0, kVocab, rng);
  for (float& x : c.logits) x = -10.f;
  c.logits[kA] = xa;
  c.logits[kB] = xb;
  c.p.frequency_penalty = fp;
  c.output.assign(count, kA);
  const GpuOut g = run_gpu(make_batch({c}, {0}, kVocab));
  const int32_t cpu = sample_row(cpu_row(c)).token;
  const bool cpu_fused = (cpu == kA) == (fused > two_step);
  std::printf("x_a %.9g fused %.9g two-step %.9g: CPU build picks %d (%s rounding)\n", xa, fused, two_step, cpu,
              cpu_fused ? "fused" : "two-step");
  EXPECT_EQ(g.token[0], cpu) << "GPU frequency penalty rounds differently from the CPU build";
}

bool same_bits(const GpuOut& a, int ra, const GpuOut& b, int rb) {
  return a.token[ra] == b.token[rb] && std::memcmp(&a.logprob[ra], &b.logprob[rb], 4) == 0 &&
         std::memcmp(&a.top_ids[ra * kTop], &b.top_ids[rb * kTop], kTop * 4) == 0 &&
         std::memcmp(&a.top_lp[ra * kTop], &b.top_lp[rb * kTop], kTop * 4) == 0;
}

TEST(CudaSampling, BatchInvariant) {
  SKIP_WITHOUT_DEVICE();
  for (int vocab : {1000, 129280}) {
    std::mt19937 rng(4);
    std::vector<Case> cases;
    std::vector<int> all;
    for (int r = 0; r < 64; ++r) {
      cases.push_back(make_case(r % kNumKinds, vocab, rng));
      all.push_back(r);
    }
    const GpuOut g64 = run_gpu(make_batch(cases, all, vocab));
    const std::vector<int> seven = {17, 0, 63, 5, 40, 9, 33};
    const GpuOut g7 = run_gpu(make_batch(cases, seven, vocab));
    for (int i = 0; i < 7; ++i) {
      const int r = seven[i];
      EXPECT_TRUE(same_bits(g64, r, g7, i)) << "vocab " << vocab << " row " << r << " (" << cases[r].name
                                            << "): batch 7 differs from batch 64 (tokens " << g7.token[i] << " vs "
                                            << g64.token[r] << ")";
      const GpuOut g1 = run_gpu(make_batch(cases, {r}, vocab));
      EXPECT_TRUE(same_bits(g64, r, g1, 0)) << "vocab " << vocab << " row " << r << " (" << cases[r].name
                                            << "): batch 1 differs from batch 64 (tokens " << g1.token[0] << " vs "
                                            << g64.token[r] << ")";
    }
  }
}

TEST(CudaSampling, TimePerCall) {  // printed, not asserted
  SKIP_WITHOUT_DEVICE();
  constexpr int kVocab = 129280;
  std::mt19937 rng(5);
  const Case proto = make_case(1, kVocab, rng);
  struct Mode {
    const char* label;
    float t, top_p;
    int top_k, lp;
  };
  for (const Mode m : {Mode{"greedy", 0.f, 1.f, 0, 0}, Mode{"T=0.8 top_p=0.9", 0.8f, 0.9f, 0, 0},
                       Mode{"T=0.8 top_k=50 top_p=0.9 logprobs=5", 0.8f, 0.9f, 50, 6}}) {
    for (int rows : {64, 256}) {
      std::vector<Case> cases;
      std::vector<int> order;
      for (int r = 0; r < rows; ++r) {
        cases.push_back(proto);
        for (float& x : cases.back().logits) x += 0.01f * float(r % 13);
        cases.back().position = r;
        order.push_back(r);
      }
      Batch b = make_batch(cases, order, kVocab);
      for (auto& p : b.params) p.temperature = m.t, p.top_p = m.top_p, p.top_k = m.top_k, p.want_logprobs = m.lp;
      run_gpu(b, 20, m.label);
    }
  }
}

}  // namespace
}  // namespace deepinfer::cudatest
