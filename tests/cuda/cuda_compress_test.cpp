// Parity of the CUDA compressor and lightning indexer (backend/cuda/compress_ops.h) against the
// CPU reference (model/deepseek_v4/compressor.cpp: compressor_push; attention.cpp: the indexer's
// scores and select_top_k) on random inputs.
// Compressor: CSA (ratio 4, overlap) at width 512 and 128, HCA (ratio 128) at width 512; decode
// (1 token per sequence and step, sequences of different lengths leaving the batch) and prefill
// (chunks of 1..300 tokens not aligned to windows); entries (bf16) within 1e-2 relative (+1e-3
// absolute) of the CPU's fp32 entries; the reference rounding modes (1: FP8, 2: Hadamard + FP4)
// may flip a rounding decision where the CPU value sits on a grid boundary: at most 0.2% of the
// values may differ by up to one grid step (25% relative).
// Indexer: n_visible < top_k, == top_k, >> top_k, 0, duplicated keys (exact ties): selected sets
// equal to the CPU's except entries whose CPU score is within 1e-4 relative of the CPU's k-th
// score, or of the scores' rms where the k-th is near 0 (the GPU's q is bf16 hi + lo, ~2^-17
// relative), counted and printed; ascending order, out_base offsets, n_index, -1 padding exact.
// Per-sequence pointer tables (CompressorStepArgs::seq, IndexerArgs::key_ptrs): bitwise equal to
// the slot layout / shared key buffer (entries, open window, overlap half; scores, selection).
// Timing prints (no assertion): indexer 4096 queries x 8192 entries, compressor prefill 8192 tokens.
// Skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/compress_ops.h"
#include "cuda_test_util.h"
#include "model/deepseek_v4/attention.h"
#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/state.h"
#include "model/numerics.h"

namespace deepinfer::cudatest {
namespace {

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class T>
std::unique_ptr<Dev> upload(const std::vector<T>& v) {
  return std::make_unique<Dev>(v.data(), std::max<size_t>(v.size(), 1) * sizeof(T));
}

// ---------------------------------------------------------------------------------------------
// Compressor

struct CompCase {
  const char* name;
  int ratio, width;
  bool overlap;
  int round_mode;
};

// One sequence's random inputs (kv, gate without ape) and its CPU state.
struct CompSeq {
  int64_t len = 0, done = 0;
  std::vector<float> kv, gate;  // [len, cw]
  v4::CompressorState cpu;
  CompSeq(const CompCase& c, int64_t n, std::mt19937& rng)
      : len(n), cpu(c.ratio, c.width, c.overlap, 64) {
    const int64_t cw = (c.overlap ? 2 : 1) * c.width;
    kv = randn(n * cw, rng);
    gate = randn(n * cw, rng, 1.5f);
  }
};

struct CompCheck {
  int64_t values = 0, bad = 0;
  double max_abs = 0;
  int64_t first_bad = -1;
};

// Drives `seqs` through the GPU and CPU compressors, `chunk(s)` tokens per step per sequence
// (0: the sequence sits out the step), and compares every entry at the end.
template <class ChunkFn>
// fused: kv and gate in one buffer, each row's kv then its gate (row_stride 2 cw), as one GEMM over
// the forward's wkvg writes them at decode.
void run_compressor_case(const CompCase& c, std::vector<int64_t> lens, ChunkFn chunk, std::mt19937& rng,
                         const char* mode, bool fused = false) {
  const int R = c.ratio, W = c.width, rope_dim = 64, cw = (c.overlap ? 2 : 1) * W;
  const int S = static_cast<int>(lens.size());
  v4::RopeConfig rc;
  rc.theta = 10000.0;
  const v4::Rope rope(rc, rope_dim);
  std::vector<float> norm = randn(W, rng, 0.2f);
  for (auto& x : norm) x += 1.f;
  const std::vector<float> ape = randn(static_cast<size_t>(R) * cw, rng, 0.5f);
  v4::CompressorParams p{&norm, 1e-6f, &rope, c.round_mode, rope_dim};

  std::vector<CompSeq> seqs;
  int64_t max_entries = 0;
  for (int64_t n : lens) {
    seqs.emplace_back(c, n, rng);
    max_entries = std::max(max_entries, n / R);
  }
  // Slots are a permutation (exercises the slot indirection); entry rows offset per sequence.
  std::vector<int32_t> slot_of(S);
  std::iota(slot_of.begin(), slot_of.end(), 0);
  std::shuffle(slot_of.begin(), slot_of.end(), rng);
  const int64_t row_stride = max_entries + 3;
  std::vector<int64_t> base_of(S);
  for (int s = 0; s < S; ++s) base_of[s] = 5 + (S - 1 - s) * row_stride;
  const int64_t rows = 5 + S * row_stride;

  auto dape = upload(ape);
  auto dnorm = upload(norm);
  auto dfreq = upload(rope.inv_freq());
  Dev buf_kv(size_t(S) * R * cw * 4), buf_gate(size_t(S) * R * cw * 4);
  Dev prev_kv(size_t(S) * R * W * 4), prev_gate(size_t(S) * R * W * 4);
  std::vector<uint16_t> zero_rows(rows * W, 0);
  Dev entries(zero_rows.data(), zero_rows.size() * 2);

  int steps = 0;
  for (;;) {
    std::vector<int32_t> slot, tok_offset, count, pos0;
    std::vector<int64_t> entry_base;
    std::vector<float> kv, gate;
    int32_t max_count = 0;
    for (int s = 0; s < S; ++s) {
      CompSeq& q = seqs[s];
      const int64_t n = std::min<int64_t>(chunk(s), q.len - q.done);
      if (n <= 0) continue;
      slot.push_back(slot_of[s]);
      tok_offset.push_back(static_cast<int32_t>(kv.size() / cw));
      count.push_back(static_cast<int32_t>(n));
      pos0.push_back(static_cast<int32_t>(q.done));
      entry_base.push_back(base_of[s]);
      kv.insert(kv.end(), q.kv.begin() + q.done * cw, q.kv.begin() + (q.done + n) * cw);
      gate.insert(gate.end(), q.gate.begin() + q.done * cw, q.gate.begin() + (q.done + n) * cw);
      max_count = std::max<int32_t>(max_count, static_cast<int32_t>(n));
      std::vector<float> g(cw);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t pos = q.done + i;
        for (int k = 0; k < cw; ++k) g[k] = q.gate[pos * cw + k] + ape[(pos % R) * cw + k];
        v4::compressor_push(q.cpu, q.kv.data() + pos * cw, g.data(), p);
      }
      q.done += n;
    }
    if (slot.empty()) break;
    ++steps;
    std::vector<float> kvg;  // fused: row t is kv's row t, then gate's
    for (size_t t = 0; fused && t < kv.size() / cw; ++t) {
      kvg.insert(kvg.end(), kv.begin() + t * cw, kv.begin() + (t + 1) * cw);
      kvg.insert(kvg.end(), gate.begin() + t * cw, gate.begin() + (t + 1) * cw);
    }
    auto dkv = upload(fused ? kvg : kv), dgate = upload(gate), dslot = upload(slot), doff = upload(tok_offset),
         dcount = upload(count), dpos = upload(pos0), dbase = upload(entry_base);
    dc::CompressorStepArgs a;
    a.kv = dkv->as<float>(), a.gate = fused ? dkv->as<float>() + cw : dgate->as<float>();
    a.row_stride = fused ? 2 * cw : 0;
    a.ape = dape->as<float>(), a.norm = dnorm->as<float>();
    a.inv_freq = dfreq->as<float>();
    a.slot = dslot->as<int32_t>(), a.tok_offset = doff->as<int32_t>(), a.count = dcount->as<int32_t>();
    a.pos0 = dpos->as<int32_t>(), a.entry_base = dbase->as<int64_t>();
    a.buf_kv = buf_kv.as<float>(), a.buf_gate = buf_gate.as<float>();
    a.prev_kv = prev_kv.as<float>(), a.prev_gate = prev_gate.as<float>();
    a.entries = entries.as<uint16_t>();
    a.batch = static_cast<int32_t>(slot.size()), a.max_count = max_count;
    a.ratio = R, a.width = W, a.rope_dim = rope_dim, a.overlap = c.overlap, a.eps = 1e-6f;
    a.round_mode = c.round_mode;
    ASSERT_TRUE(dc::compressor_step(a)) << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error() << " (" << c.name << " " << mode << " step " << steps << ")";
  }

