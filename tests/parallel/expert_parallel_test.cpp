// Expert-parallel MoE over N in-process ranks == the single-rank v4::moe_forward, BITWISE, on
// random small layers (learned and hash routing, contiguous and redundant placements, uneven and
// empty token shares) and on the tiny fixture model's MoE layers.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>

#include "backend/backend.h"
#include "model/deepseek_v4/model.h"
#include "parallel/in_process_communicator.h"
#include "parallel/v4_expert_parallel.h"

namespace deepinfer::parallel {
namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

Weight f32_weight(int64_t rows, int64_t cols, std::mt19937& rng, float scale) {
  Weight w;
  w.name = "w";
  w.rows = rows;
  w.cols = cols;
  w.data = Tensor::zeros(DType::kF32, {rows, cols});
  const auto v = randn(static_cast<size_t>(rows * cols), rng, scale);
  std::copy(v.begin(), v.end(), w.data.mutable_span<float>().begin());
  return w;
}

struct Layer {
  v4::MoeParams p;
  v4::MoeWeights w;
  int64_t d = 0;
};

Layer random_layer(int64_t E, int64_t K, int64_t d, int64_t I, int64_t vocab, std::mt19937& rng) {
  Layer L;
  L.d = d;
  L.p.n_experts = E, L.p.top_k = K, L.p.routed_scaling = 1.5f, L.p.swiglu_limit = 7.f;
  L.w.gate = f32_weight(E, d, rng, 0.3f);
  L.w.bias = randn(static_cast<size_t>(E), rng, 0.1f);
  for (int64_t e = 0; e < E; ++e) {
    L.w.w1.push_back(f32_weight(I, d, rng, 0.2f));
    L.w.w3.push_back(f32_weight(I, d, rng, 0.2f));
    L.w.w2.push_back(f32_weight(d, I, rng, 0.2f));
  }
  L.w.shared_w1 = f32_weight(I, d, rng, 0.2f);
  L.w.shared_w3 = f32_weight(I, d, rng, 0.2f);
  L.w.shared_w2 = f32_weight(d, I, rng, 0.2f);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(E - 1));
  L.w.tid2eid.resize(static_cast<size_t>(vocab * K));
  for (int64_t t = 0; t < vocab; ++t) {  // distinct experts per token id
    std::vector<int32_t> all(static_cast<size_t>(E));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    std::copy_n(all.begin(), K, L.w.tid2eid.begin() + t * K);
  }
  return L;
}

// Splits N tokens over R ranks unevenly (rank 0 may get none): returns the R+1 boundaries.
std::vector<int64_t> split_tokens(int64_t N, int R, std::mt19937& rng) {
  std::vector<int64_t> cut{0};
  std::uniform_int_distribution<int64_t> u(0, N);
  std::vector<int64_t> pts;
  for (int r = 1; r < R; ++r) pts.push_back(u(rng));
  std::sort(pts.begin(), pts.end());
  if (R > 1) pts[0] = 0;  // rank 0 has no tokens: it still takes part (dummy batch)
  cut.insert(cut.end(), pts.begin(), pts.end());
  cut.push_back(N);
  return cut;
}

// A placement with `extra` redundant replicas spread at random (every expert at least once).
ExpertPlacement random_placement(int64_t E, int R, int64_t extra, std::mt19937& rng) {
  std::vector<int32_t> p2l(static_cast<size_t>(E));
  std::iota(p2l.begin(), p2l.end(), 0);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(E - 1));
  for (int64_t i = 0; i < extra; ++i) p2l.push_back(pick(rng));
  std::shuffle(p2l.begin(), p2l.end(), rng);
  auto pl = ExpertPlacement::create(E, R, p2l);
  EXPECT_TRUE(pl.is_ok()) << pl.status().to_string();
  return std::move(pl).value();
}

std::string first_mismatch(const float* a, const float* b, int64_t n) {
  double max_abs = 0;
  int64_t first = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(a + i, b + i, 4) != 0 && first < 0) first = i;
    max_abs = std::max(max_abs, std::fabs(double(a[i]) - b[i]));
  }
  if (first < 0) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "first mismatch at %lld: %.9g vs %.9g, max abs error %.3g",
                static_cast<long long>(first), a[first], b[first], max_abs);
  return buf;
}

