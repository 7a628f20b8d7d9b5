// Parity of the cuBLASLt block-scaled FP8 GEMM and of the V4 decode attention kernel.
// Tolerances (relative L2 error ||gpu - ref|| / ||ref||):
//   fp8_linear_lt vs the CPU backend on the same FP8-quantised activation: fp32 out 1e-3, bf16 out
//     4e-3 (bf16 rounding of y); the scale layouts are probed when the first check fails;
//   decode_attention vs a float64 reference on the same bf16 q / K rows: 1e-2 (bf16 P before PV
//     and the bf16 output; measured values are printed); every output element written (poisoned
//     first); a sequence's output bitwise equal alone and in a batch of 8;
//   prefill mode (window_row0): bitwise equal to the ring mode on the same rows (rings read in
//     position order, wrapped or not), 1e-2 vs the reference, a batch past the 65535 grid rows
//     equal to its slices; the 8192-query speed printed;
//   ring mode with per-sequence pointer tables (window_ptrs, entry_ptrs): bitwise equal to the
//     contiguous ring and shared entries; one split's output independent of split_rows;
//   16 and 64 heads per block (DecodeAttnArgs::heads_per_block): bitwise equal, batch 1 and 5, one
//     split and several.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>

#include <cuda_runtime.h>

#include "backend/backend.h"
#include "backend/cuda/layer_ops.h"
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
      for (int out = 0; out < 3; ++out) {  // fp32, bf16, fp32 on the timed plan (the fastest candidate)
        const bool bf16 = out == 1, timed = out == 2;
        Dev dy(M * c.n * 4);
        std::vector<uint8_t> poison(M * c.n * 4, 0xff);
        ASSERT_TRUE(dc::copy_to_device(dy.p, poison.data(), poison.size()));
        const bool ok = dc::fp8_linear_lt(dq.as<uint8_t>(), ds.as<float>(), M, gw, dy.p, bf16, ws.p, nullptr, timed);
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
                    (long long)c.k, (long long)M, bf16 ? "bf16" : timed ? "f32 timed" : "f32 ", e);
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

// The rings as the kernel reads them: AttnBatch::ring holds sequence b's window rows in position
// order (row j = position pos - nw + 1 + j, the reference's order); a ring holds position p at slot
// p % 128. Slots outside the window hold NaN, so reading one poisons the output.
std::vector<uint16_t> ring_slots(const AttnBatch& a) {
  std::vector<uint16_t> r(a.ring.size(), 0x7fc0);
  for (int b = 0; b < a.B; ++b) {
    const int nw = std::min(a.nw[b], kRing);
    for (int j = 0; j < nw; ++j) {
      const int slot = ((a.pos[b] - nw + 1 + j) % kRing + kRing) % kRing;
      std::copy_n(a.ring.begin() + (size_t(b) * kRing + j) * kD, kD, r.begin() + (size_t(b) * kRing + slot) * kD);
    }
  }
  return r;
}

struct AttnDev {
  std::vector<uint16_t> ring_host;  // ring_slots(a)
  Dev q, ring, entries, idx, nw, ni, pos, sink, freq, out;
  AttnDev(const AttnBatch& a, const std::vector<float>& f)
      : ring_host(ring_slots(a)),
        q(a.q.data(), a.q.size() * 2),
        ring(ring_host.data(), ring_host.size() * 2),
        entries(a.entries.data(), a.entries.size() * 2),
        idx(a.idx.data(), a.idx.size() * 4),
        nw(a.nw.data(), a.nw.size() * 4),
        ni(a.ni.data(), a.ni.size() * 4),
        pos(a.pos.data(), a.pos.size() * 4),
        sink(a.sink.data(), a.sink.size() * 4),
        freq(f.data(), f.size() * 4),
        out(size_t(a.B) * kH * kD * 2) {}
};

// Arguments of the batch (ring mode); with `rows` / `row0`, the window rows come from
// rows[row0[b] + i] (prefill mode) instead of the ring. wgmma: the warpgroup-MMA kernel (in place
// of 64-head blocks, forced here at any launch size).
dc::DecodeAttnArgs attn_args(const AttnBatch& a, AttnDev& d, int split_rows, const Dev* rows = nullptr,
                             const Dev* row0 = nullptr, bool wgmma = false) {
  dc::DecodeAttnArgs args;
  args.wgmma = wgmma;
  if (wgmma) args.heads_per_block = 64;
  args.q = d.q.as<uint16_t>();
  args.window = rows ? rows->as<uint16_t>() : d.ring.as<uint16_t>();
  if (row0) args.window_row0 = row0->as<int64_t>();
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
  return args;
}

