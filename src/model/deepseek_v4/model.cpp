#include "model/deepseek_v4/model.h"

#include "model/deepseek_v4/attention.h"
#include "model/deepseek_v4/mhc.h"
#include "model/deepseek_v4/moe.h"

namespace deepinfer::v4 {

Result<std::unique_ptr<V4Model>> V4Model::load(const std::string& dir, Backend& backend, const LoadOptions& opt) {
  DI_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir));
  return from_checkpoint(std::move(ck), backend, opt);
}

Result<std::unique_ptr<V4Model>> V4Model::from_checkpoint(Checkpoint ck, Backend& backend, const LoadOptions& opt) {
  DI_ASSIGN_OR_RETURN(V4Config cfg, V4Config::from_json(ck.config(), ck.dir() + "/config.json"));
  cfg.numerics = opt.numerics;
  DI_ASSIGN_OR_RETURN(V4Weights w, V4Weights::load(ck, cfg));
  return std::unique_ptr<V4Model>(new V4Model(std::move(ck), std::move(cfg), std::move(w), backend));
}

V4Model::V4Model(Checkpoint ck, V4Config cfg, V4Weights w, Backend& backend)
    : ck_(std::move(ck)),
      cfg_(std::move(cfg)),
      w_(std::move(w)),
      backend_(backend),
      rope_main_(cfg_.rope_main, cfg_.rope_dim),
      rope_compress_(cfg_.rope_compress, cfg_.rope_dim) {}

Status V4Model::check_tokens(std::span<const int32_t> tokens) const {
  return check_token_ids(tokens, cfg_.vocab_size);
}

void V4Model::block_forward(const BlockWeights& bw, const BatchLayout& layout, std::span<LayerState* const> states,
                            const int32_t* ids, std::vector<float>& X) {
  CpuOps& ops = backend_.ops();
  const int64_t N = layout.num_tokens(), d = cfg_.hidden;
  const float eps = static_cast<float>(cfg_.rms_eps);
  const Rope& rope = bw.kind == AttnKind::kSliding ? rope_main_ : rope_compress_;
  std::vector<float> x(N * d), f(N * d);

  HcMix mix = hc_pre(ops, cfg_, bw.hc_attn, X, N);
  ops.rms_norm(mix.input.data(), N, d, bw.attn_norm.data(), eps, x.data());
  attention_forward(ops, cfg_, bw, rope, layout, states, x.data(), f.data());
  hc_post(ops, cfg_, mix, f, X, N);

  mix = hc_pre(ops, cfg_, bw.hc_ffn, X, N);
  ops.rms_norm(mix.input.data(), N, d, bw.ffn_norm.data(), eps, x.data());
  moe_forward(ops, cfg_, bw.ffn, bw.hash, x.data(), ids, N, f.data());
  hc_post(ops, cfg_, mix, f, X, N);
}

void V4Model::head_logits(const HcHeadWeights& hc, const std::vector<float>& norm, const float* X, int64_t rows,
                          float* logits) {
  CpuOps& ops = backend_.ops();
  std::vector<float> h(rows * cfg_.hidden);
  hc_head(ops, cfg_, hc, X, rows, h.data());
  ops.rms_norm(h.data(), rows, cfg_.hidden, norm.data(), static_cast<float>(cfg_.rms_eps), h.data());
  ops.linear(h.data(), rows, w_.head, logits);
}

