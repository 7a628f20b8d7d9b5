// The DeepSeek-V4 GPU model (model/deepseek_v4_gpu) against the CPU V4Model on a synthetic
// checkpoint with the real V4-Flash layer shapes (tests/cuda/v4_flash_synthetic.h: 4 layers with
// compress ratios [0, 4, 128, 4], layer 0 hash-routed, 16 routed experts top-6 + 1 shared,
// vocab 2048; FP8 / MXFP4 / bf16 / fp32 as stored upstream). The CPU runs with reference
// rounding (FP8 activations into the FP8 linears, as the GPU kernels compute them).
//
// Tolerances (logits): relative RMS error ||gpu - cpu|| / ||cpu|| per position <= 0.08 and
// argmax agreement >= 60% (random logits have top-2 gaps of a few percent of their RMS, so a 2-5%
// error flips some near-ties; an unrelated result agrees on ~0.05% of rows). The GPU differs from the CPU by bf16 q / K=V / entries, fp16 (not
// FP8) expert activations and unrounded window KV (the CPU rounds it through FP8 per 64); an
// unrelated result has a relative error near 1.4. Chunked vs one-shot prefill on the GPU, default
// mode: rel RMS <= 0.04 and argmax >= 90% (the FP8 linears switch kernels at M = 64 and cuBLASLt
// picks algorithms by M: 1e-7 differences, which FP8 re-quantisation and top-k routing flips grow
// to ~2% by the head, measured on the H200); batch-invariant mode (Numerics::batch_invariant):
// bitwise. Two sequences batched vs alone, and the engine-style run below (prefill chunks mixed
// with decode rows): bitwise in batch-invariant mode.
// Plus an engine-style run: 4 concurrent greedy requests, mixed prefill chunks and decode rows in
// ragged batches (the scheduling src/engine does), on the GPU vs the CPU. src/engine itself needs
// packages the device lacks (tokenizer, utf8proc, xxhash), so the loop here mirrors it over the
// Model interface; cuda_v4_engine_test.cpp runs src/engine itself in the full tree.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4_gpu/decode_inputs.h"
#include "model/deepseek_v4_gpu/gpu_model.h"
#include "tests/cuda/v4_flash_synthetic.h"