// Runs the kernel (output poisoned first) and returns the bf16 output.
std::vector<uint16_t> run_args(const AttnBatch& a, AttnDev& d, const dc::DecodeAttnArgs& args) {
  std::vector<uint16_t> poison(size_t(a.B) * kH * kD, 0xffff);
  EXPECT_TRUE(dc::copy_to_device(d.out.p, poison.data(), poison.size() * 2));
  Dev ws(dc::decode_attention_workspace_bytes(args));
  EXPECT_TRUE(dc::decode_attention(args, ws.p)) << dc::last_error();
  EXPECT_TRUE(dc::synchronize()) << dc::last_error();
  return download<uint16_t>(d.out, poison.size());
}

std::vector<uint16_t> run_attention(const AttnBatch& a, AttnDev& d, int split_rows, const Dev* rows = nullptr,
                                    const Dev* row0 = nullptr, bool wgmma = false) {
  return run_args(a, d, attn_args(a, d, split_rows, rows, row0, wgmma));
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
    for (int split : {64, 256, 512, 1024})
    for (const bool wg : {false, true}) {  // the mma.sync kernel, the warpgroup-MMA one
      const auto out = run_attention(a, d, split, nullptr, nullptr, wg);
      std::vector<float> y(out.size());
      for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_f32(out[i]);
      for (int b = 0; b < a.B; ++b) {
        std::vector<float> yb(y.begin() + size_t(b) * kH * kD, y.begin() + size_t(b + 1) * kH * kD);
        std::vector<float> rb(ref.begin() + size_t(b) * kH * kD, ref.begin() + size_t(b + 1) * kH * kD);
        const double e = rel_l2(yb, rb);
        std::printf("attn%s qscale=%.0f split=%-4d seq %d (%3d win + %4d cmp) rel_l2 %.2e\n", wg ? " wgmma" : "",
                    qscale, split, b, rows[b].first, rows[b].second, e);
        EXPECT_LT(e, 1e-2) << "split " << split << " seq " << b << " wgmma " << wg;
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
  for (int split : {128, 512})
    for (const bool wg : {false, true}) {
      const auto o1 = run_attention(one, d1, split, nullptr, nullptr, wg);
      const auto o8 = run_attention(many, d8, split, nullptr, nullptr, wg);
      EXPECT_EQ(0, std::memcmp(o1.data(), o8.data(), size_t(kH) * kD * 2)) << "split " << split << " wgmma " << wg;
    }
}

// ---------------- prefill mode (window_row0) ----------------

// The default mode's split by batch: the base split for one query, one split for a batch far past
// the GPU's SMs, never more splits than the base's, a multiple of 64 that grows with the batch.
TEST(CudaAttention, DecodeSplitRowsByBatch) {
  SKIP_WITHOUT_DEVICE();
  for (const int rows : {160, 384, 640, 1000}) {
    EXPECT_EQ(256, dc::decode_split_rows(1, rows, 256)) << rows;
    EXPECT_EQ((rows + 63) / 64 * 64 > 256 ? (rows + 63) / 64 * 64 : 256, dc::decode_split_rows(1 << 20, rows, 256))
        << rows;
    int last = 0;
    for (int batch = 1; batch <= 4096; batch *= 2) {
      const int s = dc::decode_split_rows(batch, rows, 256);
      EXPECT_EQ(0, s % 64) << rows << " " << batch;
      EXPECT_GE(s, 256) << rows << " " << batch;
      EXPECT_GE(s, last) << rows << " " << batch;
      EXPECT_LE((rows + s - 1) / s, (rows + 255) / 256) << rows << " " << batch;
      last = s;
    }
  }
  EXPECT_EQ(0, dc::decode_split_rows(8, 640, 0));  // 0: one split a query, as passed
  // The default base: 64 rows while batch x splits of 256 x 4 head blocks stay under a fifth of
  // the SMs (CSA's 640 rows: 3 splits; HCA's 160: 1).
  int sms = 0;
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  EXPECT_EQ(64, dc::decode_base_split(1, 640));
  EXPECT_EQ(256, dc::decode_base_split(sms, 640));
  for (const int batch : {1, 2, 4, 8, 16, 64}) {
    EXPECT_EQ(batch * 3 * 20 < sms ? 64 : 256, dc::decode_base_split(batch, 640)) << batch;
    EXPECT_EQ(batch * 20 < sms ? 64 : 256, dc::decode_base_split(batch, 160)) << batch;
  }
}

// The prefix form (index_is_prefix, no index array: HCA's every visible entry) equals the explicit
// index 0, 1, .., n_index - 1 bit for bit, on both kernels and over one split and several.
TEST(CudaAttention, PrefixIndexEqualsExplicitIndex) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(31);
  const auto freq = inv_freq_table();
  AttnBatch a = make_batch({{128, 300}, {5, 0}, {128, 1}, {77, 64}, {128, 257}}, 512, rng, 2.f);
  for (int b = 0; b < a.B; ++b)
    for (int j = 0; j < a.stride; ++j) a.idx[size_t(b) * a.stride + j] = j < a.ni[b] ? j : -1;
  AttnDev d(a, freq);
  for (int split : {128, 1024})
    for (const bool wg : {false, true}) {
      const auto explicit_rows = run_attention(a, d, split, nullptr, nullptr, wg);
      dc::DecodeAttnArgs args = attn_args(a, d, split, nullptr, nullptr, wg);
      args.index = nullptr, args.index_is_prefix = true, args.index_stride = 0;
      const auto prefix_rows = run_args(a, d, args);
      EXPECT_EQ(-1, first_bit_mismatch(explicit_rows, prefix_rows)) << "split " << split << " wgmma " << wg;
    }
}

// Query b's window = rows row0[b] .. row0[b] + nw[b] - 1 of a chunk of R contiguous rows: the
// output equals the ring mode on the same rows (the ring holding them at slots position % 128)
// bit for bit, and the float64 reference. Positions past the window (the ring has wrapped) and
// before it (a sequence's first 128 tokens, pos = nw - 1); split 1024 is one split for every query.
TEST(CudaAttention, PrefillRowsMatchRingAndReference) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(23);
  const auto freq = inv_freq_table();
  const int B = 150, R = 400, E = 1500;
  std::uniform_int_distribution<int> nwd(1, kRing), nid(0, 600);
  std::vector<std::pair<int, int>> rows;
  for (int b = 0; b < B; ++b) {
    const int nw = b == 0 ? 1 : b % 5 == 1 ? kRing : nwd(rng);
    const int ni = b % 7 == 0 ? 0 : b % 7 == 1 ? 512 : nid(rng);
    rows.push_back({nw, ni});
  }
  AttnBatch a = make_batch(rows, E, rng, 2.f);
  int before = 0, past = 0;
  for (int b = 0; b < B; ++b) {
    if (b % 4 == 3) a.pos[b] = a.nw[b] - 1;
    if (a.pos[b] < kRing && b % 4 != 3) a.pos[b] += kRing;  // past the window unless chosen otherwise
    (a.pos[b] < kRing ? before : past)++;
  }
  ASSERT_GT(before, 0);
  ASSERT_GT(past, 0);
  const auto chunk = to_bf16(randn(size_t(R) * kD, rng));
  std::vector<int64_t> row0(B);
  for (int b = 0; b < B; ++b) {
    row0[b] = std::uniform_int_distribution<int>(0, R - a.nw[b])(rng);
    std::copy(chunk.begin() + row0[b] * kD, chunk.begin() + (row0[b] + a.nw[b]) * kD,
              a.ring.begin() + size_t(b) * kRing * kD);
  }
  AttnDev d(a, freq);
  Dev dchunk(chunk.data(), chunk.size() * 2), drow0(row0.data(), row0.size() * 8);
  constexpr int kRefEvery = 6;  // float64 reference of every 6th query
  std::vector<float> ref(size_t(B) * kH * kD);
  for (int b = 0; b < B; b += kRefEvery) ref_attention(a, b, freq, ref.data() + size_t(b) * kH * kD);
  for (int split : {64, 512, 1024})
  for (const bool wg : {false, true}) {
    const auto ring = run_attention(a, d, split, nullptr, nullptr, wg);
    const auto pre = run_attention(a, d, split, &dchunk, &drow0, wg);
    const int64_t bad = first_bit_mismatch(ring, pre);
    EXPECT_EQ(bad, -1) << "split " << split << ": prefill differs from ring mode first at element " << bad
                       << " (query " << bad / (kH * kD) << ", head " << (bad / kD) % kH << ", dim " << bad % kD << ")";
    double worst = 0;
    for (int b = 0; b < B; b += kRefEvery) {
      std::vector<float> y(size_t(kH) * kD);
      for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_f32(pre[size_t(b) * kH * kD + i]);
      const std::vector<float> rb(ref.begin() + size_t(b) * kH * kD, ref.begin() + size_t(b + 1) * kH * kD);
      const double e = rel_l2(y, rb);
      worst = std::max(worst, e);
      EXPECT_LT(e, 1e-2) << "split " << split << " query " << b << " (" << a.nw[b] << " win + " << a.ni[b] << " cmp)";
    }
    std::printf("prefill%s split=%-4d %d queries: bitwise == ring mode: %s; worst rel_l2 vs reference %.2e\n",
                wg ? " wgmma" : "", split, B, bad < 0 ? "yes" : "NO", worst);
  }
}

