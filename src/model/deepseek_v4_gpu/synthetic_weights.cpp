// GpuWeights::synthetic: the struct GpuWeights::upload builds, from random codes generated on the
// device (cuda::fill_random) in the stored formats instead of a checkpoint's tensors. Scales are
// bench/cuda_model/weights.cpp's, which keep activations finite through the 43 V4-Flash layers:
//   FP8 linears      e4m3 codes of uniform(-1, 1), E8M0 block scales 120..122 (2^-7..2^-5)
//   MXFP4 experts    every e2m1 nibble, E8M0 per 32 of 118..120 (2^-9..2^-7)
//   bf16             embed 1.0, head 0.02, compressor / indexer wkv + wgate 0.02,
//                    weights_proj 0.02, router 0.03 (uniform(-a, a))
//   fp32             mHC fn 0.01, base 0.5, scale 1; norms and sinks 1; ape 0.1; bias 0.1
// (zeros on hash layers, as upload gives them); tid2eid: per hash layer, k distinct experts per
// token id drawn on the host (partial Fisher-Yates), uploaded as int32.
#include <random>

#include "model/deepseek_v4_gpu/gpu_weights.h"

namespace deepinfer::v4gpu {

namespace {

using cuda::RandomKind;

size_t elem_bytes(RandomKind k) { return k == RandomKind::kBf16 ? 2 : k == RandomKind::kF32 ? 4 : 1; }

class Gen {
 public:
  explicit Gen(uint64_t seed) : s_(seed) {}

  uint64_t next() {  // splitmix64: one seed per tensor
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  Status fill(void* dst, int64_t count, RandomKind k, float a, float b, const std::string& what) {
    if (count > 0 && !cuda::fill_random(dst, count, k, a, b, next())) return device_error("fill_random of " + what);
    return Status::ok();
  }
  Result<DeviceBuffer> rnd(int64_t count, RandomKind k, float a, float b, const std::string& what) {
    DI_ASSIGN_OR_RETURN(DeviceBuffer d, DeviceBuffer::alloc(static_cast<size_t>(count) * elem_bytes(k), what));
    DI_TRY(fill(d.get(), count, k, a, b, what));
    return d;
  }
  Result<DeviceBuffer> f32(int64_t n, float amp, const std::string& what) {
    return rnd(n, RandomKind::kF32, amp, 0.f, what);
  }
  Result<GpuLinear> fp8(int64_t n, int64_t k, const std::string& what) {
    GpuLinear g;
    g.fp8 = true, g.n = n, g.k = k;
    DI_ASSIGN_OR_RETURN(g.data, rnd(n * k, RandomKind::kE4M3, 1.f, 0.f, what));
    DI_ASSIGN_OR_RETURN(g.scale, rnd((n / 128) * (k / 128), RandomKind::kE8M0, 120.f, 122.f, what + " scale"));
    DI_TRY(g.add_f32_scales());
    return g;
  }
  Result<GpuLinear> bf16(int64_t n, int64_t k, float amp, const std::string& what) {
    GpuLinear g;
    g.n = n, g.k = k;
    DI_ASSIGN_OR_RETURN(g.data, rnd(n * k, RandomKind::kBf16, amp, 0.f, what));
    return g;
  }
  Result<GpuHc> hc(int64_t n, int64_t d, const std::string& what) {
    const int64_t mix = (2 + n) * n;
    GpuHc g;
    DI_ASSIGN_OR_RETURN(g.fn, f32(mix * n * d, 0.01f, what + "_fn"));
    DI_ASSIGN_OR_RETURN(g.base, f32(mix, 0.5f, what + "_base"));
    DI_ASSIGN_OR_RETURN(g.scale, f32(3, 1.f, what + "_scale"));
    return g;
  }
  Result<GpuCompressor> compressor(int64_t ratio, int64_t width, bool overlap, int64_t d, const std::string& what) {
    GpuCompressor g;
    g.ratio = ratio, g.width = width, g.overlap = overlap;
    DI_ASSIGN_OR_RETURN(const GpuLinear wkv, bf16(g.cw(), d, 0.02f, what + ".wkv"));
    DI_ASSIGN_OR_RETURN(const GpuLinear wgate, bf16(g.cw(), d, 0.02f, what + ".wgate"));
    DI_ASSIGN_OR_RETURN(g.wkvg, concat_rows(wkv, wgate, what + ".wkv + wgate"));
    DI_ASSIGN_OR_RETURN(g.ape, f32(ratio * g.cw(), 0.1f, what + ".ape"));
    DI_ASSIGN_OR_RETURN(g.norm, f32(width, 1.f, what + ".norm"));
    return g;
  }
  // One routed expert's blob (w1 [I, d], w3 [I, d], w2 [d, I]: packed e2m1 + E8M0 per 32).
  Result<DeviceBuffer> expert(int64_t I, int64_t d, bool tiled, cuda::ExpertPtrs& p, const std::string& what) {
    const size_t w13 = static_cast<size_t>(I * d / 2), s13 = static_cast<size_t>(I * d / 32);
    const size_t part[6] = {w13, s13, w13, s13, w13, s13};  // w2 [d, I] has the same sizes
    const ExpertLayout lay = expert_layout(part);
    DI_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::alloc(lay.bytes, what));
    auto* base = b.as<uint8_t>();
    for (int i = 0; i < 6; i += 2) {
      DI_TRY(fill(base + lay.off[i], static_cast<int64_t>(part[i]), RandomKind::kE2M1, 0.f, 0.f, what));
      DI_TRY(fill(base + lay.off[i + 1], static_cast<int64_t>(part[i + 1]), RandomKind::kE8M0, 118.f, 120.f, what));
    }
    DI_TRY(lay.to_device_layout(base, what));  // random bits either way; kept for the one contract
    if (tiled) DI_TRY(lay.to_tiles(b, I, d, what));
    p = lay.ptrs(b.as<uint8_t>());
    return b;
  }

