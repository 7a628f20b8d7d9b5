#include "model/deepseek_v4_gpu/device_sampling.h"

#include <cmath>
#include <cstring>
#include <string>

namespace deepinfer::v4gpu {

namespace {

enum Buf : int { kParams, kWs, kToken, kLogprob, kTopIds, kTopLp };  // kParams: the whole input block
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

namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

Status DeviceSampler::prepare(int slot, const HostSampling& s, std::span<const size_t> order, void* stream) {
  if (slot < 0 || slot >= kSlots) return Status::internal("device sampling: bad slot");
  Slot& S = slots_[slot];
  const size_t rows = s.params.size(), V = static_cast<size_t>(s.vocab);
  if (order.size() != rows) return Status::internal("device sampling: order and rows differ in length");
  S.order.assign(order.begin(), order.end());
  S.device_row.assign(rows, -1);
  for (size_t i = 0; i < rows; ++i) S.device_row[order[i]] = static_cast<int32_t>(i);
  S.top = s.top;
  S.logprobs = s.logprobs;
  S.vocab = s.vocab;
  S.any_top = false;
  for (int32_t t : s.top) S.any_top |= t > 0;
  S.args = {};
  if (rows == 0) return Status::ok();
  // One input block: parameters, then bias rows, counts and seen flags (when present), each
  // 16-byte aligned; device row i is the caller's row order[i].
  const size_t params_off = 0, bias_off = align16(params_off + rows * sizeof(cuda::GpuSampleParams));
  const size_t counts_off = align16(bias_off + (s.bias.empty() ? 0 : rows * V * 4));
  const size_t seen_off = align16(counts_off + s.counts.size() * 4);
  const size_t bytes = align16(seen_off + s.seen.size());
  DI_ASSIGN_OR_RETURN(void* hin, S.staging_in.get(bytes));
  auto* h = static_cast<uint8_t*>(hin);
  auto* hp = reinterpret_cast<cuda::GpuSampleParams*>(h + params_off);
  for (size_t i = 0; i < rows; ++i) hp[i] = s.params[order[i]];
  if (!s.bias.empty())
    for (size_t i = 0; i < rows; ++i) std::memcpy(h + bias_off + i * V * 4, s.bias.data() + order[i] * V, V * 4);
  if (!s.counts.empty()) std::memcpy(h + counts_off, s.counts.data(), s.counts.size() * 4);
  if (!s.seen.empty()) std::memcpy(h + seen_off, s.seen.data(), s.seen.size());
  auto get = [&](int id, size_t n) { return S.scratch.get(id, std::max<size_t>(n, 16)); };
  DI_ASSIGN_OR_RETURN(void* din, get(kParams, bytes));
  DI_CUDA_TRY(cuda::copy_to_device_async(din, hin, bytes, stream));
  auto* d = static_cast<uint8_t*>(din);
  cuda::GpuSampleArgs& a = S.args;
  a.params = reinterpret_cast<const cuda::GpuSampleParams*>(d + params_off);
  a.rows = static_cast<int32_t>(rows), a.vocab = static_cast<int32_t>(V);
  if (!s.bias.empty()) a.bias = reinterpret_cast<const float*>(d + bias_off);
  if (!s.counts.empty()) {
    a.counts = reinterpret_cast<const int32_t*>(d + counts_off);
    a.seen = reinterpret_cast<const uint8_t*>(d + seen_off);
  }
  DI_ASSIGN_OR_RETURN(void* tok, get(kToken, rows * 4));
  DI_ASSIGN_OR_RETURN(void* lp, get(kLogprob, rows * 4));
  DI_ASSIGN_OR_RETURN(void* tid, get(kTopIds, rows * kTop * 4));
  DI_ASSIGN_OR_RETURN(void* tlp, get(kTopLp, rows * kTop * 4));
  a.token = static_cast<int32_t*>(tok), a.logprob = static_cast<float*>(lp);
  a.top_ids = static_cast<int32_t*>(tid), a.top_logprobs = static_cast<float*>(tlp);
  return Status::ok();
}

Status DeviceSampler::launch(int slot, const float* logits, void* stream) {
  if (slot < 0 || slot >= kSlots) return Status::internal("device sampling: bad slot");
  Slot& S = slots_[slot];
  const size_t rows = S.order.size();
  S.host_out = nullptr;
  if (rows == 0) return Status::ok();
  cuda::GpuSampleArgs a = S.args;
  a.logits = logits;
  DI_ASSIGN_OR_RETURN(void* ws, shared_.get(kWs, std::max<size_t>(cuda::sample_workspace_bytes(a.rows, a.vocab), 16)));
  DI_CUDA_TRY(cuda::sample_tokens(a, ws, stream));
  // Results: tokens and logprobs always, the top columns only when some row wants them.
  const size_t small = rows * 8, top = S.any_top ? rows * kTop * 8 : 0;
  DI_ASSIGN_OR_RETURN(void* host, S.staging_out.get(small + top));
  S.host_out = host;
  auto* h_tok = static_cast<int32_t*>(host);
  auto* h_lp = reinterpret_cast<float*>(h_tok + rows);
  auto* h_tid = reinterpret_cast<int32_t*>(h_lp + rows);
  auto* h_tlp = reinterpret_cast<float*>(h_tid + rows * kTop);
  DI_CUDA_TRY(cuda::copy_to_host_async(h_tok, a.token, rows * 4, stream));
  DI_CUDA_TRY(cuda::copy_to_host_async(h_lp, a.logprob, rows * 4, stream));
  if (S.any_top) {
    DI_CUDA_TRY(cuda::copy_to_host_async(h_tid, a.top_ids, rows * kTop * 4, stream));
    DI_CUDA_TRY(cuda::copy_to_host_async(h_tlp, a.top_logprobs, rows * kTop * 4, stream));
  }
  return Status::ok();
}

Status DeviceSampler::results(int slot, std::vector<SampleResult>& out) const {
  if (slot < 0 || slot >= kSlots) return Status::internal("device sampling: bad slot");
  const Slot& S = slots_[slot];
  const size_t rows = S.order.size();
  out.assign(rows, {});
  if (rows == 0) return Status::ok();
  if (!S.host_out) return Status::internal("device sampling: results() without launch()");
  const auto* h_tok = static_cast<const int32_t*>(S.host_out);
  const auto* h_lp = reinterpret_cast<const float*>(h_tok + rows);
  const auto* h_tid = reinterpret_cast<const int32_t*>(h_lp + rows);
  const auto* h_tlp = reinterpret_cast<const float*>(h_tid + rows * kTop);
  for (size_t i = 0; i < rows; ++i) {
    const size_t r = S.order[i];
    SampleResult& o = out[r];
    o.token = h_tok[i];
    if (o.token < 0 || o.token >= S.vocab) return Status::internal("device sampling returned token " + std::to_string(o.token));
    o.logprob = S.logprobs[r] ? h_lp[i] : 0.0f;
    for (int32_t j = 0; j < S.top[r]; ++j)
      o.top_logprobs.emplace_back(h_tid[i * kTop + static_cast<size_t>(j)], h_tlp[i * kTop + static_cast<size_t>(j)]);
  }
  return Status::ok();
}

}  // namespace deepinfer::v4gpu