Status V4Model::forward(std::span<const SeqInput> batch, ForwardOutput& out, bool keep_final_streams) {
  if (batch.empty()) return Status::invalid_argument("empty batch");
  BatchLayout layout;
  std::vector<int32_t> ids;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SeqInput& in = batch[s];
    if (!in.state) return Status::invalid_argument("sequence without state");
    DI_TRY(check_tokens(in.tokens).with_context("sequence " + std::to_string(s)));
    layout.seqs.push_back({layout.num_tokens(), static_cast<int64_t>(in.tokens.size()), in.state->length});
    for (size_t i = 0; i < in.tokens.size(); ++i) layout.pos.push_back(in.state->length + static_cast<int64_t>(i));
    ids.insert(ids.end(), in.tokens.begin(), in.tokens.end());
  }
  CpuOps& ops = backend_.ops();
  const int64_t N = layout.num_tokens(), n = cfg_.hc_mult, d = cfg_.hidden;

  std::vector<float> X(N * n * d), e(N * d);
  ops.embedding(w_.embed, ids.data(), N, e.data());
  for (int64_t t = 0; t < N; ++t)
    for (int64_t j = 0; j < n; ++j) std::copy_n(e.data() + t * d, d, X.data() + (t * n + j) * d);

  std::vector<LayerState*> states(batch.size());
  for (int64_t l = 0; l < cfg_.num_layers; ++l) {
    for (size_t s = 0; s < batch.size(); ++s) states[s] = &batch[s].state->layers[l];
    block_forward(w_.layers[l], layout, states, ids.data(), X);
  }

  // Rows that need logits: every token when asked (scoring), else each sequence's last.
  std::vector<int64_t> rows;
  out.row_offsets.clear();
  for (size_t s = 0; s < batch.size(); ++s) {
    out.row_offsets.push_back(static_cast<int64_t>(rows.size()));
    const SeqSlice& sl = layout.seqs[s];
    if (batch[s].all_logits)
      for (int64_t i = 0; i < sl.count; ++i) rows.push_back(sl.offset + i);
    else
      rows.push_back(sl.offset + sl.count - 1);
  }
  std::vector<float> Xr(rows.size() * n * d);
  for (size_t r = 0; r < rows.size(); ++r) std::copy_n(X.data() + rows[r] * n * d, n * d, Xr.data() + r * n * d);
  out.logits.resize(rows.size() * cfg_.vocab_size);
  head_logits(w_.hc_head, w_.norm, Xr.data(), static_cast<int64_t>(rows.size()), out.logits.data());
  if (keep_final_streams) out.final_streams = std::move(X);
  for (const SeqInput& in : batch) in.state->length += static_cast<int64_t>(in.tokens.size());
  return Status::ok();
}

Status V4Model::mtp_forward(SequenceState& state, std::span<const float> streams,
                            std::span<const int32_t> next_tokens, std::vector<float>& logits) {
  if (!w_.mtp) return Status::unsupported("this checkpoint has no MTP head (mtp.0.*)");
  if (!state.mtp) return Status::invalid_argument("sequence state was created without MTP state");
  DI_TRY(check_tokens(next_tokens));
  const MtpWeights& m = *w_.mtp;
  const int64_t N = static_cast<int64_t>(next_tokens.size()), n = cfg_.hc_mult, d = cfg_.hidden;
  if (static_cast<int64_t>(streams.size()) != N * n * d)
    return Status::invalid_argument("MTP: streams must be [tokens, hc_mult, hidden]");
  CpuOps& ops = backend_.ops();
  const float eps = static_cast<float>(cfg_.rms_eps);
  // e = enorm(embed[t+1]); h_j = hnorm(X_t,j); X'_j = e_proj e + h_proj h_j.
  std::vector<float> e(N * d), ep(N * d), hn(N * n * d), X(N * n * d);
  ops.embedding(w_.embed, next_tokens.data(), N, e.data());
  ops.rms_norm(e.data(), N, d, m.enorm.data(), eps, e.data());
  ops.linear(e.data(), N, m.e_proj, ep.data());
  ops.rms_norm(streams.data(), N * n, d, m.hnorm.data(), eps, hn.data());
  ops.linear(hn.data(), N * n, m.h_proj, X.data());
  for (int64_t t = 0; t < N; ++t)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < d; ++k) X[(t * n + j) * d + k] += ep[t * d + k];
  BatchLayout layout;
  layout.seqs.push_back({0, N, state.mtp_length});
  for (int64_t t = 0; t < N; ++t) layout.pos.push_back(state.mtp_length + t);
  LayerState* st = &*state.mtp;
  block_forward(m.block, layout, std::span<LayerState* const>(&st, 1), next_tokens.data(), X);
  logits.resize(N * cfg_.vocab_size);
  head_logits(m.hc_head, m.norm, X.data(), N, logits.data());
  state.mtp_length += N;
  return Status::ok();
}

}  // namespace deepinfer::v4