  const auto got = download<uint16_t>(entries, rows * W);
  const bool rounded = c.round_mode != 0;
  CompCheck chk;
  int64_t n_entries = 0;
  for (int s = 0; s < S; ++s) {
    const CompSeq& q = seqs[s];
    ASSERT_EQ(q.cpu.entries.size(), q.len / R);
    n_entries += q.cpu.entries.size();
    for (int64_t e = 0; e < q.cpu.entries.size(); ++e) {
      const float* ref = q.cpu.entries.row(e);
      for (int k = 0; k < W; ++k) {
        const float g = from_bf16(got[(base_of[s] + e) * W + k]);
        const double err = std::fabs(double(g) - ref[k]);
        ++chk.values;
        chk.max_abs = std::max(chk.max_abs, err);
        const double tol = (rounded ? 0.25 : 1e-2) * std::fabs(ref[k]) + 1e-3;
        if (!(err <= tol)) {
          if (chk.first_bad < 0) {
            chk.first_bad = chk.values - 1;
            std::printf("  first mismatch %s %s: seq %d entry %lld dim %d: gpu %g cpu %g\n", c.name, mode, s,
                        static_cast<long long>(e), k, g, ref[k]);
          }
          ++chk.bad;
        }
      }
    }
    // rows between sequences stay untouched
    for (int64_t e = q.cpu.entries.size(); e < row_stride; ++e)
      for (int k = 0; k < W; ++k)
        ASSERT_EQ(got[(base_of[s] + e) * W + k], 0) << c.name << " " << mode << ": write past seq " << s << " entry " << e;
  }
  std::printf("compressor %s %s: %d steps, %lld entries, max abs err %.3g, %lld / %lld values out of tolerance\n",
              c.name, mode, steps, static_cast<long long>(n_entries), chk.max_abs, static_cast<long long>(chk.bad),
              static_cast<long long>(chk.values));
  EXPECT_GT(n_entries, 0);
  if (rounded)
    EXPECT_LE(chk.bad, chk.values / 500) << c.name << " " << mode;
  else
    EXPECT_EQ(chk.bad, 0) << c.name << " " << mode;
}

const CompCase kCases[] = {
    {"CSA r4 w512", 4, 512, true, 0},  {"CSA r4 w128", 4, 128, true, 0},  {"HCA r128 w512", 128, 512, false, 0},
    {"CSA r4 w512 fp8", 4, 512, true, 1}, {"CSA r4 w128 hadamard-fp4", 4, 128, true, 2},
    {"HCA r128 w512 fp8", 128, 512, false, 1},
};

TEST(CudaCompress, DecodeMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(21);
  for (const CompCase& c : kCases) {
    // several sequences of different lengths (they leave the batch as they finish)
    const std::vector<int64_t> lens = c.ratio == 4 ? std::vector<int64_t>{37, 3, 20, 64}
                                                   : std::vector<int64_t>{300, 127, 129, 260};
    run_compressor_case(c, lens, [](int) { return int64_t{1}; }, rng, "decode");
    run_compressor_case(c, lens, [](int) { return int64_t{1}; }, rng, "decode, kv and gate in one buffer", true);
  }
}

TEST(CudaCompress, PrefillMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(22);
  for (const CompCase& c : kCases) {
    const std::vector<int64_t> lens = {1000, 7, 555, 301};
    std::uniform_int_distribution<int64_t> size(1, 300);
    std::mt19937 crng(rng());
    run_compressor_case(c, lens, [&](int) { return size(crng); }, rng, "prefill");
    // mixed: prefill chunks, then decode steps, then a chunk again (one schedule per sequence)
    std::vector<int> step(4, 0);
    run_compressor_case(
        c, {400, 133, 260, 90},
        [&](int s) {
          const int k = step[s]++;
          return (k < 2 || k > 20) ? size(crng) : int64_t{1};
        },
        rng, "prefill+decode");
  }
}

TEST(CudaCompress, RejectsBadArguments) {
  SKIP_WITHOUT_DEVICE();
  dc::CompressorStepArgs a;
  a.batch = 1, a.max_count = 1, a.round_mode = 3;
  EXPECT_FALSE(dc::compressor_step(a));
  EXPECT_NE(dc::last_error().find("round_mode must be 0, 1 or 2, not 3"), std::string::npos) << dc::last_error();
  // kv / gate rows closer together than a row's channels
  std::vector<float> one(4096, 0.f);
  auto d = upload(one);
  dc::CompressorStepArgs b;
  b.batch = 1, b.max_count = 1, b.ratio = 4, b.width = 128, b.rope_dim = 64, b.overlap = true;
  b.kv = b.gate = b.ape = b.norm = b.inv_freq = d->as<float>();
  b.tok_offset = b.count = b.pos0 = reinterpret_cast<const int32_t*>(d->as<float>());
  b.row_stride = 200;  // cw = 256
  EXPECT_FALSE(dc::compressor_step(b));
  EXPECT_NE(dc::last_error().find("row_stride 200 is below a row's channels"), std::string::npos) << dc::last_error();
  dc::IndexerArgs ia;
  ia.tokens = 1, ia.heads = 24;
  EXPECT_FALSE(dc::indexer_select(ia, nullptr));
}

// hadamard_fp4_rows (the indexer queries' reference rounding) is numerics::hadamard then
// fake_fp4 per 32, bitwise, at the indexer's width (128) and the compressor's (512), on rows of
// mixed magnitudes (ue8m0 scales from tiny to large); widths it cannot take are refused.
TEST(CudaCompress, HadamardFp4RowsMatchNumerics) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(31);
  for (const int64_t W : {128, 512}) {
    const int64_t rows = 37;
    std::vector<float> x = randn(size_t(rows * W), rng);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < W; ++i) x[r * W + i] *= std::ldexp(1.f, int(r % 11) * 3 - 15);
    std::vector<float> ref = x;
    for (int64_t r = 0; r < rows; ++r) {
      numerics::hadamard(ref.data() + r * W, W);
      numerics::fake_fp4(ref.data() + r * W, W, 32);
    }
    Dev d(x.data(), x.size() * 4);
    ASSERT_TRUE(dc::hadamard_fp4_rows(d.as<float>(), rows, W)) << dc::last_error();
    ASSERT_TRUE(dc::synchronize()) << dc::last_error();
    EXPECT_EQ(first_bit_mismatch(download<float>(d, x.size()), ref), -1) << "width " << W;
  }
  Dev d(size_t(4096) * 4);
  EXPECT_FALSE(dc::hadamard_fp4_rows(d.as<float>(), 2, 96));
  EXPECT_NE(dc::last_error().find("hadamard_fp4_rows"), std::string::npos) << dc::last_error();
  EXPECT_FALSE(dc::hadamard_fp4_rows(d.as<float>(), 2, 2048));
  EXPECT_FALSE(dc::hadamard_fp4_rows(nullptr, 2, 128));
}

