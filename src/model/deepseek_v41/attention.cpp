#include "model/deepseek_v41/attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/deepseek_v4/attention.h"
#include "model/numerics.h"

namespace deepinfer::v41 {

std::vector<uint8_t> candidate_mask(const float* scores, int64_t n, int64_t block, int64_t keep) {
  const int64_t nb = (n + block - 1) / block;
  std::vector<float> bs(nb, -INFINITY);
  for (int64_t e = 0; e < n; ++e) bs[e / block] = std::max(bs[e / block], scores[e]);
  if (nb > 0) bs[(n - 1) / block] = INFINITY;
  std::vector<int64_t> top = v4::select_top_k(bs.data(), nb, keep);
  std::vector<uint8_t> mask(n, 0);
  for (int64_t b : top) {
    if (bs[b] == -INFINITY) continue;
    for (int64_t e = b * block; e < std::min(n, (b + 1) * block); ++e) mask[e] = 1;
  }
  return mask;
}

namespace {

void rope_rows(CpuOps& ops, float* x, int64_t N, int64_t heads, int64_t dim, const v4::Rope& rope,
               const std::vector<int64_t>& pos) {
  ops.pool().parallel_for(N, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < heads; ++h) rope.apply(x + (t * heads + h) * dim, dim, pos[t]);
  });
}

// KV source: compress this chunk's tokens into the shared cache and derive the index keys.
void run_compressor(CpuOps& ops, const V41Config& c, const V41Attention& a, int64_t layer, const v4::Rope& rope,
                    const v4::BatchLayout& layout, std::span<V41SequenceState* const> states, const float* h) {
  const V41Compressor& cw = *a.compressor;
  const int64_t N = layout.num_tokens(), D = c.head_dim, dI = c.index_head_dim, r = c.ratios[layer];
  const int64_t slot = c.kv_source_slot(layer);
  const float eps = static_cast<float>(c.rms_eps);
  std::vector<float> kv(N * D), gate;
  ops.linear(h, N, cw.wkv, kv.data());
  if (r > 1) {
    gate.resize(N * D);
    ops.linear(h, N, *cw.wgate, gate.data());
  }
  // Pool the groups that close in this chunk (sequence by sequence, in order).
  std::vector<float> pooled;
  std::vector<std::pair<int64_t, int64_t>> owner;  // (sequence, group) of each latent
  for (size_t s = 0; s < layout.seqs.size(); ++s) {
    const v4::SeqSlice& sl = layout.seqs[s];
    KvSourceState& st = states[s]->sources[slot];
    for (int64_t i = 0; i < sl.count; ++i) {
      const int64_t t = sl.offset + i;
      const size_t at = pooled.size();
      if (r == 1) {
        pooled.insert(pooled.end(), kv.data() + t * D, kv.data() + (t + 1) * D);
      } else {
        std::copy_n(kv.data() + t * D, D, st.part_kv.data() + st.buffered * D);
        std::copy_n(gate.data() + t * D, D, st.part_gate.data() + st.buffered * D);
        if (++st.buffered < r) continue;
        st.buffered = 0;
        pooled.resize(at + D);
        for (int64_t ch = 0; ch < D; ++ch) {  // per-channel softmax over the group's tokens
          float mx = -INFINITY;
          for (int64_t j = 0; j < r; ++j) mx = std::max(mx, st.part_gate[j * D + ch]);
          float sum = 0.f;
          std::vector<float> e(r);
          for (int64_t j = 0; j < r; ++j) sum += (e[j] = std::exp(st.part_gate[j * D + ch] - mx));
          float acc = 0.f;
          for (int64_t j = 0; j < r; ++j) acc += st.part_kv[j * D + ch] * (e[j] / sum);
          pooled[at + ch] = acc;
        }
      }
      owner.push_back({static_cast<int64_t>(s), (layout.pos[t] + 1) / r - 1});
    }
  }
  const int64_t G = static_cast<int64_t>(owner.size());
  if (G == 0) return;
  // latent = norm(pooled), stored pre-RoPE for the index keys; the entry is the latent roped at
  // the group's first position.
  ops.rms_norm(pooled.data(), G, D, cw.norm.data(), eps, pooled.data());
  std::vector<float> keys(G * dI);
  const V41Indexer& iw = *a.indexer;
  ops.linear(pooled.data(), G, *iw.wk, keys.data());
  ops.rms_norm(keys.data(), G, dI, iw.k_norm.data(), eps, keys.data());
  for (int64_t g = 0; g < G; ++g) {
    const auto [s, grp] = owner[g];
    KvSourceState& st = states[s]->sources[slot];
    rope.apply(pooled.data() + g * D, D, grp * r);
    rope.apply(keys.data() + g * dI, dI, grp * r);
    if (c.numerics.reference_rounding) {  // kv_quant: FP4 entries (e4m3 scale / 16), FP4 keys (/ 32)
      numerics::fake_fp4(pooled.data() + g * D, D, 16, /*e4m3_scale=*/true);
      numerics::fake_fp4(keys.data() + g * dI, dI, 32);
    }
    st.entries.append(pooled.data() + g * D);
    st.index_keys.append(keys.data() + g * dI);
  }
}