// Per-sequence pointer tables (ring mode): query b's ring at window_ptrs[b] and its compressed rows
// at entry_ptrs[b] (separate allocations; window / entries null) give bitwise the output of the
// contiguous [B, 128, 512] ring and shared entries, for several splits. A single split's output does
// not depend on split_rows (two sizes above every query's rows: bitwise equal).
TEST(CudaAttention, RingPointerTablesMatchContiguous) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(26);
  const auto freq = inv_freq_table();
  const std::vector<std::pair<int, int>> rows = {{5, 0}, {128, 512}, {128, 300}, {77, 1000}, {128, 0}, {1, 7}};
  const int E = 1500;
  AttnBatch a = make_batch(rows, E, rng, 2.f);
  a.pos[0] = 4, a.pos[5] = 0, a.pos[2] = 300;  // before the window (not wrapped) and just past it
  AttnDev d(a, freq);
  std::vector<std::unique_ptr<Dev>> rings, ents;
  std::vector<const uint16_t*> ring_ptrs, entry_ptrs;
  for (int b = 0; b < a.B; ++b) {
    rings.push_back(std::make_unique<Dev>(d.ring_host.data() + size_t(b) * kRing * kD, size_t(kRing) * kD * 2));
    ring_ptrs.push_back(rings.back()->as<uint16_t>());
    // sequence b's entries at row offset 3b of its own buffer (rows before: NaN)
    const int off = 3 * b;
    std::vector<uint16_t> e(size_t(E + off) * kD, 0x7fc0);
    std::copy(a.entries.begin(), a.entries.end(), e.begin() + size_t(off) * kD);
    ents.push_back(std::make_unique<Dev>(e.data(), e.size() * 2));
    entry_ptrs.push_back(ents.back()->as<uint16_t>() + size_t(off) * kD);
  }
  Dev dring_ptrs(ring_ptrs.data(), ring_ptrs.size() * sizeof(void*));
  Dev dentry_ptrs(entry_ptrs.data(), entry_ptrs.size() * sizeof(void*));
  std::vector<float> ref(size_t(a.B) * kH * kD);
  for (int b = 0; b < a.B; ++b) ref_attention(a, b, freq, ref.data() + size_t(b) * kH * kD);
  for (int split : {64, 256, 1088}) {
    const auto contiguous = run_attention(a, d, split);
    dc::DecodeAttnArgs args = attn_args(a, d, split);
    args.window = nullptr, args.entries = nullptr;
    args.window_ptrs = dring_ptrs.as<const uint16_t* const>();
    args.entry_ptrs = dentry_ptrs.as<const uint16_t* const>();
    const auto tables = run_args(a, d, args);
    const int64_t bad = first_bit_mismatch(contiguous, tables);
    EXPECT_EQ(bad, -1) << "split " << split << ": pointer tables differ first at element " << bad << " (query "
                       << bad / (kH * kD) << ")";
    std::vector<float> y(tables.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_f32(tables[i]);
    const double e = rel_l2(y, ref);
    EXPECT_LT(e, 1e-2) << "split " << split;
    std::printf("attn pointer tables split=%-4d: bitwise == contiguous ring: %s; rel_l2 vs reference %.2e\n", split,
                bad < 0 ? "yes" : "NO", e);
  }
  const auto one_a = run_attention(a, d, 1088), one_b = run_attention(a, d, 4096);
  EXPECT_EQ(first_bit_mismatch(one_a, one_b), -1) << "one split: the output depends on split_rows";
}

