#include "model/deepseek_v4_gpu/device_sampling.h"

#include <cmath>
#include <cstring>
#include <string>

namespace deepinfer::v4gpu {

namespace {

enum Slot : int { kParams, kBias, kCounts, kSeen, kWs, kToken, kLogprob, kTopIds, kTopLp };
constexpr int kTop = 20;  // the kernel's top-logprob columns

bool has_penalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

Status check_ids(std::span<const int32_t> ids, int64_t vocab, size_t row) {
  for (int32_t t : ids)
    if (t < 0 || t >= vocab)
      return Status::invalid_argument("sampling row " + std::to_string(row) + ": token id " + std::to_string(t) +
                                      " is outside the vocabulary");
  return Status::ok();
}

}  // namespace

Result<HostSampling> host_sampling(std::span<const SampleRow> rows, int64_t vocab) {
  HostSampling s;
  s.vocab = vocab;
  const size_t V = static_cast<size_t>(vocab);
  bool any_bias = false;
  for (const SampleRow& r : rows) {
    if (!r.params) return Status::invalid_argument("sampling row without parameters");
    const SamplingParams& p = *r.params;
    any_bias |= !p.logit_bias.empty() || static_cast<int64_t>(r.output_tokens.size()) < p.min_tokens;
  }
  if (any_bias) s.bias.assign(rows.size() * V, 0.0f);
  int32_t table_rows = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SampleRow& r = rows[i];
    const SamplingParams& p = *r.params;
    DI_TRY(check_ids(r.prompt_tokens, vocab, i));
    DI_TRY(check_ids(r.output_tokens, vocab, i));
    if (any_bias) {
      float* b = s.bias.data() + i * V;
      for (const auto& [id, v] : p.logit_bias) {
        if (id < 0 || id >= vocab) return Status::invalid_argument("logit_bias id outside the vocabulary");
        b[id] += v;
      }
      if (static_cast<int64_t>(r.output_tokens.size()) < p.min_tokens) {
        for (std::span<const int32_t> ids : {r.eos_token_ids, std::span<const int32_t>(p.stop_token_ids)}) {
          DI_TRY(check_ids(ids, vocab, i));
          for (int32_t id : ids) b[id] = -INFINITY;
        }
      }
    }
    cuda::GpuSampleParams g;
    g.temperature = p.temperature;
    g.top_k = p.top_k;
    g.top_p = p.top_p;
    g.min_p = p.min_p;
    g.repetition_penalty = p.repetition_penalty;
    g.presence_penalty = p.presence_penalty;
    g.frequency_penalty = p.frequency_penalty;
    g.seed = r.rng.seed;
    g.sample_index = r.rng.sample_index;
    g.position = r.position;
    g.want_logprobs = p.logprobs ? 1 + p.top_logprobs : 0;
    if (has_penalties(p)) {
      g.counts_row = table_rows++;
      s.counts.resize(static_cast<size_t>(table_rows) * V, 0);
      s.seen.resize(static_cast<size_t>(table_rows) * V, 0);
      int32_t* c = s.counts.data() + static_cast<size_t>(g.counts_row) * V;
      uint8_t* seen = s.seen.data() + static_cast<size_t>(g.counts_row) * V;
      for (int32_t t : r.output_tokens) ++c[t], seen[t] = 1;
      for (int32_t t : r.prompt_tokens) seen[t] = 1;
    }
    s.params.push_back(g);
    s.top.push_back(p.logprobs ? std::min(p.top_logprobs, kTop) : 0);
    s.logprobs.push_back(p.logprobs);
  }
  return s;
}

