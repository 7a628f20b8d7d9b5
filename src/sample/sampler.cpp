#include "sample/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/thread_pool.h"
#include "sample/logprobs.h"

namespace deepinfer {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Index of the largest entry that is not -inf, lowest id on ties; -1 if there is none.
int32_t argmax_finite(std::span<const float> v) {
  int32_t best = -1;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == kNegInf || std::isnan(v[i])) continue;
    if (best < 0 || v[i] > v[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

/// A token that survives truncation, with weight exp(logit/T - max) (max over survivors = 1).
struct Candidate {
  double w;
  int32_t id;
};

/// Total order: larger weight first, then lower id.
bool better(const Candidate& a, const Candidate& b) { return a.w > b.w || (a.w == b.w && a.id < b.id); }

/// Steps 4 of sampler.h on processed logits `x`: the survivors in ascending id order.
std::vector<Candidate> shaped_candidates(std::span<const float> x, const SamplingParams& p) {
  std::vector<float> s;  // logit / T of the finite candidates
  std::vector<Candidate> c;
  c.reserve(x.size());
  s.reserve(x.size());
  bool any_pos_inf = false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == kNegInf) continue;
    c.push_back({0.0, static_cast<int32_t>(i)});
    s.push_back(x[i] / p.temperature);
    any_pos_inf |= std::isinf(s.back());
  }
  if (c.empty()) return c;
  if (any_pos_inf) {  // only the +inf tokens have mass; share it equally
    size_t k = 0;
    for (size_t i = 0; i < c.size(); ++i)
      if (std::isinf(s[i])) { c[k] = c[i]; s[k] = 0.0f; ++k; }
    c.resize(k);
    s.resize(k);
  }

  // top_k: keep values >= the k-th largest (vLLM keeps ties at the boundary).
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) {
    std::vector<float> vals = s;
    std::nth_element(vals.begin(), vals.begin() + (p.top_k - 1), vals.end(), std::greater<float>());
    const float thr = vals[p.top_k - 1];
    size_t k = 0;
    for (size_t i = 0; i < c.size(); ++i)
      if (s[i] >= thr) { c[k] = c[i]; s[k] = s[i]; ++k; }
    c.resize(k);
    s.resize(k);
  }

  const float smax = *std::max_element(s.begin(), s.end());
  // float exp (as vLLM's fp32 softmax) is several times cheaper than double over a 129k row.
  for (size_t i = 0; i < c.size(); ++i) c[i].w = static_cast<double>(std::exp(s[i] - smax));
  std::erase_if(c, [](const Candidate& e) { return e.w == 0.0; });  // underflow: no mass

  // top_p: the shortest prefix (by `better`) whose mass reaches top_p * total. No full sort: the
  // bit pattern of a positive double is monotonic in its value, so bucketing by the top bits
  // (exponent + 3 mantissa bits: 1/8 octave) orders the buckets; only the bucket where the
  // running mass crosses the target is sorted. Sums run in a fixed order (id order within a
  // bucket, buckets best first, then sorted order), so the cut is a pure function of the row.
  if (p.top_p < 1.0f && c.size() > 1) {
    constexpr int kNumBuckets = 4096;
    auto bucket_of = [](double w) {
      const uint64_t one = std::bit_cast<uint64_t>(1.0) >> 49;
      const uint64_t b = one - (std::bit_cast<uint64_t>(w) >> 49);  // w <= 1: b >= 0
      return static_cast<int>(std::min<uint64_t>(b, kNumBuckets - 1));
    };
    std::vector<double> mass(kNumBuckets, 0.0);
    double total = 0.0;
    for (const Candidate& e : c) {
      total += e.w;
      mass[bucket_of(e.w)] += e.w;
    }
    const double target = static_cast<double>(p.top_p) * total;
    double cum = 0.0;
    int cross = -1;
    for (int b = 0; b < kNumBuckets; ++b) {
      if (mass[b] == 0.0) continue;
      if (cum + mass[b] >= target) {
        cross = b;
        break;
      }
      cum += mass[b];
    }
    if (cross >= 0) {  // else rounding left the total short of the target: keep everything
      std::vector<Candidate> in_bucket;
      for (const Candidate& e : c)
        if (bucket_of(e.w) == cross) in_bucket.push_back(e);
      std::sort(in_bucket.begin(), in_bucket.end(), better);
      Candidate last = in_bucket.back();
      for (const Candidate& e : in_bucket) {
        cum += e.w;
        if (cum >= target) {
          last = e;
          break;
        }
      }
      std::erase_if(c, [&](const Candidate& e) { return better(last, e); });
    }
  }