// The two head layouts of the split kernel (16 heads per block, 4 blocks per (split, sequence), for
// small launches; 64 heads, one block) give bitwise the same output, for one split per sequence
// (finished in the split kernel) and several (partials merged by the combine kernel), and the
// layout chosen from the launch size (0) is one of them.
TEST(CudaAttention, HeadsPerBlockBitwise) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(27);
  const auto freq = inv_freq_table();
  const std::vector<std::vector<std::pair<int, int>>> batches = {
      {{128, 512}}, {{5, 0}, {128, 512}, {128, 300}, {77, 1000}, {128, 0}}};
  for (const auto& rows : batches) {
    AttnBatch a = make_batch(rows, 1500, rng, 2.f);
    a.pos[0] = 60;  // ring not wrapped (the others: wrapped)
    AttnDev d(a, freq);
    for (int split : {64, 256, 1024, 2048}) {  // 2048: one split for every sequence
      dc::DecodeAttnArgs args = attn_args(a, d, split);
      args.heads_per_block = 16;
      const auto o16 = run_args(a, d, args);
      args.heads_per_block = 64;
      const auto o64 = run_args(a, d, args);
      args.heads_per_block = 0;
      const auto o_auto = run_args(a, d, args);
      const int64_t bad = first_bit_mismatch(o16, o64);
      EXPECT_EQ(bad, -1) << "batch " << a.B << " split " << split << ": 16 vs 64 heads per block differ first at "
                         << bad << " (query " << bad / (kH * kD) << ", head " << (bad / kD) % kH << ", dim "
                         << bad % kD << ")";
      EXPECT_EQ(first_bit_mismatch(o_auto, o64), -1) << "batch " << a.B << " split " << split << ": automatic layout";
      std::vector<float> y(o16.size());
      for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_f32(o16[i]);
      EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return std::isfinite(v); }))
          << "batch " << a.B << " split " << split << ": an output not written";
      std::printf("attn heads per block batch=%d split=%-4d: 16 bitwise == 64: %s\n", a.B, split,
                  bad < 0 ? "yes" : "NO");
    }
    dc::DecodeAttnArgs bad_args = attn_args(a, d, 2048);  // one split: no workspace needed
    bad_args.heads_per_block = 32;
    EXPECT_FALSE(dc::decode_attention(bad_args, nullptr));
  }
}