namespace deepinfer {
namespace {

using testing::TempDir;

constexpr double kRelTol = 0.08, kArgmaxMin = 0.6, kChunkTol = 0.04, kChunkArgmaxMin = 0.9;

struct Compare {
  double max_abs = 0, rel_rms = 0, worst_rel = 0;
  int64_t worst_pos = -1, rows = 0, argmax_agree = 0;
};

int64_t argmax(const float* x, int64_t n) { return std::max_element(x, x + n) - x; }

/// Row-wise comparison of [rows, V] logits; rel_rms over all rows, worst_rel per row.
Compare compare(const std::vector<float>& gpu, const std::vector<float>& cpu, int64_t V, int64_t r0 = 0,
                int64_t r1 = -1) {
  Compare c;
  if (r1 < 0) r1 = static_cast<int64_t>(cpu.size()) / V;
  double num = 0, den = 0;
  for (int64_t r = r0; r < r1; ++r) {
    double rn = 0, rd = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double g = gpu[r * V + v], x = cpu[r * V + v], e = g - x;
      c.max_abs = std::max(c.max_abs, std::fabs(e));
      rn += e * e, rd += x * x;
    }
    num += rn, den += rd;
    const double rel = std::sqrt(rn / std::max(rd, 1e-30));
    if (!(rel <= c.worst_rel)) c.worst_rel = rel, c.worst_pos = r;
    c.argmax_agree += argmax(&gpu[r * V], V) == argmax(&cpu[r * V], V);
    ++c.rows;
  }
  c.rel_rms = std::sqrt(num / std::max(den, 1e-30));
  return c;
}

void print(const char* what, const Compare& c) {
  std::printf("  %-34s rows %4lld  rel_rms %.4g  worst row rel %.4g (row %lld)  max_abs %.4g  argmax %lld/%lld\n", what,
              (long long)c.rows, c.rel_rms, c.worst_rel, (long long)c.worst_pos, c.max_abs, (long long)c.argmax_agree,
              (long long)c.rows);
}

std::vector<int32_t> tokens(int64_t n, uint64_t seed, int64_t vocab) {
  testing::SyntheticRng r(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(2 + r.next() % (vocab - 2));  // no bos / eos
  return t;
}

/// Both models over one synthetic checkpoint, written once for the suite.
class V4GpuModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cuda::device_available()) return;
    const auto t0 = std::chrono::steady_clock::now();
    dir_ = new TempDir("v4-flash-synthetic");
    testing::write_v4_flash_checkpoint(dir_->path, testing::V4FlashSpec{});
    const auto t1 = std::chrono::steady_clock::now();
    LoadOptions opt;
    opt.numerics.reference_rounding = true;
    auto be = Backend::create({});
    ASSERT_TRUE(be.is_ok()) << be.status().message();
    backend_ = std::move(be).value().release();
    auto cpu = v4::V4Model::load(dir_->path, *backend_, opt);
    ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
    cpu_ = std::move(cpu).value().release();
    auto gpu = v4gpu::V4GpuModel::load(dir_->path, opt);
    ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
    gpu_ = std::move(gpu).value().release();
    opt.numerics.batch_invariant = true;
    auto bi = v4gpu::V4GpuModel::load(dir_->path, opt);
    ASSERT_TRUE(bi.is_ok()) << bi.status().message();
    bi_ = std::move(bi).value().release();
    opt.numerics.batch_invariant = false;
    auto eager = v4gpu::V4GpuModel::load(dir_->path, opt);
    ASSERT_TRUE(eager.is_ok()) << eager.status().message();
    eager_ = std::move(eager).value().release();
    eager_->set_decode_graphs(false);
    const auto t2 = std::chrono::steady_clock::now();
    std::printf("synthetic checkpoint written in %.1f s, both models loaded in %.1f s (GPU weights %.0f MB)\n",
                std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
                gpu_->weight_bytes() / 1e6);
  }
  static void TearDownTestSuite() {
    delete eager_;
    delete bi_;
    delete gpu_;
    delete cpu_;
    delete backend_;
    delete dir_;
    eager_ = nullptr, bi_ = nullptr, gpu_ = nullptr, cpu_ = nullptr, backend_ = nullptr, dir_ = nullptr;
  }
  void SetUp() override {
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
    ASSERT_NE(gpu_, nullptr);
  }
  int64_t V() const { return gpu_->config().vocab_size; }

  static std::vector<float> cpu_run(v4::SequenceState& s, std::span<const int32_t> t, bool all,
                                    v4::V4Model* m = nullptr) {
    v4::SeqInput in{&s, t, all};
    v4::ForwardOutput out;
    Status st = (m ? m : cpu_)->forward(std::span<const v4::SeqInput>(&in, 1), out);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return out.logits;
  }
  static std::vector<float> gpu_run(ModelState& s, std::span<const int32_t> t, bool all, Model* m = nullptr) {
    ModelInput in{&s, t, all};
    v4::ForwardOutput out;
    Status st = (m ? m : gpu_)->forward(std::span<const ModelInput>(&in, 1), out);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return out.logits;
  }

  static TempDir* dir_;
  static Backend* backend_;
  static v4::V4Model* cpu_;
  static v4gpu::V4GpuModel* gpu_;
  static v4gpu::V4GpuModel* bi_;  // the same weights, Numerics::batch_invariant
  static v4gpu::V4GpuModel* eager_;  // the same weights and mode as gpu_, decode graphs off
};
TempDir* V4GpuModelTest::dir_ = nullptr;
Backend* V4GpuModelTest::backend_ = nullptr;
v4::V4Model* V4GpuModelTest::cpu_ = nullptr;
v4gpu::V4GpuModel* V4GpuModelTest::gpu_ = nullptr;
v4gpu::V4GpuModel* V4GpuModelTest::bi_ = nullptr;
v4gpu::V4GpuModel* V4GpuModelTest::eager_ = nullptr;