  // min_p: p / p_max = w (the max survives every filter and has w = 1).
  if (p.min_p > 0.0f) {
    const double thr = static_cast<double>(p.min_p);
    std::erase_if(c, [&](const Candidate& e) { return e.w < thr; });
  }
  return c;
}

int32_t fallback_token(std::span<const float> raw) {
  const int32_t t = argmax_finite(raw);
  return t < 0 ? 0 : t;
}

}  // namespace

void apply_logits_processors(const SampleRow& row, std::span<float> out) {
  DI_CHECK(row.params != nullptr);
  DI_CHECK_EQ(out.size(), row.logits.size());
  const SamplingParams& p = *row.params;
  const int64_t vocab = static_cast<int64_t>(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::isnan(row.logits[i]) ? kNegInf : row.logits[i];

  for (const auto& [id, bias] : p.logit_bias) {
    DI_CHECK(id >= 0 && id < vocab);
    out[id] += bias;
  }
  if (static_cast<int64_t>(row.output_tokens.size()) < p.min_tokens) {
    for (int32_t id : row.eos_token_ids) {
      DI_CHECK(id >= 0 && id < vocab);
      out[id] = kNegInf;
    }
    for (int32_t id : p.stop_token_ids) {
      DI_CHECK(id >= 0 && id < vocab);
      out[id] = kNegInf;
    }
  }

  if (p.repetition_penalty != 1.0f) {
    const float r = p.repetition_penalty;
    std::vector<uint8_t> seen(out.size(), 0);
    auto apply = [&](std::span<const int32_t> tokens) {
      for (int32_t t : tokens) {
        DI_CHECK(t >= 0 && t < vocab);
        if (seen[t]) continue;
        seen[t] = 1;
        out[t] = out[t] > 0.0f ? out[t] / r : out[t] * r;
      }
    };
    apply(row.prompt_tokens);
    apply(row.output_tokens);
  }

  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    std::vector<int32_t> counts(out.size(), 0);
    for (int32_t t : row.output_tokens) {
      DI_CHECK(t >= 0 && t < vocab);
      ++counts[t];
    }
    for (int32_t t : row.output_tokens) {
      if (counts[t] == 0) continue;  // already applied
      out[t] -= p.frequency_penalty * static_cast<float>(counts[t]);
      out[t] -= p.presence_penalty;
      counts[t] = 0;
    }
  }
}

void sampling_probs(const SampleRow& row, std::span<double> probs) {
  DI_CHECK_EQ(probs.size(), row.logits.size());
  std::vector<float> x(row.logits.size());
  apply_logits_processors(row, x);
  std::fill(probs.begin(), probs.end(), 0.0);
  if (row.params->is_greedy()) {
    const int32_t t = argmax_finite(x);
    probs[t < 0 ? fallback_token(row.logits) : t] = 1.0;
    return;
  }
  const std::vector<Candidate> c = shaped_candidates(x, *row.params);
  if (c.empty()) {
    probs[fallback_token(row.logits)] = 1.0;
    return;
  }
  double total = 0.0;
  for (const Candidate& e : c) total += e.w;
  for (const Candidate& e : c) probs[e.id] = e.w / total;
}

SampleResult sample_row(const SampleRow& row) {
  DI_CHECK(row.params != nullptr);
  const SamplingParams& p = *row.params;
  std::vector<float> x(row.logits.size());
  apply_logits_processors(row, x);

  SampleResult r;
  if (p.is_greedy()) {
    r.token = argmax_finite(x);
    if (r.token < 0) r.token = fallback_token(row.logits);
  } else {
    const std::vector<Candidate> c = shaped_candidates(x, p);
    if (c.empty()) {
      r.token = fallback_token(row.logits);
    } else {
      double total = 0.0;
      for (const Candidate& e : c) total += e.w;
      const double target = rng_uniform(row.rng, row.position, RngDraw::kSample) * total;
      r.token = c.back().id;  // if rounding leaves the running sum short of target
      double cum = 0.0;
      for (const Candidate& e : c) {
        cum += e.w;
        if (target < cum) {
          r.token = e.id;
          break;
        }
      }
    }
  }

  if (p.logprobs) {
    std::vector<float> lp(row.logits.size());
    log_softmax(row.logits, lp);
    r.logprob = lp[r.token];
    if (p.top_logprobs > 0) r.top_logprobs = top_k_entries(lp, p.top_logprobs);
  }
  return r;
}

void sample_batch(std::span<const SampleRow> rows, std::span<SampleResult> out, ThreadPool* pool) {
  DI_CHECK_EQ(rows.size(), out.size());
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = sample_row(rows[i]);
  };
  if (pool == nullptr) {
    run(0, static_cast<int64_t>(rows.size()));
  } else {
    pool->parallel_for(static_cast<int64_t>(rows.size()), /*grain=*/1, run);
  }
}

}  // namespace deepinfer