// CompressorStepArgs::seq: sequences whose states are separate allocations (one launch through the
// pointer table; slot / entry_base / the slot buffers null) give bitwise the slot layout's entries,
// open window and overlap half after every step: multi-token steps, decode steps (count 1) and a
// sequence sitting some steps out (so table entry b is not sequence b).
TEST(CudaCompress, SeqPointerTablesMatchSlotLayout) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(61);
  for (const CompCase& c : {kCases[0], kCases[2], kCases[3], kCases[5]}) {
    const int R = c.ratio, W = c.width, rope_dim = 64, cw = (c.overlap ? 2 : 1) * W, S = 3;
    const std::vector<int64_t> lens = R == 4 ? std::vector<int64_t>{41, 23, 60} : std::vector<int64_t>{300, 140, 390};
    const std::vector<int64_t> first = R == 4 ? std::vector<int64_t>{6, 3, 0} : std::vector<int64_t>{130, 127, 0};
    const std::vector<int64_t> multi = R == 4 ? std::vector<int64_t>{5, 2, 9} : std::vector<int64_t>{40, 129, 7};
    auto count_of = [&](int s, int k) -> int64_t {
      if (k == 0) return first[s];
      if (s == 2 && k % 5 == 1) return 0;  // sits out
      return k % 7 == 3 ? multi[s] : 1;
    };
    std::vector<std::vector<float>> kv_all, gate_all;
    for (int s = 0; s < S; ++s) {
      kv_all.push_back(randn(lens[s] * cw, rng));
      gate_all.push_back(randn(lens[s] * cw, rng, 1.5f));
    }
    std::vector<float> norm = randn(W, rng, 0.2f);
    for (auto& x : norm) x += 1.f;
    const auto ape = randn(size_t(R) * cw, rng, 0.5f);
    std::vector<float> freq(rope_dim / 2);
    for (int i = 0; i < rope_dim / 2; ++i) freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / rope_dim));
    auto dape = upload(ape), dnorm = upload(norm), dfreq = upload(freq);
    // slot layout: slots permuted, entry rows offset per sequence
    const std::vector<int32_t> slot_of{2, 0, 1};
    const int64_t cap = lens[2] / R + 3;  // rows per sequence (every sequence's entries fit)
    std::vector<int64_t> base_of{5 + 2 * cap, 5, 5 + cap};
    const int64_t rows = 5 + S * cap;
    const auto init_buf = randn(size_t(S) * R * cw, rng), init_prev = randn(size_t(S) * R * W, rng);
    std::vector<uint16_t> init_ent(rows * W);
    for (auto& v : init_ent) v = to_bf16(std::normal_distribution<float>()(rng));
    Dev buf_kv(init_buf.data(), init_buf.size() * 4), buf_gate(init_buf.data(), init_buf.size() * 4);
    Dev prev_kv(init_prev.data(), init_prev.size() * 4), prev_gate(init_prev.data(), init_prev.size() * 4);
    Dev entries(init_ent.data(), init_ent.size() * 2);
    // separate allocations with the same initial contents
    std::vector<std::unique_ptr<Dev>> own;
    std::vector<dc::CompressorSeqPtrs> ptrs(S);
    for (int s = 0; s < S; ++s) {
      const float* b0 = init_buf.data() + size_t(slot_of[s]) * R * cw;
      const float* p0 = init_prev.data() + size_t(slot_of[s]) * R * W;
      own.push_back(std::make_unique<Dev>(b0, size_t(R) * cw * 4));
      ptrs[s].buf_kv = own.back()->as<float>();
      own.push_back(std::make_unique<Dev>(b0, size_t(R) * cw * 4));
      ptrs[s].buf_gate = own.back()->as<float>();
      if (c.overlap) {
        own.push_back(std::make_unique<Dev>(p0, size_t(R) * W * 4));
        ptrs[s].prev_kv = own.back()->as<float>();
        own.push_back(std::make_unique<Dev>(p0, size_t(R) * W * 4));
        ptrs[s].prev_gate = own.back()->as<float>();
      }
      own.push_back(std::make_unique<Dev>(init_ent.data() + base_of[s] * W, size_t(cap) * W * 2));
      ptrs[s].entries = own.back()->as<uint16_t>();
    }
    std::vector<int64_t> done(S, 0);
    int steps = 0, multi_steps = 0;
    int64_t bad = 0;
    for (int k = 0;; ++k) {
      std::vector<int32_t> slot, tok_offset, count, pos0;
      std::vector<int64_t> entry_base;
      std::vector<dc::CompressorSeqPtrs> table;
      std::vector<float> kv, gate;
      int32_t max_count = 0;
      for (int s = 0; s < S; ++s) {
        const int64_t n = std::min(count_of(s, k), lens[s] - done[s]);
        if (n <= 0) continue;
        slot.push_back(slot_of[s]), entry_base.push_back(base_of[s]), table.push_back(ptrs[s]);
        tok_offset.push_back(static_cast<int32_t>(kv.size() / cw));
        count.push_back(static_cast<int32_t>(n));
        pos0.push_back(static_cast<int32_t>(done[s]));
        kv.insert(kv.end(), kv_all[s].begin() + done[s] * cw, kv_all[s].begin() + (done[s] + n) * cw);
        gate.insert(gate.end(), gate_all[s].begin() + done[s] * cw, gate_all[s].begin() + (done[s] + n) * cw);
        max_count = std::max<int32_t>(max_count, static_cast<int32_t>(n));
        done[s] += n;
      }
      if (slot.empty()) {
        bool all = true;
        for (int s = 0; s < S; ++s) all &= done[s] == lens[s];
        if (all) break;
        continue;
      }
      ++steps;
      multi_steps += max_count > 1;
      auto dkv = upload(kv), dgate = upload(gate), dslot = upload(slot), doff = upload(tok_offset),
           dcount = upload(count), dpos = upload(pos0), dbase = upload(entry_base), dtable = upload(table);
      dc::CompressorStepArgs a;
      a.kv = dkv->as<float>(), a.gate = dgate->as<float>(), a.ape = dape->as<float>(), a.norm = dnorm->as<float>();
      a.inv_freq = dfreq->as<float>(), a.tok_offset = doff->as<int32_t>(), a.count = dcount->as<int32_t>();
      a.pos0 = dpos->as<int32_t>(), a.batch = static_cast<int32_t>(slot.size()), a.max_count = max_count;
      a.ratio = R, a.width = W, a.rope_dim = rope_dim, a.overlap = c.overlap, a.eps = 1e-6f;
      a.round_mode = c.round_mode;
      dc::CompressorStepArgs t = a;  // pointer tables: the slot-layout fields stay null
      t.seq = dtable->as<dc::CompressorSeqPtrs>();
      a.slot = dslot->as<int32_t>(), a.entry_base = dbase->as<int64_t>();
      a.buf_kv = buf_kv.as<float>(), a.buf_gate = buf_gate.as<float>();
      a.prev_kv = prev_kv.as<float>(), a.prev_gate = prev_gate.as<float>();
      a.entries = entries.as<uint16_t>();
      ASSERT_TRUE(dc::compressor_step(a)) << dc::last_error();
      ASSERT_TRUE(dc::compressor_step(t)) << dc::last_error();
      ASSERT_TRUE(dc::synchronize()) << dc::last_error();
      const size_t nb = size_t(S) * R * cw, np = size_t(S) * R * W;
      const auto sb_kv = download<float>(buf_kv, nb), sb_g = download<float>(buf_gate, nb);
      const auto sp_kv = download<float>(prev_kv, np), sp_g = download<float>(prev_gate, np);
      const auto sent = download<uint16_t>(entries, rows * W);
      for (int s = 0; s < S; ++s) {
        auto same = [&](const auto& slot_arr, size_t off, const void* dev, size_t n, const char* what) {
          using T = typename std::decay_t<decltype(slot_arr)>::value_type;
          std::vector<T> got(n);
          EXPECT_TRUE(dc::copy_to_host(got.data(), dev, n * sizeof(T)));
          if (std::memcmp(got.data(), slot_arr.data() + off, n * sizeof(T)) != 0) {
            if (bad++ < 5)
              ADD_FAILURE() << c.name << " step " << steps << " seq " << s << ": " << what
                            << " differs from the slot layout";
          }
        };
        same(sb_kv, size_t(slot_of[s]) * R * cw, ptrs[s].buf_kv, size_t(R) * cw, "buf_kv");
        same(sb_g, size_t(slot_of[s]) * R * cw, ptrs[s].buf_gate, size_t(R) * cw, "buf_gate");
        if (c.overlap) {
          same(sp_kv, size_t(slot_of[s]) * R * W, ptrs[s].prev_kv, size_t(R) * W, "prev_kv");
          same(sp_g, size_t(slot_of[s]) * R * W, ptrs[s].prev_gate, size_t(R) * W, "prev_gate");
        }
        same(sent, size_t(base_of[s]) * W, ptrs[s].entries, size_t(cap) * W, "entries");
      }
    }
    // the slot run itself wrote entries (the comparison is not between two untouched buffers)
    const auto sent = download<uint16_t>(entries, rows * W);
    int64_t changed = 0;
    for (size_t i = 0; i < sent.size(); ++i) changed += sent[i] != init_ent[i];
    std::printf("compressor %s pointer tables: %d steps (%d multi-token), %lld entry values written, "
                "%lld differences\n",
                c.name, steps, multi_steps, static_cast<long long>(changed), static_cast<long long>(bad));
    EXPECT_EQ(bad, 0) << c.name;
    EXPECT_GT(multi_steps, 0);
    EXPECT_GT(changed, int64_t{W} * (lens[0] / R + lens[1] / R + lens[2] / R) / 2);
  }
}

