#include "model/deepseek_v41/model.h"

#include <algorithm>

#include "model/deepseek_v4/mhc.h"
#include "model/deepseek_v4/moe.h"

namespace deepinfer::v41 {

Result<std::unique_ptr<V41Model>> V41Model::load(const std::string& dir, Backend& backend,
                                                 std::optional<std::vector<int32_t>> token_map,
                                                 const LoadOptions& opt) {
  DI_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir));
  DI_ASSIGN_OR_RETURN(V41Config cfg, V41Config::from_json(ck.config(), dir + "/config.json"));
  cfg.numerics = opt.numerics;
  DI_ASSIGN_OR_RETURN(V41Weights w, V41Weights::load(ck, cfg));
  std::unique_ptr<V41Model> m(new V41Model(std::move(ck), std::move(cfg), std::move(w), backend));
  if (!m->cfg_.engram_layers.empty()) {
    if (!token_map) {
      DI_ASSIGN_OR_RETURN(std::vector<int32_t> tm, load_token_map(dir, m->cfg_));
      token_map = std::move(tm);
    }
    auto h = EngramHasher::create(m->cfg_, std::move(*token_map));
    if (!h.is_ok()) return std::move(h).status().with_context(dir);
    m->hasher_ = std::move(h).value();
  }
  return m;
}

V41Model::V41Model(Checkpoint ck, V41Config cfg, V41Weights w, Backend& backend)
    : ck_(std::move(ck)),
      cfg_(std::move(cfg)),
      w_(std::move(w)),
      backend_(backend),
      rope_main_(cfg_.rope_main, cfg_.rope_dim),
      rope_compress_(cfg_.rope_compress, cfg_.rope_dim) {}

Status V41Model::check_tokens(std::span<const int32_t> tokens) const {
  return v4::check_token_ids(tokens, cfg_.vocab_size);
}

std::vector<int64_t> V41Model::engram_rows(const std::vector<int32_t>& history, std::span<const int32_t> tokens) const {
  const int64_t N = static_cast<int64_t>(tokens.size()), Ng = cfg_.engram_max_ngram;
  const int64_t L = hasher_->layers(), cols = hasher_->columns();
  std::vector<int64_t> out(N * L * cols);
  std::vector<int32_t> back(Ng);
  const int64_t H = static_cast<int64_t>(history.size());
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t s = 0; s < Ng; ++s) {
      const int64_t j = i - s;  // index into the chunk; negative: look into the history
      back[s] = j >= 0 ? hasher_->compressed(tokens[j]) : (H + j >= 0 ? history[H + j] : -1);
    }
    hasher_->hash(back.data(), out.data() + i * L * cols);
  }
  return out;
}

std::vector<std::vector<int64_t>> V41Model::engram_plan(std::span<const SeqInput> batch) const {
  if (!hasher_) return {};
  const int64_t L = hasher_->layers(), cols = hasher_->columns();
  int64_t N = 0;
  for (const SeqInput& in : batch) N += static_cast<int64_t>(in.tokens.size());
  std::vector<std::vector<int64_t>> by_layer(L, std::vector<int64_t>(N * cols));
  int64_t off = 0;
  for (const SeqInput& in : batch) {
    const int64_t count = static_cast<int64_t>(in.tokens.size());
    const std::vector<int64_t> r = engram_rows(in.state->history, in.tokens);  // [count, L, cols]
    for (int64_t i = 0; i < count; ++i)
      for (int64_t l = 0; l < L; ++l)
        std::copy_n(r.data() + (i * L + l) * cols, cols, by_layer[l].data() + (off + i) * cols);
    off += count;
  }
  return by_layer;
}

std::vector<std::vector<int64_t>> V41Model::prefetch_engram(std::span<const SeqInput> upcoming) const {
  for (const SeqInput& in : upcoming)
    if (!in.state || !check_tokens(in.tokens).is_ok()) return {};  // forward() reports these
  std::vector<std::vector<int64_t>> rows = engram_plan(upcoming);
  for (size_t l = 0; l < rows.size(); ++l) {
    std::sort(rows[l].begin(), rows[l].end());
    rows[l].erase(std::unique(rows[l].begin(), rows[l].end()), rows[l].end());
    prefetch_table_rows(w_.layers[cfg_.engram_layers[l]].engram->table, rows[l]);
  }
  return rows;
}

