// Parity of the cuBLASLt block-scaled FP8 GEMM and of the V4 decode attention kernel.
// Tolerances (relative L2 error ||gpu - ref|| / ||ref||):
//   fp8_linear_lt vs the CPU backend on the same FP8-quantised activation: fp32 out 1e-3, bf16 out
//     4e-3 (bf16 rounding of y); the scale layouts are probed when the first check fails;
//   decode_attention vs a float64 reference on the same bf16 q / K rows: 1e-2 (bf16 P before PV
//     and the bf16 output; measured values are printed); every output element written (poisoned
//     first); a sequence's output bitwise equal alone and in a batch of 8.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "backend/backend.h"
#include "cuda_test_util.h"

namespace deepinfer {
namespace {

using namespace cudatest;

// ---------------- FP8 block-scaled GEMM through cuBLASLt ----------------

struct LtCase {
  const char* name;
  int64_t n, k;
  std::vector<int64_t> ms;
};

TEST(CudaLt, Fp8BlockScaledMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  ThreadPool pool(0);
  CpuOps cpu(pool);
  std::mt19937 rng(11);
  const LtCase cases[] = {{"wo_b", 4096, 8192, {1, 64, 200}}, {"expert", 2048, 4096, {64, 512}}};
  Dev ws(dc::fp8_linear_lt_workspace_bytes());
  for (const auto& c : cases) {
    const Weight w = make_fp8_weight(c.n, c.k, rng);
    Dev dw(w.data.data(), w.data.nbytes()), dsc(w.scale.data(), w.scale.nbytes());
    Dev dsf((c.n / 128) * (c.k / 128) * 4);
    ASSERT_TRUE(dc::fp8_scales_to_f32({dw.as<uint8_t>(), dsc.p, false, c.n, c.k}, dsf.as<float>()));
    const dc::Fp8Weight gw{dw.as<uint8_t>(), dsf.p, true, c.n, c.k};
    for (int64_t M : c.ms) {
      auto x = randn(M * c.k, rng);
      std::vector<uint8_t> hq;
      std::vector<float> hs;
      host_quant(x, M, c.k, hq, hs);
      std::vector<float> xdq(M * c.k), ref(M * c.n);
      for (int64_t i = 0; i < M * c.k; ++i) xdq[i] = e4m3_to_f32(hq[i]) * hs[i / 128];
      cpu.linear(xdq.data(), M, w, ref.data());
      Dev dx(x.data(), x.size() * 4), dq(M * c.k), ds(M * c.k / 128 * 4);
      ASSERT_TRUE(dc::quantize_act_fp8_t(dx.p, false, M, c.k, dq.as<uint8_t>(), ds.as<float>()));
      ASSERT_TRUE(dc::synchronize());
      {  // the transposed-scale quantisation equals the host one
        auto q = download<uint8_t>(dq, M * c.k);
        auto st = download<float>(ds, M * c.k / 128);
        int bad = 0;
        for (int64_t r = 0; r < M; ++r)
          for (int64_t kb = 0; kb < c.k / 128; ++kb) bad += st[kb * M + r] != hs[r * (c.k / 128) + kb];
        EXPECT_EQ(bad, 0);
        EXPECT_EQ(0, std::memcmp(q.data(), hq.data(), q.size()));
      }
      for (bool bf16 : {false, true}) {
        Dev dy(M * c.n * 4);
        std::vector<uint8_t> poison(M * c.n * 4, 0xff);
        ASSERT_TRUE(dc::copy_to_device(dy.p, poison.data(), poison.size()));
        const bool ok = dc::fp8_linear_lt(dq.as<uint8_t>(), ds.as<float>(), M, gw, dy.p, bf16, ws.p);
        if (!ok && M < 16) {
          std::printf("lt %-6s M=%-4lld %s: not supported here (%s)\n", c.name, (long long)M, bf16 ? "bf16" : "f32",
                      dc::last_error().c_str());
          continue;
        }
        ASSERT_TRUE(ok) << dc::last_error();
        ASSERT_TRUE(dc::synchronize()) << dc::last_error();
        std::vector<float> y(M * c.n);
        if (bf16) {
          auto yb = download<uint16_t>(dy, M * c.n);
          for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_f32(yb[i]);
        } else {
          y = download<float>(dy, M * c.n);
        }
        const double e = rel_l2(y, ref);
        std::printf("lt %-6s %lldx%lld M=%-4lld %s rel_l2 vs cpu(same q) %.2e\n", c.name, (long long)c.n,
                    (long long)c.k, (long long)M, bf16 ? "bf16" : "f32 ", e);
        EXPECT_LT(e, bf16 ? 4e-3 : 1e-3) << c.name << " M=" << M;
        if (e > 1e-2 && !bf16) {  // probe the other scale layouts so the next run knows which is meant
          const int64_t nb = c.n / 128, kb = c.k / 128;
          auto sc = w.scale.span<uint8_t>();
          std::vector<float> sw(nb * kb), swt(nb * kb), sxt(hs.size());
          for (int64_t i = 0; i < nb; ++i)
            for (int64_t j = 0; j < kb; ++j)
              sw[i * kb + j] = swt[j * nb + i] = std::ldexp(1.f, int(sc[i * kb + j]) - 127);
          for (int64_t r = 0; r < M; ++r)
            for (int64_t j = 0; j < kb; ++j) sxt[j * M + r] = hs[r * kb + j];
          Dev wrow(sw.data(), sw.size() * 4), wcol(swt.data(), swt.size() * 4);
          Dev xrow(hs.data(), hs.size() * 4), xcol(sxt.data(), sxt.size() * 4);
          for (int v = 0; v < 4; ++v) {
            const dc::Fp8Weight gv{dw.as<uint8_t>(), (v & 1) ? wcol.p : wrow.p, true, c.n, c.k};
            if (!dc::fp8_linear_lt(dq.as<uint8_t>(), ((v & 2) ? xrow : xcol).as<float>(), M, gv, dy.p, false, ws.p))
              continue;
            ASSERT_TRUE(dc::synchronize());
            std::printf("  probe: weight scales %s, act scales %s: rel_l2 %.2e\n",
                        (v & 1) ? "[K/128][N/128]" : "[N/128][K/128]", (v & 2) ? "[M][K/128]" : "[K/128][M]",
                        rel_l2(download<float>(dy, M * c.n), ref));
          }
        }
      }
    }
  }
}

// ---------------- V4 decode attention ----------------

constexpr int kD = 512, kH = 64, kRing = 128;

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
  return b;
}

std::vector<float> inv_freq_table() {
  std::vector<float> f(32);
  for (int i = 0; i < 32; ++i) f[i] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / 64.0));
  return f;
}