// Runs the layer over R in-process ranks (each with its own thread pool) on slices of h and
// returns the concatenated outputs; also checks that every rank computed rows only for its slots.
Result<std::vector<float>> run_ep(const Layer& L, bool hash, const ExpertPlacement& pl, const std::vector<float>& h,
                                  const std::vector<int32_t>& ids, const std::vector<int64_t>& cut,
                                  std::vector<int64_t>* rows_per_physical = nullptr) {
  const int R = pl.n_ranks();
  const int64_t N = static_cast<int64_t>(ids.size()), d = L.d;
  std::vector<float> out(static_cast<size_t>(N * d), 0.f);
  std::mutex mu;
  if (rows_per_physical) rows_per_physical->assign(static_cast<size_t>(pl.n_physical()), 0);
  DI_TRY(run_in_process(R, [&](Communicator& c) -> Status {
    ThreadPool pool(1);
    CpuOps ops(pool);
    const int64_t t0 = cut[c.rank()], n = cut[c.rank() + 1] - t0;
    V4MoeEpArgs a;
    a.params = &L.p, a.weights = &L.w, a.hash = hash;
    a.h = h.data() + t0 * d, a.ids = ids.data() + t0, a.n_tokens = n, a.d = d;
    ExpertParallelStats stats;
    DI_TRY(v4_moe_forward_ep(c, pl, ops, a, out.data() + t0 * d, &stats));
    std::lock_guard<std::mutex> l(mu);
    if (rows_per_physical)
      for (int64_t s = 0; s < pl.slots_per_rank(); ++s)
        (*rows_per_physical)[c.rank() * pl.slots_per_rank() + s] = stats.rows_per_local_slot[s];
    return Status::ok();
  }));
  return out;
}

std::vector<float> run_single(const Layer& L, bool hash, const std::vector<float>& h, const std::vector<int32_t>& ids) {
  ThreadPool pool(2);
  CpuOps ops(pool);
  const int64_t N = static_cast<int64_t>(ids.size());
  std::vector<float> out(static_cast<size_t>(N * L.d));
  v4::moe_forward(ops, L.p, L.w, hash, h.data(), ids.data(), N, L.d, out.data());
  return out;
}

TEST(ExpertParallel, BitwiseEqualToSingleRankOnRandomLayers) {
  std::mt19937 rng(7);
  const int64_t E = 16, K = 4, d = 24, I = 16, vocab = 50;
  const Layer L = random_layer(E, K, d, I, vocab, rng);
  for (bool hash : {false, true}) {
    for (int R : {1, 2, 4, 8}) {
      for (int64_t extra : {int64_t{0}, int64_t{R}, int64_t{2 * R}}) {
        for (int64_t N : {int64_t{1}, int64_t{5}, int64_t{37}}) {
          const auto h = randn(static_cast<size_t>(N * d), rng, 1.f);
          std::vector<int32_t> ids(static_cast<size_t>(N));
          std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 1));
          for (auto& t : ids) t = tok(rng);
          const auto want = run_single(L, hash, h, ids);
          const ExpertPlacement pl = extra == 0 ? ExpertPlacement::contiguous(E, R).value()
                                                : random_placement(E, R, extra, rng);
          std::vector<int64_t> rows;
          auto got = run_ep(L, hash, pl, h, ids, split_tokens(N, R, rng), &rows);
          ASSERT_TRUE(got.is_ok()) << got.status().to_string();
          const std::string where = "hash=" + std::to_string(hash) + " ranks=" + std::to_string(R) +
                                    " redundant=" + std::to_string(extra) + " tokens=" + std::to_string(N);
          EXPECT_EQ(first_mismatch(got->data(), want.data(), N * d), "") << where;
          EXPECT_EQ(std::accumulate(rows.begin(), rows.end(), int64_t{0}), N * K) << where;
        }
      }
    }
  }
}

