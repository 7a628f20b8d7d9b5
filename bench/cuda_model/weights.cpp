#include "weights.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "backend/cuda/model_ops.h"

namespace deepinfer::bench {
namespace {

constexpr size_t kW13 = size_t(kInter) * kD / 2, kS13 = size_t(kInter) * kD / 32;
constexpr size_t kW2 = size_t(kD) * kInter / 2, kS2 = size_t(kD) * kInter / 32;
constexpr size_t kExpertBlob = 2 * (kW13 + kS13) + kW2 + kS2;

struct Gen {
  Arena& a;
  cudaStream_t s;
  SeedSeq& seed;
  template <class T>
  T* rnd(int64_t count, dc::RandomKind k, float lo, float hi = 0.f) {
    const size_t es = (k == dc::RandomKind::kBf16) ? 2 : (k == dc::RandomKind::kF32) ? 4 : 1;
    T* p = static_cast<T*>(a.alloc(size_t(count) * es));
    DI_OK(dc::fill_random(p, count, k, lo, hi, seed(), s));
    return p;
  }
  float* f32(int64_t n, float amp) { return rnd<float>(n, dc::RandomKind::kF32, amp); }
  Fp8Lin fp8(int64_t n, int64_t k) {
    Fp8Lin f;
    f.w.data = rnd<uint8_t>(n * k, dc::RandomKind::kE4M3, 1.f);
    f.w.scale = rnd<uint8_t>((n / 128) * (k / 128), dc::RandomKind::kE8M0, 120, 122);
    f.w.n = n, f.w.k = k;
    f.bytes = double(n) * k + double(n / 128) * (k / 128);
    f.sf32 = a.take<float>((n / 128) * (k / 128));
    DI_OK(dc::fp8_scales_to_f32(f.w, f.sf32, s));
    return f;
  }
  Bf16Lin bf16(int64_t n, int64_t k, float amp) {
    return {rnd<uint16_t>(n * k, dc::RandomKind::kBf16, amp), n, k};
  }
  HcW hc() { return {f32(24 * kHc * kD, 0.01f), f32(24, 0.5f), f32(3, 1.f)}; }
  CompressorW compressor(int ratio, int width, bool overlap) {
    CompressorW c;
    c.ratio = ratio, c.width = width, c.overlap = overlap;
    c.wkv = bf16(c.cw(), kD, 0.02f);
    c.wgate = bf16(c.cw(), kD, 0.02f);
    c.ape = f32(int64_t(ratio) * c.cw(), 0.1f);
    c.norm = f32(width, 1.f);
    return c;
  }
};

/// Fills one MXFP4 expert blob (w1 | s1 | w3 | s3 | w2 | s2) and returns its pointers.
dc::ExpertPtrs fill_expert(uint8_t* b, cudaStream_t s, SeedSeq& seed) {
  uint8_t* c = b + 2 * (kW13 + kS13);
  DI_OK(dc::fill_random(b, kW13, dc::RandomKind::kE2M1, 0, 0, seed(), s));
  DI_OK(dc::fill_random(b + kW13, kS13, dc::RandomKind::kE8M0, 118, 120, seed(), s));
  DI_OK(dc::fill_random(b + kW13 + kS13, kW13, dc::RandomKind::kE2M1, 0, 0, seed(), s));
  DI_OK(dc::fill_random(b + 2 * kW13 + kS13, kS13, dc::RandomKind::kE8M0, 118, 120, seed(), s));
  DI_OK(dc::fill_random(c, kW2, dc::RandomKind::kE2M1, 0, 0, seed(), s));
  DI_OK(dc::fill_random(c + kW2, kS2, dc::RandomKind::kE8M0, 118, 120, seed(), s));
  return {b, b + kW13, b + kW13 + kS13, b + 2 * kW13 + kS13, c, c + kW2};
}

/// tid2eid with k distinct experts per token id, uniform over [0, E).
std::vector<int32_t> hash_table(int E, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(size_t(kVocab) * kTopK);
  std::vector<int32_t> ids(E);
  for (int i = 0; i < E; ++i) ids[i] = i;
  for (int v = 0; v < kVocab; ++v) {
    for (int j = 0; j < kTopK; ++j) {  // partial Fisher-Yates: the first k are distinct
      const int r = j + int(rng() % uint64_t(E - j));
      std::swap(ids[j], ids[r]);
      t[size_t(v) * kTopK + j] = ids[j];
    }
  }
  return t;
}

Fp8Lin fp8_view(uint8_t* data, float* sf32, int64_t n, int64_t k) {
  Fp8Lin f;
  f.w.data = data, f.w.scale = nullptr, f.w.n = n, f.w.k = k;
  f.sf32 = sf32;
  f.bytes = double(n) * k + double(n / 128) * (k / 128) * 4;
  return f;
}

}  // namespace

Fp8Lin Fp8Lin::rows(int64_t r0, int64_t n) const {
  Fp8Lin v = *this;
  v.w.data = w.data + r0 * w.k;
  if (w.scale) v.w.scale = static_cast<const uint8_t*>(w.scale) + (r0 / 128) * (w.k / 128);
  v.sf32 = sf32 + (r0 / 128) * (w.k / 128);
  v.w.n = n;
  v.bytes = bytes * double(n) / double(w.n);
  return v;
}

double mxfp4_expert_bytes() { return double(kExpertBlob); }

double layer_weight_bytes(int l, int experts, bool prefill) {
  const double d = kD;
  double b = 0;
  b += d * kQLora + double(kQLora) * kHeads * kHeadDim + d * kHeadDim;  // wq_a, wq_b, wkv
  b += double(kOGroups) * kORank * kHeads * kHeadDim / kOGroups + d * kOGroups * kORank;  // wo_a, wo_b
  b += 3.0 * d * kInter;                                                                  // shared expert
  b += 2.0 * 24 * kHc * d * 4 + double(experts) * d * 2;                                  // mHC fn, router
  const int r = compress_ratio(l);
  if (r > 0) b += 2.0 * (r == 4 ? 2 : 1) * kHeadDim * d * 2;             // compressor wkv, wgate
  if (r == 4) b += 2.0 * 2 * kIdxDim * d * 2 + double(kIdxHeads) * kIdxDim * kQLora + kIdxHeads * d * 2;
  b += experts * (prefill ? 3.0 * d * kInter * 1.0 + 1536 * 4 : mxfp4_expert_bytes());
  return b * 1.01;  // scales, norms, ape, sinks
}

std::vector<float> rope_inv_freq(int ratio) {
  const double base = ratio > 0 ? 160000.0 : 10000.0;
  std::vector<float> f(kRope / 2);
  for (int i = 0; i < kRope / 2; ++i) f[i] = float(std::pow(base, -2.0 * i / kRope));
  if (ratio > 0) {  // YaRN blend (factor 16, original 65536, beta_fast 32, beta_slow 1)
    const double pi = 3.14159265358979323846;
    auto c = [&](double R) { return kRope * std::log(65536.0 / (2 * pi * R)) / (2 * std::log(base)); };
    const double low = std::clamp(std::floor(c(32)), 0.0, double(kRope - 1));
    const double high = std::clamp(std::ceil(c(1)), 0.0, double(kRope - 1));
    for (int i = 0; i < kRope / 2; ++i) {
      const double ramp = std::clamp((i - low) / std::max(high - low, 1e-3), 0.0, 1.0);
      f[i] = float(f[i] * (1 - ramp) + f[i] / 16.0 * ramp);
    }
  }
  return f;
}

void build_model(Model& m, cudaStream_t s) {
  SeedSeq seed;
  Gen g{m.arena, s, seed};
  const int E = m.spec.experts;
  m.embed = g.rnd<uint16_t>(int64_t(kVocab) * kD, dc::RandomKind::kBf16, 1.f);
  m.head = g.rnd<uint16_t>(int64_t(kVocab) * kD, dc::RandomKind::kBf16, 0.02f);
  m.norm = g.f32(kD, 1.f);
  m.hc_head = g.hc();
  m.head_bytes = double(kVocab) * kD * 2 + 4.0 * kHc * kD * 4;
  float* freq[2] = {m.arena.upload(rope_inv_freq(0)), m.arena.upload(rope_inv_freq(4))};
  int32_t* tid2eid = nullptr;
  uint8_t* scratch = nullptr;  // prefill: one layer of MXFP4 experts, re-blocked to FP8
  if (m.spec.prefill) scratch = m.arena.take<uint8_t>(int64_t(kExpertBlob) * E);
  for (int l = 0; l < m.spec.layers; ++l) {
    LayerW L;
    L.ratio = compress_ratio(l);
    L.hash = l < kHashLayers;
    L.inv_freq = freq[L.ratio > 0 ? 1 : 0];
    L.hc_attn = g.hc(), L.hc_ffn = g.hc();
    L.attn_norm = g.f32(kD, 1.f), L.ffn_norm = g.f32(kD, 1.f);
    L.q_norm = g.f32(kQLora, 1.f), L.kv_norm = g.f32(kHeadDim, 1.f), L.sink = g.f32(kHeads, 1.f);
    L.wq_a = g.fp8(kQLora, kD);
    L.wq_b = g.fp8(int64_t(kHeads) * kHeadDim, kQLora);
    L.wkv = g.fp8(kHeadDim, kD);
    L.wo_a = g.fp8(int64_t(kOGroups) * kORank, int64_t(kHeads) * kHeadDim / kOGroups);
    L.wo_b = g.fp8(kD, int64_t(kOGroups) * kORank);
    L.sh13 = g.fp8(2 * kInter, kD);
    L.sh2 = g.fp8(kD, kInter);
    for (const Fp8Lin* f : {&L.wq_a, &L.wq_b, &L.wkv, &L.wo_a, &L.wo_b, &L.sh13, &L.sh2}) L.dense_bytes += f->bytes;
    if (L.ratio > 0) {
      L.cmp = g.compressor(L.ratio, kHeadDim, L.ratio == 4);
      L.dense_bytes += L.cmp.wkv.bytes() + L.cmp.wgate.bytes();
    }
    if (L.ratio == 4) {
      L.icmp = g.compressor(4, kIdxDim, true);
      L.idx_wq_b = g.fp8(int64_t(kIdxHeads) * kIdxDim, kQLora);
      L.weights_proj = g.bf16(kIdxHeads, kD, 0.02f);
      L.dense_bytes += L.icmp.wkv.bytes() + L.icmp.wgate.bytes() + L.idx_wq_b.bytes + L.weights_proj.bytes();
    }
    L.gate = g.rnd<uint16_t>(int64_t(E) * kD, dc::RandomKind::kBf16, 0.03f);
    L.bias = g.f32(E, 0.1f);
    L.dense_bytes += double(E) * kD * 2 + 2.0 * 24 * kHc * kD * 4;
    if (L.hash) {
      if (!tid2eid) tid2eid = m.arena.upload(hash_table(E, 7));  // one table: the layers share the id->experts map
      L.tid2eid = tid2eid;
    }
    if (!m.spec.prefill) {
      uint8_t* blob = m.arena.take<uint8_t>(int64_t(kExpertBlob) * E);
      std::vector<dc::ExpertPtrs> hp(E);
      for (int e = 0; e < E; ++e) hp[e] = fill_expert(blob + kExpertBlob * e, s, seed);
      L.ptrs = m.arena.upload(hp);
    } else {
      const int64_t n13 = int64_t(2) * kInter * kD, s13 = (2 * kInter / 128) * (kD / 128);
      const int64_t n2 = int64_t(kD) * kInter, s2 = (kD / 128) * (kInter / 128);
      uint8_t* w = m.arena.take<uint8_t>((n13 + n2) * E);
      float* sc = m.arena.take<float>((s13 + s2) * E);
      for (int e = 0; e < E; ++e) {
        const dc::ExpertPtrs p = fill_expert(scratch + kExpertBlob * e, s, seed);
        uint8_t* w13 = w + (n13 + n2) * e;
        float* sc13 = sc + (s13 + s2) * e;
        const int64_t half = int64_t(kInter) * kD, shalf = (kInter / 128) * (kD / 128);
        DI_OK(dc::mxfp4_to_fp8_blocks(p.w1, p.s1, kInter, kD, w13, sc13, s));
        DI_OK(dc::mxfp4_to_fp8_blocks(p.w3, p.s3, kInter, kD, w13 + half, sc13 + shalf, s));
        DI_OK(dc::mxfp4_to_fp8_blocks(p.w2, p.s2, kD, kInter, w13 + n13, sc13 + s13, s));
        L.fp8_experts.push_back({fp8_view(w13, sc13, 2 * kInter, kD), fp8_view(w13 + n13, sc13 + s13, kD, kInter)});
      }
      DI_CK(cudaStreamSynchronize(s));  // the scratch is refilled by the next layer
    }
    m.dense_bytes += L.dense_bytes;
    m.layers.push_back(std::move(L));
  }
  DI_CK(cudaStreamSynchronize(s));
}

}  // namespace deepinfer::bench