// ---------------------------------------------------------------------------------------------
// Indexer

struct IdxQuery {
  int seq;
  int32_t n_visible;
};

// CPU scores of query t over its visible keys (the loop of attention.cpp's indexer).
std::vector<float> cpu_scores(const std::vector<float>& q, const std::vector<float>& w, const std::vector<float>& keys,
                              int64_t t, int64_t kbase, int64_t n, int H, int D) {
  std::vector<float> sc(n, 0.f);
  const float head_scale = 1.f / std::sqrt(static_cast<float>(H));
  const float dot_scale = 1.f / std::sqrt(static_cast<float>(D));
  for (int64_t e = 0; e < n; ++e) {
    const float* key = keys.data() + (kbase + e) * D;
    float s = 0.f;
    for (int h = 0; h < H; ++h) {
      const float qk = dot_f32(q.data() + (t * H + h) * D, key, D);
      s += std::max(qk, 0.f) * dot_scale * (w[t * H + h] * head_scale);
    }
    sc[e] = s;
  }
  return sc;
}

void run_indexer_case(const char* name, const std::vector<IdxQuery>& qs, int n_seqs, int64_t keys_per_seq,
                      int distinct, std::mt19937& rng) {
  const int H = 64, D = 128, K = 512;
  const int64_t stride = K + 8;
  const int T = static_cast<int>(qs.size());
  // keys: per sequence, rows drawn from `distinct` random rows (distinct < keys_per_seq: exact ties)
  std::vector<float> keys(n_seqs * keys_per_seq * D);
  std::vector<uint16_t> kb(keys.size());
  for (int s = 0; s < n_seqs; ++s) {
    const auto pool = randn(size_t(distinct) * D, rng);
    std::uniform_int_distribution<int> pick(0, distinct - 1);
    for (int64_t e = 0; e < keys_per_seq; ++e) {
      const int src = distinct >= keys_per_seq ? static_cast<int>(e) : pick(rng);
      for (int k = 0; k < D; ++k) {
        const size_t i = (s * keys_per_seq + e) * D + k;
        kb[i] = to_bf16(pool[size_t(src) * D + k]);
        keys[i] = from_bf16(kb[i]);
      }
    }
  }
  const auto q = randn(size_t(T) * H * D, rng);
  const auto w = randn(size_t(T) * H, rng);
  std::vector<int64_t> key_base(T), out_base(T);
  std::vector<int32_t> nvis(T);
  int32_t max_visible = 0;
  for (int t = 0; t < T; ++t) {
    key_base[t] = qs[t].seq * keys_per_seq;
    out_base[t] = 1000 + qs[t].seq * 100000;
    nvis[t] = qs[t].n_visible;
    max_visible = std::max(max_visible, nvis[t]);
  }
  auto dq = upload(q), dw = upload(w), dk = upload(kb), dkb = upload(key_base), dob = upload(out_base),
       dnv = upload(nvis);
  std::vector<int32_t> sentinel(T * stride, 12345);
  Dev didx(sentinel.data(), sentinel.size() * 4), dnidx(T * 4);
  dc::IndexerArgs a;
  a.q = dq->as<float>(), a.w = dw->as<float>(), a.keys = dk->as<uint16_t>(), a.key_base = dkb->as<int64_t>();
  a.n_visible = dnv->as<int32_t>(), a.out_base = dob->as<int64_t>(), a.index = didx.as<int32_t>();
  a.n_index = dnidx.as<int32_t>(), a.tokens = T, a.max_visible = max_visible;
  a.heads = H, a.head_dim = D, a.top_k = K, a.index_stride = stride;
  Dev ws(dc::indexer_workspace_bytes(a));
  ASSERT_TRUE(dc::indexer_select(a, ws.p)) << dc::last_error();
  ASSERT_TRUE(dc::synchronize()) << dc::last_error();
  const auto idx = download<int32_t>(didx, T * stride);
  const auto nidx = download<int32_t>(dnidx, T);
  const auto gpu_sc = download<float>(ws, size_t(T) * max_visible);  // diagnostic only

  int64_t near_ties = 0, compared = 0;
  double max_rel_score = 0;
  for (int t = 0; t < T; ++t) {
    const int64_t n = nvis[t];
    const auto sc = cpu_scores(q, w, keys, t, key_base[t], n, H, D);
    double smax = 0;
    for (int64_t e = 0; e < n; ++e) smax = std::max(smax, double(std::fabs(sc[e])));
    for (int64_t e = 0; e < n; ++e)
      max_rel_score = std::max(max_rel_score, std::fabs(double(gpu_sc[size_t(t) * max_visible + e]) - sc[e]) /
                                                  std::max(smax, 1e-30));
    const auto ref = v4::select_top_k(sc.data(), n, K);
    const int64_t k = static_cast<int64_t>(ref.size());
    ASSERT_EQ(nidx[t], k) << name << " t=" << t;
    std::vector<int64_t> got;
    for (int64_t j = 0; j < k; ++j) got.push_back(int64_t{idx[t * stride + j]} - out_base[t]);
    for (int64_t j = k; j < stride; ++j) ASSERT_EQ(idx[t * stride + j], -1) << name << " t=" << t << " slot " << j;
    for (int64_t j = 1; j < k; ++j) ASSERT_LT(got[j - 1], got[j]) << name << " t=" << t << " not ascending at " << j;
    for (int64_t j = 0; j < k; ++j) ASSERT_TRUE(got[j] >= 0 && got[j] < n) << name << " t=" << t << " slot " << j;
    if (k == 0) continue;
    std::vector<float> sorted = sc;
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
    const float kth = sorted[k - 1];
    // near-tie window: 1e-4 relative of the k-th score, or of the scores' rms where the k-th is ~0
    // (n_visible ~ 2 top_k puts it at the median of scores centred on 0)
    double ms = 0;
    for (int64_t e = 0; e < n; ++e) ms += double(sc[e]) * sc[e];
    const double window = 1e-4 * std::max(std::fabs(double(kth)), std::sqrt(ms / n));
    std::vector<int64_t> diff;
    std::set_symmetric_difference(got.begin(), got.end(), ref.begin(), ref.end(), std::back_inserter(diff));
    ++compared;
    for (int64_t e : diff) {
      const bool near = std::fabs(double(sc[e]) - kth) <= window;
      if (near) {
        ++near_ties;
      } else {
        ADD_FAILURE() << name << " t=" << t << " (n_visible " << n << "): entry " << e << " cpu score " << sc[e]
                      << " gpu score " << gpu_sc[size_t(t) * max_visible + e] << " k-th " << kth << " is "
                      << (std::binary_search(ref.begin(), ref.end(), e) ? "missing" : "extra");
        break;
      }
    }
  }
  std::printf("indexer %s: %d queries (max_visible %d), %lld compared, %lld near-tie set differences, "
              "max score err %.3g (relative to the query's max |score|)\n",
              name, T, max_visible, static_cast<long long>(compared), static_cast<long long>(near_ties),
              max_rel_score);
}