// Prefill 300 tokens (logits at every position), then 24 decode steps fed the CPU's argmax.
TEST_F(V4GpuModelTest, PrefillAndDecodeMatchCpu) {
  const auto prompt = tokens(300, 7, V());
  v4::SequenceState cs = cpu_->new_sequence();
  std::unique_ptr<ModelState> gs = gpu_->new_state();
  ASSERT_NE(gs, nullptr);
  const auto c = cpu_run(cs, prompt, true);
  const auto g = gpu_run(*gs, prompt, true);
  ASSERT_EQ(c.size(), g.size());
  std::printf("prefill 300 tokens, logits at every position (GPU vs CPU):\n");
  print("positions 0..3 (window only)", compare(g, c, V(), 0, 4));
  print("positions 4..127 (+ CSA entries)", compare(g, c, V(), 4, 128));
  print("positions 128..299 (+ HCA, ring wrap)", compare(g, c, V(), 128, 300));
  const Compare all = compare(g, c, V());
  print("all positions", all);
  EXPECT_LE(all.rel_rms, kRelTol);
  EXPECT_GE(all.argmax_agree, kArgmaxMin * all.rows);
  EXPECT_EQ(gs->length(), 300);

  std::vector<float> cd, gd;
  int32_t next = static_cast<int32_t>(argmax(&c[299 * V()], V()));
  for (int step = 0; step < 24; ++step) {
    const int32_t tok[1] = {next};
    const auto cl = cpu_run(cs, tok, false);
    const auto gl = gpu_run(*gs, tok, false);
    ASSERT_EQ(gl.size(), static_cast<size_t>(V()));
    cd.insert(cd.end(), cl.begin(), cl.end());
    gd.insert(gd.end(), gl.begin(), gl.end());
    next = static_cast<int32_t>(argmax(cl.data(), V()));
  }
  std::printf("24 decode steps (positions 300..323, CPU argmax fed to both):\n");
  const Compare dec = compare(gd, cd, V());
  print("decode", dec);
  EXPECT_LE(dec.rel_rms, kRelTol);
  EXPECT_GE(dec.argmax_agree, kArgmaxMin * dec.rows);
  std::printf("GPU state after 324 tokens: %.2f MB\n", gs->bytes() / 1e6);
}

// The CSA selection past index_topk: a checkpoint whose indexer keeps 16 entries, so that a
// 300-token prompt (75 entries) picks a fifth of them. With reference rounding the GPU's indexer
// queries must get the rounding its keys get (Hadamard + FP4, both sides, as the CPU model does),
// or the two models attend to different entries. Every prompt position's logits and 8 decode steps
// (CPU argmax fed to both), a tighter rel RMS than the suite's: measured on an H200 (2026-12-06),
// rel_rms 0.0328 with the queries rounded and 0.0524 without (argmax 232 / 244 against 223 / 244);
// the suite's 0.08 passed both, so this test's bound sits between them.
constexpr double kSelectionTol = 0.042;
TEST_F(V4GpuModelTest, IndexerSelectionPastTopkMatchesCpu) {
  TempDir dir("v4-flash-synthetic-topk16");
  testing::V4FlashSpec spec;
  spec.index_topk = 16;
  testing::write_v4_flash_checkpoint(dir.path, spec);
  LoadOptions opt;
  opt.numerics.reference_rounding = true;
  auto be = Backend::create({});
  ASSERT_TRUE(be.is_ok()) << be.status().message();
  auto cpu = v4::V4Model::load(dir.path, **be, opt);
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  auto gpu = v4gpu::V4GpuModel::load(dir.path, opt);
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  const int64_t V = (*gpu)->config().vocab_size;
  const auto prompt = tokens(300, 19, V);
  v4::SequenceState cs = (*cpu)->new_sequence();
  std::unique_ptr<ModelState> gs = (*gpu)->new_state();
  ASSERT_NE(gs, nullptr);
  v4::V4Model* const cm = cpu->get();
  Model* const gm = gpu->get();
  std::vector<float> c = cpu_run(cs, prompt, true, cm), g = gpu_run(*gs, prompt, true, gm);
  ASSERT_EQ(c.size(), size_t(300) * V);
  ASSERT_EQ(g.size(), c.size());
  print("prefill positions 64..299 (indexer keeps 16 of up to 75 entries)", compare(g, c, V, 64, 300));
  int32_t next = static_cast<int32_t>(argmax(&c[299 * V], V));
  for (int step = 0; step < 8; ++step) {
    const int32_t tok[1] = {next};
    const auto cl = cpu_run(cs, tok, false, cm);
    const auto gl = gpu_run(*gs, tok, false, gm);
    ASSERT_EQ(gl.size(), static_cast<size_t>(V));
    c.insert(c.end(), cl.begin(), cl.end());
    g.insert(g.end(), gl.begin(), gl.end());
    next = static_cast<int32_t>(argmax(cl.data(), V));
  }
  const Compare r = compare(g, c, V, 64);
  print("positions 64..299 and 8 decode steps", r);
  EXPECT_LE(r.rel_rms, kSelectionTol);
  EXPECT_GE(r.argmax_agree, kArgmaxMin * r.rows);
}

