#include "model/deepseek_v4/attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/deepseek_v4/compressor.h"
#include "model/numerics.h"

namespace deepinfer::v4 {

std::vector<int64_t> select_top_k(const float* scores, int64_t n, int64_t k) {
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, n);
  auto better = [&](int64_t a, int64_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

void sink_attention(const float* q, int64_t H, int64_t D, const std::vector<const float*>& rows,
                    const float* sinks, float scale, const Rope& rope, int64_t pos, std::vector<float>& logits,
                    float* o) {
  logits.resize(rows.size());
  for (int64_t hh = 0; hh < H; ++hh) {
    const float* qh = q + hh * D;
    float mx = sinks[hh];
    for (size_t r = 0; r < rows.size(); ++r) mx = std::max(mx, logits[r] = dot_f32(qh, rows[r], D) * scale);
    float sum = std::exp(sinks[hh] - mx);
    for (size_t r = 0; r < rows.size(); ++r) sum += (logits[r] = std::exp(logits[r] - mx));
    float* oh = o + hh * D;
    std::fill(oh, oh + D, 0.f);
    for (size_t r = 0; r < rows.size(); ++r) {
      const float pr = logits[r] / sum;
      const float* row = rows[r];
      for (int64_t k = 0; k < D; ++k) oh[k] += pr * row[k];
    }
    rope.apply(oh, D, pos, /*inverse=*/true);
  }
}

void grouped_output(CpuOps& ops, const float* o, int64_t N, int64_t HD, int64_t G, int64_t R, const Weight& wo_a,
                    const Weight& wo_b, float* out, int64_t act_block) {
  const int64_t gin = HD / G;
  std::vector<float> z(N * G * R);
  for (int64_t g = 0; g < G; ++g) ops.linear(o + g * gin, N, HD, wo_a, g * R, (g + 1) * R, z.data() + g * R, G * R);
  if (act_block > 0) numerics::fake_fp8_rows(z.data(), N, G * R, act_block);
  ops.linear(z.data(), N, wo_b, out);
}

namespace {

// Per-head unweighted RMS norm, then RoPE on each head's trailing dims.
void norm_and_rope_heads(CpuOps& ops, float* x, int64_t N, int64_t heads, int64_t dim, float eps, bool norm,
                         const Rope& rope, const std::vector<int64_t>& pos) {
  if (norm) ops.rms_norm(x, N * heads, dim, nullptr, eps, x);
  ops.pool().parallel_for(N, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < heads; ++h) rope.apply(x + (t * heads + h) * dim, dim, pos[t]);
  });
}

// Projects every token's compressor rows and pushes them, sequence by sequence, in order.
void run_compressor(CpuOps& ops, const V4Config& c, const CompressorWeights& w, const Rope& rope,
                    const BatchLayout& layout, std::span<LayerState* const> states, bool index, const float* h) {
  const int64_t N = layout.num_tokens(), cw = w.wkv.rows;
  std::vector<float> kv(N * cw), gate(N * cw);
  ops.linear(h, N, w.wkv, kv.data());
  ops.linear(h, N, w.wgate, gate.data());
  CompressorParams p{&w.norm, static_cast<float>(c.rms_eps), &rope};
  if (c.numerics.reference_rounding) {
    p.round_mode = index ? 2 : 1;
    p.rope_dim = c.rope_dim;
  }
  ops.pool().parallel_for(static_cast<int64_t>(layout.seqs.size()), 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const SeqSlice& sl = layout.seqs[s];
      CompressorState& st = index ? *states[s]->index : *states[s]->kv;
      for (int64_t i = 0; i < sl.count; ++i) {
        const int64_t t = sl.offset + i;
        float* g = gate.data() + t * cw;
        const float* ape = w.ape.data() + (layout.pos[t] % st.ratio) * cw;
        for (int64_t k = 0; k < cw; ++k) g[k] += ape[k];
        compressor_push(st, kv.data() + t * cw, g, p);
      }
    }
  });
}

}  // namespace