// With out_q8 / out_qs, the output also comes quantised (by the merge where one runs, else by
// the quantisation's launch): bitwise quantize_act_fp8 over the same output, which is unchanged;
// over one split and several, both kernels.
TEST(CudaAttention, QuantisedOutputBitwise) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(31);
  const auto freq = inv_freq_table();
  const AttnBatch a = make_batch({{5, 0}, {128, 512}, {128, 300}, {77, 1000}, {128, 0}}, 1500, rng, 2.f);
  AttnDev d(a, freq);
  const size_t n = size_t(a.B) * kH * kD;
  Dev q8(n), qs(n / 128 * 4), rq8(n), rqs(n / 128 * 4);
  for (int split : {64, 256, 2048})  // 2048: one split for every sequence (no merge launched)
    for (const bool wg : {false, true}) {
      dc::DecodeAttnArgs args = attn_args(a, d, split, nullptr, nullptr, wg);
      const auto plain = run_args(a, d, args);
      args.out_q8 = q8.as<uint8_t>(), args.out_qs = qs.as<float>();
      const auto out = run_args(a, d, args);
      EXPECT_EQ(first_bit_mismatch(plain, out), -1) << "split " << split << " wgmma " << wg;
      ASSERT_TRUE(dc::quantize_act_fp8(d.out.p, true, a.B, int64_t(kH) * kD, rq8.as<uint8_t>(), rqs.as<float>()));
      ASSERT_TRUE(dc::synchronize()) << dc::last_error();
      EXPECT_EQ(first_bit_mismatch(download<uint8_t>(q8, n), download<uint8_t>(rq8, n)), -1)
          << "split " << split << " wgmma " << wg;
      EXPECT_EQ(first_bit_mismatch(download<float>(qs, n / 128), download<float>(rqs, n / 128)), -1)
          << "split " << split << " wgmma " << wg;
      std::printf("attn quantised output split=%-4d wgmma=%d: bitwise quantize_act_fp8\n", split, int(wg));
    }
  dc::DecodeAttnArgs half = attn_args(a, d, 256);
  half.out_q8 = q8.as<uint8_t>();  // scales missing
  EXPECT_FALSE(dc::decode_attention(half, nullptr));
}