Status V41Model::forward(std::span<const SeqInput> batch, v4::ForwardOutput& out) {
  if (batch.empty()) return Status::invalid_argument("empty batch");
  v4::BatchLayout layout;
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
  const float eps = static_cast<float>(cfg_.rms_eps);
  const v4::HcParams hp{n, d, eps, static_cast<float>(cfg_.hc_eps), cfg_.hc_sinkhorn_iters};
  v4::MoeParams mp;
  mp.n_experts = cfg_.n_routed_experts;
  mp.top_k = cfg_.experts_per_tok;
  mp.scoring_func = cfg_.scoring_func;
  mp.norm_topk_prob = cfg_.norm_topk_prob && cfg_.experts_per_tok > 1;
  mp.routed_scaling = static_cast<float>(cfg_.routed_scaling);
  mp.swiglu_limit = static_cast<float>(cfg_.swiglu_limit);
  mp.gate_temp = static_cast<float>(cfg_.gate_temp);
  mp.renorm_eps = 1e-20f;
  mp.act_block = cfg_.act_block();  // routed (MXFP4) and shared (FP8) experts' w1/w3 and w2 inputs

  // Engram rows for every token and Engram layer, known before the step: advise them all now.
  std::vector<std::vector<int64_t>> rows_by_layer = engram_plan(batch);
  if (engram_prefetch_)
    for (size_t l = 0; l < rows_by_layer.size(); ++l)
      prefetch_table_rows(w_.layers[cfg_.engram_layers[l]].engram->table, rows_by_layer[l]);

  std::vector<float> X(N * n * d), e(N * d), x(N * d), f(N * d);
  ops.embedding(w_.embed, ids.data(), N, e.data());
  for (int64_t t = 0; t < N; ++t)
    for (int64_t j = 0; j < n; ++j) std::copy_n(e.data() + t * d, d, X.data() + (t * n + j) * d);
  // Deferred mHC: a site collapses with the previous site's pre; the first is one-hot on stream 0.
  std::vector<float> pre(N * n, 0.f);
  for (int64_t t = 0; t < N; ++t) pre[t * n] = 1.f;

  std::vector<V41SequenceState*> states(batch.size());
  for (size_t s = 0; s < batch.size(); ++s) states[s] = batch[s].state;
  const RopePair ropes{&rope_main_, &rope_compress_};
  SelectionCarry carry;
  for (int64_t l = 0; l < cfg_.num_layers; ++l) {
    const V41Block& bw = w_.layers[l];
    if (bw.engram) engram_forward(ops, cfg_, *bw.engram, rows_by_layer[cfg_.engram_index(l)].data(), N, X.data());
    v4::HcMix am = v4::hc_mix(ops, hp, bw.hc_attn, X.data(), N);
    v4::hc_collapse(ops, hp, pre.data(), X.data(), N, x.data());
    ops.rms_norm(x.data(), N, d, bw.attn_norm.data(), eps, x.data());
    attention_forward(ops, cfg_, bw, l, ropes, layout, states, x.data(), carry, f.data());
    v4::hc_expand(ops, hp, am.post.data(), am.comb.data(), f.data(), X.data(), N);

    v4::HcMix fm = v4::hc_mix(ops, hp, bw.hc_ffn, X.data(), N);
    v4::hc_collapse(ops, hp, am.pre.data(), X.data(), N, x.data());
    ops.rms_norm(x.data(), N, d, bw.ffn_norm.data(), eps, x.data());
    v4::moe_forward(ops, mp, bw.ffn, /*hash=*/false, x.data(), ids.data(), N, d, f.data());
    v4::hc_expand(ops, hp, fm.post.data(), fm.comb.data(), f.data(), X.data(), N);
    pre = std::move(fm.pre);
  }

  std::vector<int64_t> rows;
  out.row_offsets.clear();
  for (size_t s = 0; s < batch.size(); ++s) {
    out.row_offsets.push_back(static_cast<int64_t>(rows.size()));
    const v4::SeqSlice& sl = layout.seqs[s];
    if (batch[s].all_logits)
      for (int64_t i = 0; i < sl.count; ++i) rows.push_back(sl.offset + i);
    else
      rows.push_back(sl.offset + sl.count - 1);
  }
  const int64_t R = static_cast<int64_t>(rows.size());
  std::vector<float> Xr(R * n * d), pr(R * n), hfin(R * d);
  for (int64_t i = 0; i < R; ++i) {
    std::copy_n(X.data() + rows[i] * n * d, n * d, Xr.data() + i * n * d);
    std::copy_n(pre.data() + rows[i] * n, n, pr.data() + i * n);
  }
  // Final collapse with the last FFN's pre (no hc_head in V4.1).
  v4::hc_collapse(ops, hp, pr.data(), Xr.data(), R, hfin.data());
  ops.rms_norm(hfin.data(), R, d, w_.norm.data(), eps, hfin.data());
  out.logits.resize(R * cfg_.vocab_size);
  ops.linear(hfin.data(), R, w_.head, out.logits.data());
  out.final_streams.clear();

  const int64_t keep = std::max<int64_t>(0, cfg_.engram_max_ngram - 1);
  for (const SeqInput& in : batch) {
    in.state->length += static_cast<int64_t>(in.tokens.size());
    if (hasher_) {
      auto& h = in.state->history;
      for (int32_t t : in.tokens) h.push_back(hasher_->compressed(t));
      if (static_cast<int64_t>(h.size()) > keep) h.erase(h.begin(), h.end() - keep);
    }
  }
  last_engram_rows_ = std::move(rows_by_layer);
  return Status::ok();
}

}  // namespace deepinfer::v41