struct AttnBatch {
  int B = 0, E = 0, stride = 0;
  std::vector<uint16_t> q, ring, entries;
  std::vector<int32_t> nw, ni, idx, pos;
  std::vector<float> sink;
};

AttnBatch make_batch(const std::vector<std::pair<int, int>>& rows, int E, std::mt19937& rng, float qscale) {
  AttnBatch a;
  a.B = static_cast<int>(rows.size());
  a.E = E;
  for (auto& r : rows) a.stride = std::max(a.stride, r.second);
  a.stride = std::max(a.stride, 1);
  a.q = to_bf16(randn(size_t(a.B) * kH * kD, rng, qscale));
  a.ring = to_bf16(randn(size_t(a.B) * kRing * kD, rng));
  a.entries = to_bf16(randn(size_t(E) * kD, rng));
  a.sink = randn(kH, rng);
  a.idx.assign(size_t(a.B) * a.stride, -7);
  std::uniform_int_distribution<int> pick(0, E - 1), pct(0, 99), posd(0, 1 << 20);
  for (int b = 0; b < a.B; ++b) {
    a.nw.push_back(rows[b].first);
    a.ni.push_back(rows[b].second);
    a.pos.push_back(posd(rng));
    for (int j = 0; j < rows[b].second; ++j) a.idx[size_t(b) * a.stride + j] = pct(rng) < 5 ? -1 : pick(rng);
  }
  return a;
}

// float64 reference of one sequence (attention.cpp's loop, on the bf16 inputs).
void ref_attention(const AttnBatch& a, int b, const std::vector<float>& inv_freq, float* out) {
  std::vector<const uint16_t*> rows;
  for (int s = 0; s < a.nw[b]; ++s) rows.push_back(&a.ring[(size_t(b) * kRing + s) * kD]);
  for (int j = 0; j < a.ni[b]; ++j) {
    const int e = a.idx[size_t(b) * a.stride + j];
    if (e >= 0) rows.push_back(&a.entries[size_t(e) * kD]);
  }
  std::vector<double> lg(rows.size()), o(kD);
  for (int h = 0; h < kH; ++h) {
    const uint16_t* q = &a.q[(size_t(b) * kH + h) * kD];
    double mx = a.sink[h];
    for (size_t r = 0; r < rows.size(); ++r) {
      double d = 0;
      for (int k = 0; k < kD; ++k) d += double(bf16_to_f32(q[k])) * bf16_to_f32(rows[r][k]);
      lg[r] = d / std::sqrt(double(kD));
      mx = std::max(mx, lg[r]);
    }
    double sum = std::exp(a.sink[h] - mx);
    for (auto& v : lg) sum += (v = std::exp(v - mx));
    std::fill(o.begin(), o.end(), 0.0);
    for (size_t r = 0; r < rows.size(); ++r)
      for (int k = 0; k < kD; ++k) o[k] += lg[r] / sum * bf16_to_f32(rows[r][k]);
    for (int i = 0; i < 32; ++i) {  // Rope::apply(inverse = true) on dims 448..511
      const float ang = static_cast<float>(a.pos[b]) * inv_freq[i];
      const double c = std::cos(ang), s = -std::sin(ang);
      const double x = o[448 + 2 * i], y = o[449 + 2 * i];
      o[448 + 2 * i] = x * c - y * s;
      o[449 + 2 * i] = y * c + x * s;
    }
    for (int k = 0; k < kD; ++k) out[h * kD + k] = static_cast<float>(o[k]);
  }
}