 private:
  uint64_t s_;
};

// tid2eid [vocab, k]: k distinct experts of [0, E) per token id.
std::vector<int32_t> hash_table(int64_t vocab, int64_t E, int64_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(vocab * k)), ids(static_cast<size_t>(E));
  for (int64_t i = 0; i < E; ++i) ids[i] = static_cast<int32_t>(i);
  for (int64_t v = 0; v < vocab; ++v) {
    for (int64_t j = 0; j < k; ++j) {  // partial Fisher-Yates: the first k are distinct
      const int64_t r = j + static_cast<int64_t>(rng() % static_cast<uint64_t>(E - j));
      std::swap(ids[j], ids[r]);
      t[v * k + j] = ids[j];
    }
  }
  return t;
}

Result<GpuLayer> synthetic_layer(Gen& g, const v4::V4Config& c, int64_t l) {
  const int64_t d = c.hidden, H = c.num_heads, D = c.head_dim, E = c.n_routed_experts, I = c.moe_inter;
  const std::string p = "layers." + std::to_string(l);
  GpuLayer L;
  L.kind = c.attn_kinds[l], L.ratio = c.ratios[l], L.hash = c.hash_moe[l];
  DI_ASSIGN_OR_RETURN(L.hc_attn, g.hc(c.hc_mult, d, p + ".hc_attn"));
  DI_ASSIGN_OR_RETURN(L.hc_ffn, g.hc(c.hc_mult, d, p + ".hc_ffn"));
  DI_ASSIGN_OR_RETURN(L.attn_norm, g.f32(d, 1.f, p + ".attn_norm"));
  DI_ASSIGN_OR_RETURN(L.ffn_norm, g.f32(d, 1.f, p + ".ffn_norm"));
  DI_ASSIGN_OR_RETURN(L.q_norm, g.f32(c.q_lora_rank, 1.f, p + ".q_norm"));
  DI_ASSIGN_OR_RETURN(L.kv_norm, g.f32(D, 1.f, p + ".kv_norm"));
  DI_ASSIGN_OR_RETURN(L.sinks, g.f32(H, 1.f, p + ".attn_sink"));
  DI_ASSIGN_OR_RETURN(L.inv_freq, rope_inv_freq(L.kind, c));
  DI_ASSIGN_OR_RETURN(L.wq_a, g.fp8(c.q_lora_rank, d, p + ".wq_a"));
  DI_ASSIGN_OR_RETURN(L.wq_b, g.fp8(H * D, c.q_lora_rank, p + ".wq_b"));
  DI_ASSIGN_OR_RETURN(L.wkv, g.fp8(D, d, p + ".wkv"));
  DI_ASSIGN_OR_RETURN(L.wo_a, g.fp8(c.o_groups * c.o_lora_rank, H * D / c.o_groups, p + ".wo_a"));
  DI_ASSIGN_OR_RETURN(L.wo_b, g.fp8(d, c.o_groups * c.o_lora_rank, p + ".wo_b"));
  if (L.kind != v4::AttnKind::kSliding) {
    L.has_compressor = true;
    DI_ASSIGN_OR_RETURN(L.cmp, g.compressor(L.ratio, D, L.kind == v4::AttnKind::kCsa, d, p + ".compressor"));
  }
  if (L.kind == v4::AttnKind::kCsa) {
    L.has_indexer = true;
    DI_ASSIGN_OR_RETURN(L.icmp, g.compressor(L.ratio, c.index_head_dim, true, d, p + ".indexer.compressor"));
    DI_ASSIGN_OR_RETURN(L.idx_wq_b, g.fp8(c.index_n_heads * c.index_head_dim, c.q_lora_rank, p + ".indexer.wq_b"));
    DI_ASSIGN_OR_RETURN(L.weights_proj, g.bf16(c.index_n_heads, d, 0.02f, p + ".indexer.weights_proj"));
  }
  DI_ASSIGN_OR_RETURN(L.gate, g.rnd(E * d, RandomKind::kBf16, 0.03f, 0.f, p + ".gate"));
  if (L.hash) {
    DI_ASSIGN_OR_RETURN(L.bias, DeviceBuffer::zeros(static_cast<size_t>(E) * 4, p + ".gate.bias"));
    const std::vector<int32_t> t = hash_table(c.vocab_size, E, c.experts_per_tok, g.next());
    DI_ASSIGN_OR_RETURN(L.tid2eid, DeviceBuffer::upload(t, p + ".gate.tid2eid"));
  } else {
    DI_ASSIGN_OR_RETURN(L.bias, g.f32(E, 0.1f, p + ".gate.bias"));
  }
  std::vector<cuda::ExpertPtrs> ptrs(static_cast<size_t>(E));
  L.experts_tiled = experts_tileable(I, d);
  for (int64_t e = 0; e < E; ++e) {
    DI_ASSIGN_OR_RETURN(DeviceBuffer blob,
                        g.expert(I, d, L.experts_tiled, ptrs[e], p + ".experts." + std::to_string(e)));
    L.experts.push_back(std::move(blob));
  }
  DI_ASSIGN_OR_RETURN(L.expert_ptrs, DeviceBuffer::upload(ptrs, "expert pointers"));
  DI_ASSIGN_OR_RETURN(L.experts_foldable, experts_scales_foldable(ptrs, I, d));
  DI_ASSIGN_OR_RETURN(L.experts_fp8_foldable, experts_scales_foldable(ptrs, I, d, true));
  {
    DI_ASSIGN_OR_RETURN(GpuLinear w1, g.fp8(I, d, p + ".shared_experts.w1"));
    DI_ASSIGN_OR_RETURN(L.sh_w2, g.fp8(d, I, p + ".shared_experts.w2"));
    DI_ASSIGN_OR_RETURN(GpuLinear w3, g.fp8(I, d, p + ".shared_experts.w3"));
    DI_ASSIGN_OR_RETURN(L.sh_w13, concat_rows(w1, w3, p + ".shared_experts.w1 + w3"));
  }
  return L;
}

}  // namespace