void attention_forward(CpuOps& ops, const V4Config& c, const BlockWeights& w, const Rope& rope,
                       const BatchLayout& layout, std::span<LayerState* const> states, const float* h, float* out) {
  const AttentionWeights& a = w.attn;
  const int64_t N = layout.num_tokens(), d = c.hidden, H = c.num_heads, D = c.head_dim, Wn = c.window;
  const float eps = static_cast<float>(c.rms_eps);

  // Reference rounding (model/numerics.h): the FP8 linears see their input rounded through FP8
  // per 128 along K (hq, qq); the bf16 ones (compressors, weights_proj) see it unrounded.
  const bool rr = c.numerics.reference_rounding;
  const int64_t act_block = rr ? 128 : 0;
  std::vector<float> hq_buf, qq_buf;
  const float* hq = h;
  if (rr) {
    hq_buf.assign(h, h + N * c.hidden);
    numerics::fake_fp8_rows(hq_buf.data(), N, c.hidden, act_block);
    hq = hq_buf.data();
  }
  std::vector<float> qr(N * c.q_lora_rank), q(N * H * D), kv(N * D);
  ops.linear(hq, N, a.wq_a, qr.data());
  ops.rms_norm(qr.data(), N, c.q_lora_rank, a.q_norm.data(), eps, qr.data());
  const float* qq = qr.data();
  if (rr) {
    qq_buf = qr;
    numerics::fake_fp8_rows(qq_buf.data(), N, c.q_lora_rank, act_block);
    qq = qq_buf.data();
  }
  ops.linear(qq, N, a.wq_b, q.data());
  norm_and_rope_heads(ops, q.data(), N, H, D, eps, /*norm=*/true, rope, layout.pos);
  ops.linear(hq, N, a.wkv, kv.data());
  ops.rms_norm(kv.data(), N, D, a.kv_norm.data(), eps, kv.data());
  norm_and_rope_heads(ops, kv.data(), N, 1, D, eps, /*norm=*/false, rope, layout.pos);
  if (rr)  // window KV: nope dims through FP8 per 64, rope dims kept
    for (int64_t t = 0; t < N; ++t) numerics::fake_fp8(kv.data() + t * D, D - c.rope_dim, 64);

  if (a.compressor) run_compressor(ops, c, *a.compressor, rope, layout, states, /*index=*/false, h);

  // CSA: lightning indexer picks the compressed entries each query attends to.
  std::vector<std::vector<int64_t>> selected;
  if (a.indexer) {
    const IndexerWeights& iw = *a.indexer;
    run_compressor(ops, c, iw.compressor, rope, layout, states, /*index=*/true, h);
    const int64_t Hi = c.index_n_heads, Di = c.index_head_dim;
    std::vector<float> qi(N * Hi * Di), wi(N * Hi);
    ops.linear(qq, N, iw.wq_b, qi.data());
    norm_and_rope_heads(ops, qi.data(), N, Hi, Di, eps, /*norm=*/false, rope, layout.pos);
    if (rr)
      for (int64_t r = 0; r < N * Hi; ++r) {
        numerics::hadamard(qi.data() + r * Di, Di);
        numerics::fake_fp4(qi.data() + r * Di, Di, 32);
      }
    ops.linear(h, N, iw.weights_proj, wi.data());
    selected.resize(N);
    const float head_scale = 1.f / std::sqrt(static_cast<float>(Hi));
    const float dot_scale = 1.f / std::sqrt(static_cast<float>(Di));
    for (size_t s = 0; s < layout.seqs.size(); ++s) {
      const SeqSlice& sl = layout.seqs[s];
      const CompressorState& ist = *states[s]->index;
      ops.pool().parallel_for(sl.count, 1, [&](int64_t i0, int64_t i1) {
        std::vector<float> scores;
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t t = sl.offset + i;
          const int64_t visible = (layout.pos[t] + 1) / ist.ratio;
          scores.assign(visible, 0.f);
          for (int64_t e = 0; e < visible; ++e) {
            const float* key = ist.entries.row(e);
            float sc = 0.f;
            for (int64_t hh = 0; hh < Hi; ++hh) {
              const float qk = dot_f32(qi.data() + (t * Hi + hh) * Di, key, Di);
              sc += std::max(qk, 0.f) * dot_scale * (wi[t * Hi + hh] * head_scale);
            }
            scores[e] = sc;
          }
          selected[t] = select_top_k(scores.data(), visible, c.index_topk);
        }
      });
    }
  }

  // Core attention: window rows then compressed rows, one softmax with the sink.
  std::vector<float> o(N * H * D);
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  for (size_t s = 0; s < layout.seqs.size(); ++s) {
    const SeqSlice& sl = layout.seqs[s];
    const LayerState& st = *states[s];
    ops.pool().parallel_for(sl.count, 1, [&](int64_t i0, int64_t i1) {
      std::vector<const float*> rows;
      std::vector<float> logits;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t t = sl.offset + i, pos = layout.pos[t];
        rows.clear();
        for (int64_t p = std::max<int64_t>(0, pos - Wn + 1); p <= pos; ++p)
          rows.push_back(p >= sl.start_pos ? kv.data() + (sl.offset + p - sl.start_pos) * D : st.window.row(p));
        if (st.kv) {
          if (a.indexer) {
            for (int64_t e : selected[t]) rows.push_back(st.kv->entries.row(e));
          } else {
            const int64_t visible = (pos + 1) / st.kv->ratio;
            for (int64_t e = 0; e < visible; ++e) rows.push_back(st.kv->entries.row(e));
          }
        }
        sink_attention(q.data() + t * H * D, H, D, rows, a.sinks.data(), scale, rope, pos, logits,
                       o.data() + t * H * D);
      }
    });
  }

  // The window ring keeps the last `window` rows (written after every query of the chunk ran).
  for (size_t s = 0; s < layout.seqs.size(); ++s) {
    const SeqSlice& sl = layout.seqs[s];
    for (int64_t i = std::max<int64_t>(0, sl.count - Wn); i < sl.count; ++i)
      std::copy_n(kv.data() + (sl.offset + i) * D, D, states[s]->window.row(sl.start_pos + i));
  }

  // Grouped output projection: group g's heads -> o_lora_rank, then wo_b.
  grouped_output(ops, o.data(), N, H * D, c.o_groups, c.o_lora_rank, a.wo_a, a.wo_b, out, act_block);
  (void)d;
}

}  // namespace deepinfer::v4