struct AttnDev {
  Dev q, ring, entries, idx, nw, ni, pos, sink, freq, out;
  AttnDev(const AttnBatch& a, const std::vector<float>& f)
      : q(a.q.data(), a.q.size() * 2),
        ring(a.ring.data(), a.ring.size() * 2),
        entries(a.entries.data(), a.entries.size() * 2),
        idx(a.idx.data(), a.idx.size() * 4),
        nw(a.nw.data(), a.nw.size() * 4),
        ni(a.ni.data(), a.ni.size() * 4),
        pos(a.pos.data(), a.pos.size() * 4),
        sink(a.sink.data(), a.sink.size() * 4),
        freq(f.data(), f.size() * 4),
        out(size_t(a.B) * kH * kD * 2) {}
};

// Runs the kernel (output poisoned first) and returns the bf16 output.
std::vector<uint16_t> run_attention(const AttnBatch& a, AttnDev& d, int split_rows) {
  dc::DecodeAttnArgs args;
  args.q = d.q.as<uint16_t>();
  args.window = d.ring.as<uint16_t>();
  args.n_window = d.nw.as<int32_t>();
  args.entries = d.entries.as<uint16_t>();
  args.index = d.idx.as<int32_t>();
  args.n_index = d.ni.as<int32_t>();
  args.index_stride = a.stride;
  args.sink = d.sink.as<float>();
  args.pos = d.pos.as<int32_t>();
  args.inv_freq = d.freq.as<float>();
  args.out = d.out.as<uint16_t>();
  args.batch = a.B;
  args.max_rows = kRing + a.stride;
  args.split_rows = split_rows;
  std::vector<uint16_t> poison(size_t(a.B) * kH * kD, 0xffff);
  EXPECT_TRUE(dc::copy_to_device(d.out.p, poison.data(), poison.size() * 2));
  Dev ws(dc::decode_attention_workspace_bytes(args));
  EXPECT_TRUE(dc::decode_attention(args, ws.p)) << dc::last_error();
  EXPECT_TRUE(dc::synchronize()) << dc::last_error();
  return download<uint16_t>(d.out, poison.size());
}

TEST(CudaAttention, DecodeMatchesReference) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(21);
  const auto freq = inv_freq_table();
  // (window rows, compressed rows): short sequence, full CSA (128 + 512), partial CSA, HCA-like long list.
  const std::vector<std::pair<int, int>> rows = {{5, 0}, {128, 512}, {128, 300}, {77, 1000}, {128, 0}};
  for (float qscale : {1.f, 4.f}) {
    const AttnBatch a = make_batch(rows, 1500, rng, qscale);
    AttnDev d(a, freq);
    std::vector<float> ref(size_t(a.B) * kH * kD);
    for (int b = 0; b < a.B; ++b) ref_attention(a, b, freq, ref.data() + size_t(b) * kH * kD);
    for (int split : {64, 256, 512, 1024}) {
      const auto out = run_attention(a, d, split);
      std::vector<float> y(out.size());
      for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_f32(out[i]);
      for (int b = 0; b < a.B; ++b) {
        std::vector<float> yb(y.begin() + size_t(b) * kH * kD, y.begin() + size_t(b + 1) * kH * kD);
        std::vector<float> rb(ref.begin() + size_t(b) * kH * kD, ref.begin() + size_t(b + 1) * kH * kD);
        const double e = rel_l2(yb, rb);
        std::printf("attn qscale=%.0f split=%-4d seq %d (%3d win + %4d cmp) rel_l2 %.2e\n", qscale, split, b,
                    rows[b].first, rows[b].second, e);
        EXPECT_LT(e, 1e-2) << "split " << split << " seq " << b;
      }
    }
  }
}

TEST(CudaAttention, BatchInvariant) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(22);
  const auto freq = inv_freq_table();
  std::vector<std::pair<int, int>> rows = {{128, 512}};
  const AttnBatch one = make_batch(rows, 2048, rng, 2.f);
  for (int i = 0; i < 7; ++i) rows.push_back({128 - 9 * i, 60 * i});
  AttnBatch many = make_batch(rows, 2048, rng, 2.f);
  // sequence 0 of `many` = the single sequence (same q, ring, entries rows, index list, position)
  std::copy(one.q.begin(), one.q.end(), many.q.begin());
  std::copy(one.ring.begin(), one.ring.end(), many.ring.begin());
  many.entries = one.entries;
  many.sink = one.sink;
  many.pos[0] = one.pos[0];
  for (int j = 0; j < 512; ++j) many.idx[j] = one.idx[j];
  AttnDev d1(one, freq), d8(many, freq);
  for (int split : {128, 512}) {
    const auto o1 = run_attention(one, d1, split);
    const auto o8 = run_attention(many, d8, split);
    EXPECT_EQ(0, std::memcmp(o1.data(), o8.data(), size_t(kH) * kD * 2)) << "split " << split;
  }
}

}  // namespace
}  // namespace deepinfer