Result<GpuWeights> GpuWeights::synthetic(const v4::V4Config& c, uint64_t seed) {
  DI_TRY(check_gpu_config(c));
  if (static_cast<int64_t>(c.attn_kinds.size()) != c.num_layers || static_cast<int64_t>(c.hash_moe.size()) != c.num_layers)
    return Status::invalid_argument("synthetic weights: the config's layer schedule has the wrong length");
  const int64_t d = c.hidden, n = c.hc_mult;
  Gen g(seed);
  GpuWeights w;
  DI_ASSIGN_OR_RETURN(w.embed, g.rnd(c.vocab_size * d, RandomKind::kBf16, 1.f, 0.f, "embed"));
  DI_ASSIGN_OR_RETURN(w.head, g.bf16(c.vocab_size, d, 0.02f, "head"));
  DI_ASSIGN_OR_RETURN(w.norm, g.f32(d, 1.f, "norm"));
  DI_ASSIGN_OR_RETURN(w.hc_head, hc_head_site(n, n * d));
  DI_TRY(g.fill(w.hc_head.fn.get(), n * n * d, RandomKind::kF32, 0.01f, 0.f, "hc_head_fn"));
  DI_TRY(g.fill(w.hc_head.base.get(), n, RandomKind::kF32, 0.5f, 0.f, "hc_head_base"));
  DI_TRY(g.fill(w.hc_head.scale.get(), 1, RandomKind::kF32, 1.f, 0.f, "hc_head_scale"));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    DI_ASSIGN_OR_RETURN(GpuLayer L, synthetic_layer(g, c, l));
    w.layers.push_back(std::move(L));
  }
  if (!cuda::synchronize()) return device_error("synthetic weight generation");
  w.bytes = total_bytes(w);
  return w;
}

}  // namespace deepinfer::v4gpu