// Chunked prefill (chunks 100, 1, 63, 136: ring wraps and windows split across chunks) vs one shot.
TEST_F(V4GpuModelTest, ChunkedPrefillMatchesOneShot) {
  const auto prompt = tokens(300, 11, V());
  for (const bool invariant : {false, true}) {
    Model* m = invariant ? static_cast<Model*>(bi_) : static_cast<Model*>(gpu_);
    std::unique_ptr<ModelState> one = m->new_state(), chunked = m->new_state();
    const auto full = gpu_run(*one, prompt, true, m);
    std::vector<float> parts;
    int64_t at = 0;
    for (int64_t n : {100, 1, 63, 136}) {
      const auto l = gpu_run(*chunked, std::span<const int32_t>(prompt).subspan(at, n), true, m);
      parts.insert(parts.end(), l.begin(), l.end());
      at += n;
    }
    ASSERT_EQ(parts.size(), full.size());
    std::printf("GPU chunked (100, 1, 63, 136) vs one-shot prefill, %s:\n", invariant ? "batch-invariant mode" : "default mode");
    const Compare c = compare(parts, full, V());
    print("all positions", c);
    // The states must continue alike: one decode step from each.
    const int32_t tok[1] = {5};
    const Compare d = compare(gpu_run(*chunked, tok, false, m), gpu_run(*one, tok, false, m), V());
    print("next decode step", d);
    if (invariant) {
      EXPECT_EQ(c.max_abs, 0.0) << "batch-invariant mode: chunked prefill must be bitwise the one-shot";
      EXPECT_EQ(d.max_abs, 0.0);
    } else {
      EXPECT_LE(c.rel_rms, kChunkTol);
      EXPECT_GE(c.argmax_agree, kChunkArgmaxMin * c.rows);
      EXPECT_LE(d.rel_rms, kChunkTol);
    }
  }
}

// Two sequences in one forward (prefill 300 + 77, then 4 batched decode steps) vs each alone, in
// batch-invariant mode (the default mode's FP8 linears go through cuBLASLt from 32 rows, whose
// algorithm may change with M).
TEST_F(V4GpuModelTest, BatchedMatchesAloneBitwise) {
  const auto pa = tokens(300, 21, V()), pb = tokens(77, 22, V());
  std::unique_ptr<ModelState> a1 = bi_->new_state(), b1 = bi_->new_state(), a2 = bi_->new_state(),
                              b2 = bi_->new_state();
  std::vector<ModelInput> both{{a2.get(), pa, true}, {b2.get(), pb, true}};
  v4::ForwardOutput out;
  ASSERT_TRUE(bi_->forward(both, out).is_ok());
  ASSERT_EQ(out.row_offsets, (std::vector<int64_t>{0, 300}));
  const auto la = gpu_run(*a1, pa, true, bi_), lb = gpu_run(*b1, pb, true, bi_);
  std::vector<float> alone = la;
  alone.insert(alone.end(), lb.begin(), lb.end());
  std::printf("GPU two sequences batched vs alone (batch-invariant mode):\n");
  const Compare p = compare(out.logits, alone, V());
  print("prefill (300 + 77)", p);
  EXPECT_EQ(p.max_abs, 0.0) << "batched prefill is not bitwise equal to the sequences alone";
  for (int step = 0; step < 4; ++step) {
    const int32_t ta[1] = {int32_t(3 + step)}, tb[1] = {int32_t(900 + step)};
    std::vector<ModelInput> dec{{a2.get(), ta, false}, {b2.get(), tb, false}};
    ASSERT_TRUE(bi_->forward(dec, out).is_ok());
    std::vector<float> sa = gpu_run(*a1, ta, false, bi_), sb = gpu_run(*b1, tb, false, bi_);
    sa.insert(sa.end(), sb.begin(), sb.end());
    const Compare d = compare(out.logits, sa, V());
    if (step == 3) print("decode step 4 (2 rows)", d);
    EXPECT_EQ(d.max_abs, 0.0) << "decode step " << step;
  }
  // clone() is a device snapshot: continuing the copy and the original gives the same logits.
  std::unique_ptr<ModelState> snap = a1->clone();
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->length(), a1->length());
  EXPECT_EQ(snap->bytes(), a1->bytes());
  const int32_t t[1] = {42};
  const Compare cl = compare(gpu_run(*snap, t, false, bi_), gpu_run(*a1, t, false, bi_), V());
  EXPECT_EQ(cl.max_abs, 0.0) << "clone() diverged from its original";
}