// Index source: per query, scores over the visible index keys, candidate mask, top-k.
void run_indexer(CpuOps& ops, const V41Config& c, const V41Attention& a, int64_t layer, const v4::Rope& rope,
                 const v4::BatchLayout& layout, std::span<V41SequenceState* const> states, const float* h,
                 const float* qr, SelectionCarry& carry) {
  const V41Indexer& iw = *a.indexer;
  const int64_t N = layout.num_tokens(), nI = c.index_n_heads, dI = c.index_head_dim, r = c.ratios[layer];
  const int64_t slot = c.kv_source_slot(c.kv_source_of(layer));
  std::vector<float> qi(N * nI * dI), wi(N * nI);
  ops.linear(qr, N, iw.wq_b, qi.data());
  rope_rows(ops, qi.data(), N, nI, dI, rope, layout.pos);
  if (c.numerics.reference_rounding) numerics::fake_fp4_rows(qi.data(), N * nI, dI, 32);
  ops.linear(h, N, iw.weights_proj, wi.data());
  const float wscale = 1.f / std::sqrt(static_cast<float>(dI)) / std::sqrt(static_cast<float>(nI));
  for (float& v : wi) v *= wscale;
  const bool is_cand = layer == c.candidate_source;
  const bool masked = c.candidate_source >= 0 && layer > c.candidate_source;
  carry.selected.resize(N);
  if (is_cand) carry.candidates.assign(N, {});
  for (size_t s = 0; s < layout.seqs.size(); ++s) {
    const v4::SeqSlice& sl = layout.seqs[s];
    const v4::RowBlocks& keys = states[s]->sources[slot].index_keys;
    ops.pool().parallel_for(sl.count, 1, [&](int64_t i0, int64_t i1) {
      std::vector<float> scores;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t t = sl.offset + i;
        const int64_t vis = (layout.pos[t] + 1) / r;
        scores.assign(vis, 0.f);
        for (int64_t e = 0; e < vis; ++e) {
          float sc = 0.f;
          for (int64_t hh = 0; hh < nI; ++hh)
            sc += std::max(dot_f32(qi.data() + (t * nI + hh) * dI, keys.row(e), dI), 0.f) * wi[t * nI + hh];
          scores[e] = sc;
        }
        if (is_cand) {
          carry.candidates[t] = candidate_mask(scores.data(), vis, c.candidate_block_size, c.candidate_topk_blocks);
        } else if (masked) {
          const auto& m = carry.candidates[t];
          for (int64_t e = 0; e < vis; ++e)
            if (e >= static_cast<int64_t>(m.size()) || !m[e]) scores[e] = -INFINITY;
        }
        carry.selected[t] = v4::select_top_k(scores.data(), vis, c.index_topk);
      }
    });
  }
}

}  // namespace