Status DeviceSampler::prepare(const HostSampling& s, std::span<const size_t> order) {
  const size_t rows = s.params.size(), V = static_cast<size_t>(s.vocab);
  if (order.size() != rows) return Status::internal("device sampling: order and rows differ in length");
  s_ = &s;
  order_.assign(order.begin(), order.end());
  args_ = {};
  if (rows == 0) return Status::ok();
  auto get = [&](int slot, size_t bytes) { return scratch_.get(slot, std::max<size_t>(bytes, 16)); };
  // Device row i is the caller's row order[i]: parameters and bias rows in that order.
  std::vector<cuda::GpuSampleParams> params(rows);
  for (size_t i = 0; i < rows; ++i) params[i] = s.params[order[i]];
  DI_ASSIGN_OR_RETURN(void* dparams, get(kParams, rows * sizeof(cuda::GpuSampleParams)));
  DI_CUDA_TRY(cuda::copy_to_device(dparams, params.data(), rows * sizeof(cuda::GpuSampleParams)));
  cuda::GpuSampleArgs& a = args_;
  a.params = static_cast<const cuda::GpuSampleParams*>(dparams);
  a.rows = static_cast<int32_t>(rows), a.vocab = static_cast<int32_t>(V);
  if (!s.bias.empty()) {
    DI_ASSIGN_OR_RETURN(void* dbias, get(kBias, rows * V * 4));
    for (size_t i = 0; i < rows; ++i)
      DI_CUDA_TRY(cuda::copy_to_device(static_cast<float*>(dbias) + i * V, s.bias.data() + order[i] * V, V * 4));
    a.bias = static_cast<const float*>(dbias);
  }
  if (!s.counts.empty()) {
    DI_ASSIGN_OR_RETURN(void* dc, get(kCounts, s.counts.size() * 4));
    DI_ASSIGN_OR_RETURN(void* ds, get(kSeen, s.seen.size()));
    DI_CUDA_TRY(cuda::copy_to_device(dc, s.counts.data(), s.counts.size() * 4));
    DI_CUDA_TRY(cuda::copy_to_device(ds, s.seen.data(), s.seen.size()));
    a.counts = static_cast<const int32_t*>(dc), a.seen = static_cast<const uint8_t*>(ds);
  }
  DI_ASSIGN_OR_RETURN(void* tok, get(kToken, rows * 4));
  DI_ASSIGN_OR_RETURN(void* lp, get(kLogprob, rows * 4));
  DI_ASSIGN_OR_RETURN(void* tid, get(kTopIds, rows * kTop * 4));
  DI_ASSIGN_OR_RETURN(void* tlp, get(kTopLp, rows * kTop * 4));
  a.token = static_cast<int32_t*>(tok), a.logprob = static_cast<float*>(lp);
  a.top_ids = static_cast<int32_t*>(tid), a.top_logprobs = static_cast<float*>(tlp);
  return Status::ok();
}

Status DeviceSampler::sample(const float* logits, void* stream, std::vector<SampleResult>& out) {
  if (!s_) return Status::internal("device sampling: sample() without prepare()");
  const HostSampling& s = *s_;
  const size_t rows = s.params.size();
  const std::vector<size_t>& order = order_;
  cuda::GpuSampleArgs a = args_;
  a.logits = logits;
  out.assign(rows, {});
  s_ = nullptr;
  if (rows == 0) return Status::ok();
  auto get = [&](int slot, size_t bytes) { return scratch_.get(slot, std::max<size_t>(bytes, 16)); };
  DI_ASSIGN_OR_RETURN(void* ws, get(kWs, cuda::sample_workspace_bytes(a.rows, a.vocab)));
  DI_CUDA_TRY(cuda::sample_tokens(a, ws, stream));
  // Results: tokens and logprobs always, the top columns only when some row wants them.
  bool any_top = false;
  for (int32_t t : s.top) any_top |= t > 0;
  const size_t small = rows * 8, top = any_top ? rows * kTop * 8 : 0;
  DI_ASSIGN_OR_RETURN(void* host, staging_.get(small + top));
  auto* h_tok = static_cast<int32_t*>(host);
  auto* h_lp = reinterpret_cast<float*>(h_tok + rows);
  auto* h_tid = reinterpret_cast<int32_t*>(h_lp + rows);
  auto* h_tlp = reinterpret_cast<float*>(h_tid + rows * kTop);
  DI_CUDA_TRY(cuda::copy_to_host_async(h_tok, a.token, rows * 4, stream));
  DI_CUDA_TRY(cuda::copy_to_host_async(h_lp, a.logprob, rows * 4, stream));
  if (any_top) {
    DI_CUDA_TRY(cuda::copy_to_host_async(h_tid, a.top_ids, rows * kTop * 4, stream));
    DI_CUDA_TRY(cuda::copy_to_host_async(h_tlp, a.top_logprobs, rows * kTop * 4, stream));
  }
  DI_CUDA_TRY(cuda::stream_synchronize(stream));
  for (size_t i = 0; i < rows; ++i) {
    const size_t r = order[i];
    SampleResult& o = out[r];
    o.token = h_tok[i];
    if (o.token < 0 || o.token >= s.vocab) return Status::internal("device sampling returned token " + std::to_string(o.token));
    o.logprob = s.logprobs[r] ? h_lp[i] : 0.0f;
    for (int32_t j = 0; j < s.top[r]; ++j)
      o.top_logprobs.emplace_back(h_tid[i * kTop + static_cast<size_t>(j)], h_tlp[i * kTop + static_cast<size_t>(j)]);
  }
  return Status::ok();
}

}  // namespace deepinfer::v4gpu