// Decode steps replayed from CUDA graphs give bitwise the eager steps: three sequences at
// different lengths (one crossing an HCA entry boundary, 255 -> 256) decoded together for 10
// steps by gpu_ (graphs: step 1 eager, step 2 captured, then replayed) and by eager_.
TEST_F(V4GpuModelTest, DecodeGraphReplayMatchesEagerBitwise) {
  const std::vector<int64_t> lens{250, 60, 131};
  std::vector<std::unique_ptr<ModelState>> g, e;
  for (size_t i = 0; i < lens.size(); ++i) {
    const auto p = tokens(lens[i], 40 + i, V());
    g.push_back(gpu_->new_state()), e.push_back(eager_->new_state());
    const auto lg = gpu_run(*g.back(), p, false), le = gpu_run(*e.back(), p, false, eager_);
    ASSERT_EQ(compare(lg, le, V()).max_abs, 0.0) << "prefill of sequence " << i;
  }
  const int64_t replays0 = gpu_->decode_graph_replays();
  for (int step = 0; step < 10; ++step) {
    std::vector<int32_t> tok(lens.size());
    std::vector<ModelInput> bg, be;
    for (size_t i = 0; i < lens.size(); ++i) {
      tok[i] = static_cast<int32_t>((7 * step + 13 * i + 1) % V());
      bg.push_back({g[i].get(), std::span<const int32_t>(&tok[i], 1), false});
      be.push_back({e[i].get(), std::span<const int32_t>(&tok[i], 1), false});
    }
    v4::ForwardOutput og, oe;
    ASSERT_TRUE(gpu_->forward(bg, og).is_ok());
    ASSERT_TRUE(eager_->forward(be, oe).is_ok());
    const Compare c = compare(og.logits, oe.logits, V());
    EXPECT_EQ(c.max_abs, 0.0) << "decode step " << step;
  }
  const int64_t replays = gpu_->decode_graph_replays() - replays0;
  std::printf("decode graphs: %lld of 10 steps replayed, %lld graphs captured so far, eager model %lld\n",
              static_cast<long long>(replays), static_cast<long long>(gpu_->decode_graphs_captured()),
              static_cast<long long>(eager_->decode_graph_replays()));
  EXPECT_GE(replays, 8);
  EXPECT_EQ(eager_->decode_graph_replays(), 0);
}

// Bad input is an error, never a crash.
TEST_F(V4GpuModelTest, RejectsBadInput) {
  std::unique_ptr<ModelState> s = gpu_->new_state();
  const int32_t bad[1] = {static_cast<int32_t>(V())};
  v4::ForwardOutput out;
  ModelInput in{s.get(), bad, false};
  EXPECT_FALSE(gpu_->forward(std::span<const ModelInput>(&in, 1), out).is_ok());
  const int32_t good[1] = {5};
  ModelInput twice[2] = {{s.get(), good, false}, {s.get(), good, false}};
  EXPECT_FALSE(gpu_->forward(twice, out).is_ok());
  EXPECT_EQ(s->length(), 0);
}

// ---- Engine-style scheduling: 4 concurrent greedy requests.

struct Request {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 8;
  std::vector<int32_t> out;
  int64_t fed = 0;  // prompt tokens consumed
};

/// One ragged forward over (sequence index, tokens, all_logits) entries; returns logits rows.
using StepFn = std::function<std::vector<float>(const std::vector<std::pair<size_t, std::vector<int32_t>>>&)>;

/// Decode rows first, then prefill chunks of <= 64 tokens within a 96-token budget (src/engine's
/// plan); each finished prompt's last-chunk logits give its first token.
void run_requests(std::vector<Request>& reqs, const StepFn& step, int64_t V) {
  for (;;) {
    std::vector<std::pair<size_t, std::vector<int32_t>>> batch;
    int64_t budget = 96;
    for (size_t i = 0; i < reqs.size(); ++i) {
      Request& r = reqs[i];
      if (r.fed == static_cast<int64_t>(r.prompt.size()) && !r.out.empty() &&
          static_cast<int64_t>(r.out.size()) < r.max_tokens) {
        batch.push_back({i, {r.out.back()}});
        --budget;
      }
    }
    for (size_t i = 0; i < reqs.size() && budget > 0; ++i) {
      Request& r = reqs[i];
      const int64_t left = static_cast<int64_t>(r.prompt.size()) - r.fed;
      if (left <= 0) continue;
      const int64_t n = std::min({left, budget, int64_t{64}});
      batch.push_back({i, std::vector<int32_t>(r.prompt.begin() + r.fed, r.prompt.begin() + r.fed + n)});
      r.fed += n;
      budget -= n;
    }
    if (batch.empty()) return;
    const std::vector<float> logits = step(batch);
    ASSERT_EQ(logits.size(), batch.size() * V);
    for (size_t b = 0; b < batch.size(); ++b) {
      Request& r = reqs[batch[b].first];
      if (r.fed == static_cast<int64_t>(r.prompt.size()))
        r.out.push_back(static_cast<int32_t>(argmax(&logits[b * V], V)));
    }
  }
}