TEST(ExpertParallel, PlanPrefersALocalReplicaThenSpreadsRoundRobin) {
  // 4 experts, 2 ranks, 3 slots each: rank 0 = {e0, e1, e3}, rank 1 = {e2, e3, e3}.
  auto pl = ExpertPlacement::create(4, 2, {0, 1, 3, 2, 3, 3});
  ASSERT_TRUE(pl.is_ok()) << pl.status().to_string();
  EXPECT_EQ(pl->choose_replica(3, 0, 0), 2);  // rank 0 holds e3 in slot 2
  EXPECT_EQ(pl->choose_replica(3, 0, 5), 2);
  EXPECT_EQ(pl->choose_replica(3, 1, 0), 4);  // first local replica on rank 1
  EXPECT_EQ(pl->choose_replica(2, 0, 0), 3);  // only replica
  EXPECT_EQ(pl->choose_replica(1, 1, 0), 1);
  // Tokens of rank 0 with experts (e2, e1), (e0, e2): pairs 0 and 3 go to rank 1.
  const std::vector<int32_t> experts{2, 1, 0, 2};
  DispatchPlan plan = plan_dispatch(*pl, 0, experts, 2);
  EXPECT_EQ(plan.physical, (std::vector<int32_t>{3, 1, 0, 3}));
  EXPECT_EQ(plan.items_to, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(plan.order, (std::vector<int64_t>{1, 2, 0, 3}));
  // A remote expert with two replicas alternates between them by token: e3 from a rank without it.
  auto pl2 = ExpertPlacement::create(2, 2, {0, 0, 1, 1});
  ASSERT_TRUE(pl2.is_ok());
  EXPECT_EQ(pl2->choose_replica(1, 0, 0), 2);
  EXPECT_EQ(pl2->choose_replica(1, 0, 1), 3);
  EXPECT_EQ(pl2->choose_replica(0, 1, 0), 1);
  EXPECT_EQ(pl2->choose_replica(0, 1, 1), 0);
}

TEST(ExpertParallel, PlacementRejectsMissingExpertsAndUnevenSlots) {
  EXPECT_FALSE(ExpertPlacement::create(4, 2, {0, 1, 2, 2}).is_ok());     // e3 missing
  EXPECT_FALSE(ExpertPlacement::create(4, 2, {0, 1, 2, 3, 3}).is_ok());  // 5 slots on 2 ranks
  EXPECT_FALSE(ExpertPlacement::create(4, 2, {0, 1, 2, 4}).is_ok());     // out of range
  EXPECT_FALSE(ExpertPlacement::contiguous(6, 4).is_ok());
}

TEST(ExpertParallel, MismatchedPlacementIsAnErrorOnEveryRank) {
  std::mt19937 rng(3);
  const Layer L = random_layer(8, 2, 8, 8, 4, rng);
  const ExpertPlacement pl = ExpertPlacement::contiguous(8, 4).value();
  Status st = run_in_process(2, [&](Communicator& c) -> Status {
    ThreadPool pool(1);
    CpuOps ops(pool);
    std::vector<float> h(8, 0.5f), out(8);
    std::vector<int32_t> ids{0};
    V4MoeEpArgs a;
    a.params = &L.p, a.weights = &L.w, a.h = h.data(), a.ids = ids.data(), a.n_tokens = 1, a.d = 8;
    return v4_moe_forward_ep(c, pl, ops, a, out.data());
  });
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("placement for 4 ranks"), std::string::npos) << st.to_string();
}

// The tiny committed V4 fixture: each MoE layer (hash layer 0, learned layers 1-3) over 2/4/8
// ranks with redundant replicas, bitwise equal to the model's own MoE.
TEST(ExpertParallel, BitwiseEqualOnTinyFixtureModelLayers) {
  auto backend = Backend::create({});
  ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
  auto model = v4::V4Model::load(std::string(DI_TEST_DATA_DIR) + "/tiny-v4-a", **backend);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const v4::V4Config& cfg = (*model)->config();
  std::mt19937 rng(21);
  const int64_t N = 19, d = cfg.hidden, E = cfg.n_routed_experts;
  for (size_t l = 0; l < (*model)->weights().layers.size(); ++l) {
    const v4::BlockWeights& bw = (*model)->weights().layers[l];
    Layer L;
    L.p = v4::moe_params(cfg);
    L.w = bw.ffn;
    L.d = d;
    const auto h = randn(static_cast<size_t>(N * d), rng, 1.f);
    std::vector<int32_t> ids(static_cast<size_t>(N));
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(cfg.vocab_size - 1));
    for (auto& t : ids) t = tok(rng);
    const auto want = run_single(L, bw.hash, h, ids);
    for (int R : {2, 4, 8}) {
      if (E % R != 0) continue;
      const ExpertPlacement pl = random_placement(E, R, R, rng);
      auto got = run_ep(L, bw.hash, pl, h, ids, split_tokens(N, R, rng));
      ASSERT_TRUE(got.is_ok()) << got.status().to_string();
      EXPECT_EQ(first_mismatch(got->data(), want.data(), N * d), "")
          << "layer " << l << " hash=" << bw.hash << " ranks=" << R;
    }
  }
}

}  // namespace
}  // namespace deepinfer::parallel