TEST(CudaCompress, IndexerMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(31);
  // one sequence, n_visible around top_k
  run_indexer_case("around top_k", {{0, 0}, {0, 1}, {0, 100}, {0, 511}, {0, 512}, {0, 513}, {0, 600}, {0, 1025}},
                   1, 1100, 1100, rng);
  // two sequences, n_visible >> top_k (several 1024-entry chunks, partial tiles)
  std::vector<IdxQuery> big;
  for (int i = 0; i < 6; ++i) big.push_back({i % 2, 3000 + 1777 * i});
  big.push_back({1, 12000});
  run_indexer_case("n >> top_k", big, 2, 12000, 12000, rng);
  // duplicated keys: every score appears ~4 times, the k-th sits on a tie group
  std::vector<IdxQuery> dup;
  for (int i = 0; i < 6; ++i) dup.push_back({0, 700 + 900 * i});
  run_indexer_case("duplicate keys", dup, 1, 6000, 1500, rng);
}

// IndexerArgs::key_ptrs: each sequence's keys in an allocation of its own (keys null; key_base[t]
// still added) give bitwise the shared-buffer run's scores, selection and n_index.
TEST(CudaCompress, IndexerKeyPointersMatchKeyBase) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(62);
  const int H = 64, D = 128, K = 512, n_seqs = 3;
  const int64_t per_seq = 5000, stride = K + 4;
  const std::vector<int> seq_of{0, 1, 2, 0, 1, 2, 1, 0};
  const std::vector<int32_t> nvis{0, 100, 512, 600, 1500, 3000, 4999, 2048};
  const std::vector<int64_t> lead{0, 7, 2};  // sequence s's own buffer: lead[s] rows before its keys
  const int T = static_cast<int>(seq_of.size());
  std::vector<uint16_t> kb(size_t(n_seqs) * per_seq * D);
  for (auto& x : kb) x = to_bf16(std::normal_distribution<float>()(rng));
  const auto q = randn(size_t(T) * H * D, rng), w = randn(size_t(T) * H, rng);
  std::vector<int64_t> key_base(T), own_base(T), out_base(T);
  std::vector<std::unique_ptr<Dev>> own;
  std::vector<const uint16_t*> own_ptr(n_seqs), key_ptrs(T);
  for (int s = 0; s < n_seqs; ++s) {
    std::vector<uint16_t> buf(size_t(lead[s] + per_seq) * D, 0x7fc0);  // NaN before the keys
    std::copy_n(kb.begin() + size_t(s) * per_seq * D, size_t(per_seq) * D, buf.begin() + lead[s] * D);
    own.push_back(upload(buf));
    own_ptr[s] = own.back()->as<uint16_t>();
  }
  for (int t = 0; t < T; ++t) {
    key_base[t] = seq_of[t] * per_seq, own_base[t] = lead[seq_of[t]], out_base[t] = 100 + seq_of[t] * 10000;
    key_ptrs[t] = own_ptr[seq_of[t]];
  }
  const int32_t max_visible = *std::max_element(nvis.begin(), nvis.end());
  auto dq = upload(q), dw = upload(w), dk = upload(kb), dkb = upload(key_base), dob = upload(own_base),
       dout = upload(out_base), dnv = upload(nvis), dptrs = upload(key_ptrs);
  std::vector<int32_t> sentinel(size_t(T) * stride, 12345);
  Dev i1(sentinel.data(), sentinel.size() * 4), i2(sentinel.data(), sentinel.size() * 4), n1(T * 4), n2(T * 4);
  dc::IndexerArgs a;
  a.q = dq->as<float>(), a.w = dw->as<float>(), a.keys = dk->as<uint16_t>(), a.key_base = dkb->as<int64_t>();
  a.n_visible = dnv->as<int32_t>(), a.out_base = dout->as<int64_t>(), a.index = i1.as<int32_t>();
  a.n_index = n1.as<int32_t>(), a.tokens = T, a.max_visible = max_visible;
  a.heads = H, a.head_dim = D, a.top_k = K, a.index_stride = stride;
  Dev ws1(dc::indexer_workspace_bytes(a)), ws2(dc::indexer_workspace_bytes(a));
  ASSERT_TRUE(dc::indexer_select(a, ws1.p)) << dc::last_error();
  dc::IndexerArgs b = a;
  b.keys = nullptr, b.key_ptrs = dptrs->as<const uint16_t* const>(), b.key_base = dob->as<int64_t>();
  b.index = i2.as<int32_t>(), b.n_index = n2.as<int32_t>();
  ASSERT_TRUE(dc::indexer_select(b, ws2.p)) << dc::last_error();
  ASSERT_TRUE(dc::synchronize()) << dc::last_error();
  EXPECT_EQ(download<int32_t>(i1, size_t(T) * stride), download<int32_t>(i2, size_t(T) * stride));
  EXPECT_EQ(download<int32_t>(n1, T), download<int32_t>(n2, T));
  const auto s1 = download<float>(ws1, size_t(T) * max_visible), s2 = download<float>(ws2, size_t(T) * max_visible);
  int64_t diff = 0, finite = 0;
  for (int t = 0; t < T; ++t)
    for (int e = 0; e < nvis[t]; ++e) {
      const size_t i = size_t(t) * max_visible + e;
      diff += std::memcmp(&s1[i], &s2[i], 4) != 0;
      finite += std::isfinite(s2[i]);
    }
  int64_t total = 0;
  for (int32_t n : nvis) total += n;
  std::printf("indexer key_ptrs: %d queries, %lld scores, %lld differ from the key_base run, %lld finite\n", T,
              static_cast<long long>(total), static_cast<long long>(diff), static_cast<long long>(finite));
  EXPECT_EQ(diff, 0);
  EXPECT_EQ(finite, total);
}