TEST_F(V4GpuModelTest, FourConcurrentGreedyRequestsMatchCpu) {
  std::vector<Request> proto;
  int64_t seed = 31;
  for (int64_t len : {40, 150, 7, 130}) proto.push_back({tokens(len, seed++, V()), 8, {}, 0});

  std::vector<Request> cpu_reqs = proto, gpu_reqs = proto, solo_reqs = proto;
  std::vector<v4::SequenceState> cstates;
  for (size_t i = 0; i < proto.size(); ++i) cstates.push_back(cpu_->new_sequence());
  run_requests(cpu_reqs, [&](const auto& batch) {
    std::vector<v4::SeqInput> in;
    for (const auto& [i, t] : batch) in.push_back({&cstates[i], t, false});
    v4::ForwardOutput out;
    EXPECT_TRUE(cpu_->forward(in, out).is_ok());
    return out.logits;
  }, V());
  // The batched GPU runs: default mode (compared with the CPU) and batch-invariant mode (compared
  // with each request alone, which must give the same tokens exactly).
  auto batched = [&](Model* m, std::vector<Request>& reqs) {
    std::vector<std::unique_ptr<ModelState>> gstates;
    for (size_t i = 0; i < proto.size(); ++i) gstates.push_back(m->new_state());
    run_requests(reqs, [&](const auto& batch) {
      std::vector<ModelInput> in;
      for (const auto& [i, t] : batch) in.push_back({gstates[i].get(), t, false});
      v4::ForwardOutput out;
      Status st = m->forward(in, out);
      EXPECT_TRUE(st.is_ok()) << st.message();
      return out.logits;
    }, V());
  };
  std::vector<Request> bi_reqs = proto;
  batched(gpu_, gpu_reqs);
  batched(bi_, bi_reqs);
  // Each request alone (batch-invariant mode), one forward per step.
  for (size_t i = 0; i < proto.size(); ++i) {
    std::vector<Request> one{solo_reqs[i]};
    std::unique_ptr<ModelState> s = bi_->new_state();
    run_requests(one, [&](const auto& batch) {
      ModelInput in{s.get(), batch[0].second, false};
      v4::ForwardOutput out;
      EXPECT_TRUE(bi_->forward(std::span<const ModelInput>(&in, 1), out).is_ok());
      return out.logits;
    }, V());
    solo_reqs[i] = one[0];
  }
  int first_agree = 0;
  for (size_t i = 0; i < proto.size(); ++i) {
    std::printf("request %zu (prompt %zu tokens)\n  cpu:", i, proto[i].prompt.size());
    for (int32_t t : cpu_reqs[i].out) std::printf(" %d", t);
    std::printf("\n  gpu:");
    for (int32_t t : gpu_reqs[i].out) std::printf(" %d", t);
    std::printf("\n  gpu batch-invariant, batched:");
    for (int32_t t : bi_reqs[i].out) std::printf(" %d", t);
    std::printf("\n  gpu batch-invariant, alone:  ");
    for (int32_t t : solo_reqs[i].out) std::printf(" %d", t);
    std::printf("\n");
    ASSERT_EQ(gpu_reqs[i].out.size(), 8u);
    EXPECT_EQ(bi_reqs[i].out, solo_reqs[i].out) << "request " << i << ": batched run differs from the solo one (batch-invariant mode)";
    first_agree += !cpu_reqs[i].out.empty() && cpu_reqs[i].out[0] == gpu_reqs[i].out[0];
  }
  // Greedy paths may part at near-ties (the GPU is not bitwise the CPU); the first tokens come
  // from logits within kRelTol of each other.
  EXPECT_GE(first_agree, 2) << "first generated tokens agree for only " << first_agree << " of 4 requests";
}

}  // namespace
}  // namespace deepinfer