// Device-side data of a prefill batch: q [B, 64, 512] and chunk rows random on the device, query b's
// window = rows b .. b + nw - 1, `ni` compressed rows from `E` entries each.
struct PrefillDev {
  int64_t B, R, E;
  int ni;
  Dev q, rows, entries, idx, nw, nis, pos, row0, sink, freq, out;
  PrefillDev(int64_t B_, int nw_, int ni_, int64_t E_, std::mt19937& rng)
      : B(B_), R(B_ + nw_ - 1), E(E_), ni(ni_), q(size_t(B) * kH * kD * 2), rows(size_t(R) * kD * 2),
        entries(size_t(E) * kD * 2), idx(size_t(B) * std::max(ni, 1) * 4), nw(size_t(B) * 4), nis(size_t(B) * 4),
        pos(size_t(B) * 4), row0(size_t(B) * 8), sink(kH * 4), freq(32 * 4), out(size_t(B) * kH * kD * 2) {
    EXPECT_TRUE(dc::fill_random(q.p, B * kH * kD, dc::RandomKind::kBf16, 3.f, 0.f, 1));
    EXPECT_TRUE(dc::fill_random(rows.p, R * kD, dc::RandomKind::kBf16, 1.7f, 0.f, 2));
    EXPECT_TRUE(dc::fill_random(entries.p, E * kD, dc::RandomKind::kBf16, 1.7f, 0.f, 3));
    std::vector<int32_t> hidx(size_t(B) * std::max(ni, 1)), hnw(B, nw_), hni(B, ni), hpos(B);
    std::vector<int64_t> hrow0(B);
    std::uniform_int_distribution<int> pick(0, int(E) - 1);
    for (auto& v : hidx) v = pick(rng);
    for (int64_t b = 0; b < B; ++b) hpos[b] = int32_t(b + 4096), hrow0[b] = b;
    const auto hsink = randn(kH, rng);
    const auto f = inv_freq_table();
    EXPECT_TRUE(dc::copy_to_device(idx.p, hidx.data(), hidx.size() * 4));
    EXPECT_TRUE(dc::copy_to_device(nw.p, hnw.data(), hnw.size() * 4));
    EXPECT_TRUE(dc::copy_to_device(nis.p, hni.data(), hni.size() * 4));
    EXPECT_TRUE(dc::copy_to_device(pos.p, hpos.data(), hpos.size() * 4));
    EXPECT_TRUE(dc::copy_to_device(row0.p, hrow0.data(), hrow0.size() * 8));
    EXPECT_TRUE(dc::copy_to_device(sink.p, hsink.data(), hsink.size() * 4));
    EXPECT_TRUE(dc::copy_to_device(freq.p, f.data(), f.size() * 4));
  }
  // Arguments for queries [b0, b0 + n) (pointer offsets into the same buffers).
  dc::DecodeAttnArgs args(int64_t b0, int64_t n, int split_rows) const {
    dc::DecodeAttnArgs a;
    const int64_t stride = std::max(ni, 1);
    a.q = q.as<uint16_t>() + b0 * kH * kD;
    a.window = rows.as<uint16_t>();
    a.window_row0 = row0.as<int64_t>() + b0;
    a.n_window = nw.as<int32_t>() + b0;
    a.entries = entries.as<uint16_t>();
    a.index = idx.as<int32_t>() + b0 * stride;
    a.n_index = nis.as<int32_t>() + b0;
    a.index_stride = stride;
    a.sink = sink.as<float>();
    a.pos = pos.as<int32_t>() + b0;
    a.inv_freq = freq.as<float>();
    a.out = out.as<uint16_t>() + b0 * kH * kD;
    a.batch = static_cast<int32_t>(n);
    a.max_rows = kRing + ni;
    a.split_rows = split_rows;
    return a;
  }
};