// Decode as the engine runs it: compressor_step and indexer_select captured once into a CUDA
// graph, replayed every step with new inputs copied into the same device buffers.
TEST(CudaCompress, DecodeStepsReplayFromAGraph) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(51);
  const int S = 3, R = 4, W = 512, cw = 2 * W, rope_dim = 64, L = 41;
  v4::RopeConfig rc;
  const v4::Rope rope(rc, rope_dim);
  std::vector<float> norm = randn(W, rng, 0.2f);
  for (auto& x : norm) x += 1.f;
  const auto ape = randn(size_t(R) * cw, rng, 0.5f);
  v4::CompressorParams p{&norm, 1e-6f, &rope, 0, rope_dim};
  std::vector<v4::CompressorState> cpu(S, v4::CompressorState(R, W, true, 64));
  const auto kv_all = randn(size_t(S) * L * cw, rng), gate_all = randn(size_t(S) * L * cw, rng);
  const std::vector<int32_t> slot{2, 0, 1}, tok{0, 1, 2}, count{1, 1, 1};
  const int64_t per_seq = L / R + 1;
  const std::vector<int64_t> ebase{0, per_seq, 2 * per_seq};
  auto dape = upload(ape), dnorm = upload(norm), dfreq = upload(rope.inv_freq()), dslot = upload(slot),
       dtok = upload(tok), dcount = upload(count), debase = upload(ebase);
  Dev dkv(size_t(S) * cw * 4), dgate(size_t(S) * cw * 4), dpos(S * 4);
  Dev bkv(size_t(S) * R * cw * 4), bg(size_t(S) * R * cw * 4), pkv(size_t(S) * R * W * 4), pg(size_t(S) * R * W * 4);
  std::vector<uint16_t> zero(S * per_seq * W, 0);
  Dev ent(zero.data(), zero.size() * 2);
  dc::CompressorStepArgs a;
  a.kv = dkv.as<float>(), a.gate = dgate.as<float>(), a.ape = dape->as<float>(), a.norm = dnorm->as<float>();
  a.inv_freq = dfreq->as<float>(), a.slot = dslot->as<int32_t>(), a.tok_offset = dtok->as<int32_t>();
  a.count = dcount->as<int32_t>(), a.pos0 = dpos.as<int32_t>(), a.entry_base = debase->as<int64_t>();
  a.buf_kv = bkv.as<float>(), a.buf_gate = bg.as<float>(), a.prev_kv = pkv.as<float>(), a.prev_gate = pg.as<float>();
  a.entries = ent.as<uint16_t>(), a.batch = S, a.max_count = 1, a.ratio = R, a.width = W, a.rope_dim = rope_dim;

  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const bool captured = dc::compressor_step(a, st);
  ASSERT_EQ(cudaStreamEndCapture(st, &graph), cudaSuccess);
  ASSERT_TRUE(captured) << dc::last_error();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int step = 0; step < L; ++step) {
    std::vector<float> kv(size_t(S) * cw), gate(size_t(S) * cw);
    std::vector<int32_t> pos(S, step);
    for (int s = 0; s < S; ++s) {
      const float* k = kv_all.data() + (size_t(s) * L + step) * cw;
      const float* g = gate_all.data() + (size_t(s) * L + step) * cw;
      std::copy(k, k + cw, kv.begin() + size_t(s) * cw);
      std::copy(g, g + cw, gate.begin() + size_t(s) * cw);
      std::vector<float> ga(cw);
      for (int c = 0; c < cw; ++c) ga[c] = g[c] + ape[(step % R) * cw + c];
      v4::compressor_push(cpu[s], k, ga.data(), p);
    }
    ASSERT_TRUE(dc::copy_to_device(dkv.p, kv.data(), kv.size() * 4));
    ASSERT_TRUE(dc::copy_to_device(dgate.p, gate.data(), gate.size() * 4));
    ASSERT_TRUE(dc::copy_to_device(dpos.p, pos.data(), S * 4));
    ASSERT_EQ(cudaGraphLaunch(exec, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess) << "step " << step;
  }
  const auto got = download<uint16_t>(ent, zero.size());
  int64_t bad = 0, n = 0;
  double max_abs = 0;
  for (int s = 0; s < S; ++s)
    for (int64_t e = 0; e < cpu[s].entries.size(); ++e)
      for (int k = 0; k < W; ++k, ++n) {
        const float ref = cpu[s].entries.row(e)[k], g = from_bf16(got[(ebase[s] + e) * W + k]);
        const double err = std::fabs(double(g) - ref);
        max_abs = std::max(max_abs, err);
        if (!(err <= 1e-2 * std::fabs(ref) + 1e-3)) ++bad;
      }
  std::printf("graph decode: %d steps x %d seqs, %lld values, max abs err %.3g, %lld out of tolerance\n", L, S,
              static_cast<long long>(n), max_abs, static_cast<long long>(bad));
  EXPECT_EQ(n, int64_t{S} * (L / R) * W);
  EXPECT_EQ(bad, 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // indexer: a graph replay gives the direct call's selection
  const int T = 4, H = 64, D = 128, K = 512, E = 3000;
  const auto q = randn(size_t(T) * H * D, rng), w = randn(size_t(T) * H, rng);
  std::vector<uint16_t> kb(size_t(E) * D);
  for (auto& x : kb) x = to_bf16(std::normal_distribution<float>()(rng));
  const std::vector<int64_t> zeros(T, 0);
  const std::vector<int32_t> nv{E, 2000, 400, 1024};
  auto dq = upload(q), dw = upload(w), dk = upload(kb), dz = upload(zeros), dnv = upload(nv);
  Dev i1(T * K * 4), i2(T * K * 4), n1(T * 4), n2(T * 4);
  dc::IndexerArgs ia;
  ia.q = dq->as<float>(), ia.w = dw->as<float>(), ia.keys = dk->as<uint16_t>(), ia.key_base = dz->as<int64_t>();
  ia.n_visible = dnv->as<int32_t>(), ia.out_base = dz->as<int64_t>(), ia.index = i1.as<int32_t>();
  ia.n_index = n1.as<int32_t>(), ia.tokens = T, ia.max_visible = E, ia.index_stride = K;
  Dev ws(dc::indexer_workspace_bytes(ia));
  ASSERT_TRUE(dc::indexer_select(ia, ws.p, st)) << dc::last_error();
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  ia.index = i2.as<int32_t>(), ia.n_index = n2.as<int32_t>();
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const bool icap = dc::indexer_select(ia, ws.p, st);
  ASSERT_EQ(cudaStreamEndCapture(st, &graph), cudaSuccess);
  ASSERT_TRUE(icap) << dc::last_error();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, st), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  EXPECT_EQ(download<int32_t>(i1, T * K), download<int32_t>(i2, T * K));
  EXPECT_EQ(download<int32_t>(n1, T), download<int32_t>(n2, T));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
}