void attention_forward(CpuOps& ops, const V41Config& c, const V41Block& w, int64_t layer, const RopePair& ropes,
                       const v4::BatchLayout& layout, std::span<V41SequenceState* const> states, const float* h,
                       SelectionCarry& carry, float* out) {
  const V41Attention& a = w.attn;
  const int64_t N = layout.num_tokens(), H = c.num_heads, D = c.head_dim, Wn = c.window, r = w.ratio;
  const float eps = static_cast<float>(c.rms_eps);
  const v4::Rope& rope = r > 0 ? *ropes.compress : *ropes.main;

  // Reference rounding: the FP8 linears (wq_a, wkv, wq_b, indexer wq_b, wo_b) see their input
  // rounded through FP8 per 32 along K; the bf16 ones (compressor, weights_proj) see it unrounded.
  const int64_t ab = c.act_block();
  std::vector<float> hq_buf, qq_buf;
  const float* hq = h;
  if (ab > 0) {
    hq_buf.assign(h, h + N * c.hidden);
    numerics::fake_fp8_rows(hq_buf.data(), N, c.hidden, ab);
    hq = hq_buf.data();
  }
  std::vector<float> qr(N * c.q_lora_rank), q(N * H * D), kv(N * D);
  ops.linear(hq, N, a.wq_a, qr.data());
  ops.rms_norm(qr.data(), N, c.q_lora_rank, a.q_norm.data(), eps, qr.data());
  const float* qq = qr.data();
  if (ab > 0) {
    qq_buf = qr;
    numerics::fake_fp8_rows(qq_buf.data(), N, c.q_lora_rank, ab);
    qq = qq_buf.data();
  }
  ops.linear(qq, N, a.wq_b, q.data());
  rope_rows(ops, q.data(), N, H, D, rope, layout.pos);  // no per-head q norm in V4.1
  ops.linear(hq, N, a.wkv, kv.data());
  ops.rms_norm(kv.data(), N, D, a.kv_norm.data(), eps, kv.data());
  rope_rows(ops, kv.data(), N, 1, D, rope, layout.pos);
  if (c.numerics.reference_rounding) numerics::fake_fp8_rows(kv.data(), N, D, 32);  // kv_quant: window KV

  if (a.compressor) run_compressor(ops, c, a, layer, *ropes.compress, layout, states, h);
  if (a.indexer) run_indexer(ops, c, a, layer, *ropes.compress, layout, states, h, qq, carry);
  const int64_t slot = r > 0 ? c.kv_source_slot(c.kv_source_of(layer)) : -1;

  std::vector<float> o(N * H * D);
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  for (size_t s = 0; s < layout.seqs.size(); ++s) {
    const v4::SeqSlice& sl = layout.seqs[s];
    const V41SequenceState& st = *states[s];
    const v4::WindowRing& ring = st.windows[layer];
    ops.pool().parallel_for(sl.count, 1, [&](int64_t i0, int64_t i1) {
      std::vector<const float*> rows;
      std::vector<float> logits;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t t = sl.offset + i, pos = layout.pos[t];
        rows.clear();
        for (int64_t p = std::max<int64_t>(0, pos - Wn + 1); p <= pos; ++p)
          rows.push_back(p >= sl.start_pos ? kv.data() + (sl.offset + p - sl.start_pos) * D : ring.row(p));
        if (slot >= 0)
          for (int64_t e : carry.selected[t]) rows.push_back(st.sources[slot].entries.row(e));
        v4::sink_attention(q.data() + t * H * D, H, D, rows, a.sinks.data(), scale, rope, pos, logits,
                           o.data() + t * H * D);
      }
    });
  }
  for (size_t s = 0; s < layout.seqs.size(); ++s) {
    const v4::SeqSlice& sl = layout.seqs[s];
    for (int64_t i = std::max<int64_t>(0, sl.count - Wn); i < sl.count; ++i)
      std::copy_n(kv.data() + (sl.offset + i) * D, D, states[s]->windows[layer].row(sl.start_pos + i));
  }
  v4::grouped_output(ops, o.data(), N, H * D, c.o_groups, c.o_lora_rank, a.wo_a, a.wo_b, out, ab);
}

}  // namespace deepinfer::v41