// A batch past the 65535 grid rows (launched in slices): queries around and after the slice
// boundary equal the same queries run as a small batch.
TEST(CudaAttention, PrefillBeyondGridLimit) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(24);
  const int64_t B = 65535 + 300, b0 = 65535 - 100, n = 400;
  PrefillDev p(B, kRing, 64, 4096, rng);
  for (const bool wg : {false, true}) {  // each kernel's launch loop
    auto big = p.args(0, B, 256);
    big.wgmma = wg;
    ASSERT_EQ(dc::decode_attention_workspace_bytes(big), 0u);
    ASSERT_TRUE(dc::decode_attention(big, nullptr)) << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const size_t qe = size_t(kH) * kD;
    std::vector<uint16_t> all(size_t(B) * qe);
    ASSERT_TRUE(dc::copy_to_host(all.data(), p.out.p, all.size() * 2));
    std::vector<uint16_t> from_big(all.begin() + b0 * qe, all.begin() + (b0 + n) * qe);
    size_t nonfinite = 0;
    for (auto v : all) nonfinite += !std::isfinite(bf16_to_f32(v));
    std::vector<uint16_t> poison(n * qe, 0xffff);
    ASSERT_TRUE(dc::copy_to_device(p.out.as<uint16_t>() + b0 * qe, poison.data(), poison.size() * 2));
    auto part = p.args(b0, n, 256);
    part.wgmma = wg;
    ASSERT_TRUE(dc::decode_attention(part, nullptr)) << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    std::vector<uint16_t> small(n * qe);
    ASSERT_TRUE(dc::copy_to_host(small.data(), p.out.as<uint16_t>() + b0 * qe, small.size() * 2));
    const int64_t bad = first_bit_mismatch(from_big, small);
    std::printf("prefill%s %lld queries (grid slices of 65535): non-finite outputs %zu; queries %lld..%lld == small "
                "batch: %s\n",
                wg ? " (wgmma)" : "", (long long)B, nonfinite, (long long)b0, (long long)(b0 + n - 1),
                bad < 0 ? "yes" : "NO");
    EXPECT_EQ(nonfinite, 0u);
    EXPECT_EQ(bad, -1) << "first mismatch at query " << b0 + bad / int64_t(qe) << " element " << bad % int64_t(qe);
  }
}

// Speed of a prefill chunk: 8192 queries x (128 window + 512 compressed rows). Printed against
// the tensor-core work (QK^T + PV: T * 64 heads * 640 rows * 512 * 4 flop).
TEST(CudaAttention, PrefillSpeed) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(25);
  const int64_t T = 8192;
  PrefillDev p(T, kRing, 512, 2048, rng);
  const double flop = double(T) * kH * 640 * kD * 4;
  for (int split : {1024, 512})
  for (const bool wg : {false, true}) {
    auto a = p.args(0, T, split);
    a.wgmma = wg;
    Dev ws(dc::decode_attention_workspace_bytes(a));
    ASSERT_TRUE(dc::decode_attention(a, ws.p)) << dc::last_error();  // warm-up
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const int reps = 10;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) ASSERT_TRUE(dc::decode_attention(a, ws.p));
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::vector<uint16_t> o(size_t(64) * kH * kD);  // the first 64 queries must be finite
    ASSERT_TRUE(dc::copy_to_host(o.data(), p.out.p, o.size() * 2));
    size_t nonfinite = 0;
    for (auto v : o) nonfinite += !std::isfinite(bf16_to_f32(v));
    EXPECT_EQ(nonfinite, 0u);
    const double bytes = double(T) * 640 * kD * 2;  // K=V rows each query block reads (L2 or HBM)
    std::printf("prefill speed%s T=%lld 128 win + 512 cmp, split=%d (%s, workspace %.2f GB): %.3f ms, %.1f TFLOP/s, "
                "rows read %.2f GB = %.2f TB/s\n",
                wg ? " (wgmma)" : "", (long long)T, split, split >= 640 ? "1 split" : "2 splits + merge",
                double(dc::decode_attention_workspace_bytes(a)) / 1e9, ms, flop / ms / 1e9, bytes / 1e9,
                bytes / ms / 1e9);
  }
}

}  // namespace
}  // namespace deepinfer