// ---------------------------------------------------------------------------------------------
// Timing (printed, not asserted)

template <class F>
double time_ms(F f, int reps) {
  f();
  EXPECT_TRUE(dc::synchronize()) << dc::last_error();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  EXPECT_TRUE(dc::synchronize()) << dc::last_error();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
}

TEST(CudaCompress, Timing) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(41);
  {
    const int T = 4096, E = 8192, H = 64, D = 128, K = 512;
    const auto q = randn(size_t(T) * H * D, rng);
    const auto w = randn(size_t(T) * H, rng);
    std::vector<uint16_t> kb(size_t(E) * D);
    for (auto& x : kb) x = to_bf16(std::normal_distribution<float>()(rng));
    std::vector<int64_t> zeros(T, 0);
    std::vector<int32_t> full(T, E), causal(T);
    for (int t = 0; t < T; ++t) causal[t] = (E / T) * (t + 1);
    auto dq = upload(q), dw = upload(w), dk = upload(kb), dz = upload(zeros), dfull = upload(full),
         dcausal = upload(causal);
    Dev didx(size_t(T) * K * 4), dn(T * 4);
    dc::IndexerArgs a;
    a.q = dq->as<float>(), a.w = dw->as<float>(), a.keys = dk->as<uint16_t>(), a.key_base = dz->as<int64_t>();
    a.n_visible = dfull->as<int32_t>(), a.out_base = dz->as<int64_t>(), a.index = didx.as<int32_t>();
    a.n_index = dn.as<int32_t>(), a.tokens = T, a.max_visible = E, a.index_stride = K;
    Dev ws(dc::indexer_workspace_bytes(a));
    bool ok = true;
    const double full_ms = time_ms([&] { ok &= dc::indexer_select(a, ws.p); }, 5);
    a.n_visible = dcausal->as<int32_t>();
    const double causal_ms = time_ms([&] { ok &= dc::indexer_select(a, ws.p); }, 5);
    EXPECT_TRUE(ok) << dc::last_error();
    const double tflop = 2.0 * 2 * T * double(E) * H * D / 1e12;  // hi + lo products
    std::printf("timing indexer_select %d queries x %d entries: %.3f ms (%.0f TFLOP/s incl. top-k); causal "
                "(n_visible %d..%d): %.3f ms\n",
                T, E, full_ms, tflop / (full_ms / 1e3), causal[0], causal[T - 1], causal_ms);
  }
  for (const CompCase& c : {kCases[0], kCases[2]}) {
    const int T = 8192, R = c.ratio, W = c.width, cw = (c.overlap ? 2 : 1) * W;
    const auto kv = randn(size_t(T) * cw, rng), gate = randn(size_t(T) * cw, rng), ape = randn(size_t(R) * cw, rng);
    const auto norm = randn(W, rng), freq = randn(32, rng);
    const std::vector<int32_t> zero{0}, count{T};
    const std::vector<int64_t> base{0};
    auto dkv = upload(kv), dg = upload(gate), dape = upload(ape), dnorm = upload(norm), dfreq = upload(freq),
         dzero = upload(zero), dcount = upload(count), dbase = upload(base);
    Dev bkv(size_t(R) * cw * 4), bg(size_t(R) * cw * 4), pkv(size_t(R) * W * 4), pg(size_t(R) * W * 4),
        ent(size_t(T / R) * W * 2);
    dc::CompressorStepArgs a;
    a.kv = dkv->as<float>(), a.gate = dg->as<float>(), a.ape = dape->as<float>(), a.norm = dnorm->as<float>();
    a.inv_freq = dfreq->as<float>(), a.slot = dzero->as<int32_t>(), a.tok_offset = dzero->as<int32_t>();
    a.count = dcount->as<int32_t>(), a.pos0 = dzero->as<int32_t>(), a.entry_base = dbase->as<int64_t>();
    a.buf_kv = bkv.as<float>(), a.buf_gate = bg.as<float>(), a.prev_kv = pkv.as<float>(), a.prev_gate = pg.as<float>();
    a.entries = ent.as<uint16_t>(), a.batch = 1, a.max_count = T, a.ratio = R, a.width = W, a.rope_dim = 64;
    a.overlap = c.overlap;
    bool ok = true;
    const double ms = time_ms([&] { ok &= dc::compressor_step(a); }, 10);
    EXPECT_TRUE(ok) << dc::last_error();
    std::printf("timing compressor_step %s prefill %d tokens: %.3f ms\n", c.name, T, ms);
  }
}

}  // namespace
}  // namespace deepinfer::cudatest
