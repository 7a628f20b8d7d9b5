// Engram row prefetch of V4.1 (V41Model::prefetch_engram, prefetch_table_rows): the rows advised for
// an upcoming batch are exactly the rows its forward then reads (prefill chunks of two sequences in
// one batch, then greedy decode after sampling), every row read lies in the advised pages, the page
// ranges are right on hand cases, and logits are bitwise the same with and without prefetch
// (tests/data/tiny-v41-b, which has Engram at two layers).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "model/deepseek_v41/model.h"
#include "model/model.h"
#include "tests/util/checkpoint_writer.h"

namespace deepinfer {
namespace {

using testing::fixture_dir;

std::vector<int64_t> sorted_unique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = u(g);
  return t;
}

int32_t argmax(const float* p, int64_t n) { return static_cast<int32_t>(std::max_element(p, p + n) - p); }

// Runs two sequences in one batch: prefill in chunks (7 and 4 tokens), then `decode` greedy steps.
// Before every forward, `before(batch)` sees the upcoming batch; after it, `after()` runs.
template <class Before, class After>
std::vector<float> drive(v41::V41Model& m, int64_t decode, Before before, After after) {
  const int64_t V = m.config().vocab_size;
  const std::vector<int32_t> a = random_tokens(23, V, 11), b = random_tokens(13, V, 12);
  v41::V41SequenceState sa = m.new_sequence(), sb = m.new_sequence();
  std::vector<float> logits;
  size_t ia = 0, ib = 0;
  std::vector<int32_t> next_a, next_b;
  auto step = [&](std::span<const int32_t> ta, std::span<const int32_t> tb) {
    std::vector<v41::SeqInput> batch;
    if (!ta.empty()) batch.push_back({&sa, ta, true});
    if (!tb.empty()) batch.push_back({&sb, tb, true});
    before(std::span<const v41::SeqInput>(batch));
    v4::ForwardOutput out;
    Status s = m.forward(batch, out);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    after();
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
    return out;
  };
  v4::ForwardOutput last;
  while (ia < a.size() || ib < b.size()) {
    const size_t na = std::min<size_t>(7, a.size() - ia), nb = std::min<size_t>(4, b.size() - ib);
    last = step({a.data() + ia, na}, {b.data() + ib, nb});
    ia += na;
    ib += nb;
  }
  // The last chunks of both ended in the last step (23 = 7*3+2, 13 = 4*3+1): both rows present.
  EXPECT_EQ(last.row_offsets.size(), 2u);
  for (int64_t s = 0; s < decode; ++s) {
    // Sampled tokens (greedy) are known here, before the next forward: that is where decode prefetches.
    const int64_t ra = last.row_offsets[1] - 1, rb = static_cast<int64_t>(last.logits.size() / V) - 1;
    next_a = {argmax(last.logits.data() + ra * V, V)};
    next_b = {argmax(last.logits.data() + rb * V, V)};
    last = step(next_a, next_b);
  }
  return logits;
}

class EngramPrefetch : public ::testing::Test {
 protected:
  void SetUp() override {
    auto be = Backend::create({});
    ASSERT_TRUE(be.is_ok());
    backend_ = std::move(be).value();
    auto m = v41::V41Model::load(fixture_dir("tiny-v41-b"), *backend_);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value();
    ASSERT_NE(model_->hasher(), nullptr) << "tiny-v41-b must have Engram";
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<v41::V41Model> model_;
};

TEST_F(EngramPrefetch, PrefetchedRowsAreExactlyTheRowsRead) {
  const v41::V41Config& c = model_->config();
  const size_t page = 4096;
  std::vector<std::vector<int64_t>> advised;
  int64_t steps = 0, checked_rows = 0;
  drive(
      *model_, 5, [&](std::span<const v41::SeqInput> batch) { advised = model_->prefetch_engram(batch); },
      [&] {
        ++steps;
        const auto& read = model_->last_engram_rows();
        ASSERT_EQ(read.size(), c.engram_layers.size());
        ASSERT_EQ(advised.size(), read.size());
        for (size_t l = 0; l < read.size(); ++l) {
          const std::vector<int64_t> r = sorted_unique(read[l]);
          EXPECT_EQ(advised[l], r) << "step " << steps << " layer " << c.engram_layers[l] << ": advised "
                                   << advised[l].size() << " rows, read " << r.size();
          const Weight& table = model_->weights().layers[c.engram_layers[l]].engram->table;
          const std::vector<v41::PageRange> pages = v41::table_row_pages(table, advised[l], page);
          const size_t row_bytes = table.data.nbytes() / static_cast<size_t>(table.rows);
          for (int64_t row : read[l]) {
            ASSERT_GE(row, 0);
            ASSERT_LT(row, table.rows);
            const uintptr_t b = reinterpret_cast<uintptr_t>(table.data.data()) + row * row_bytes;
            const bool inside = std::any_of(pages.begin(), pages.end(), [&](const v41::PageRange& p) {
              return p.begin <= b && b + row_bytes <= p.end;
            });
            EXPECT_TRUE(inside) << "row " << row << " of layer " << c.engram_layers[l] << " outside the advised pages";
            ++checked_rows;
          }
        }
      });
  EXPECT_EQ(steps, 4 + 5);
  std::cout << steps << " steps, " << checked_rows << " row reads checked\n";
}

TEST_F(EngramPrefetch, LogitsBitwiseEqualWithAndWithoutPrefetch) {
  model_->set_engram_prefetch(false);
  const std::vector<float> off = drive(*model_, 5, [](std::span<const v41::SeqInput>) {}, [] {});
  model_->set_engram_prefetch(true);
  const std::vector<float> on =
      drive(*model_, 5, [&](std::span<const v41::SeqInput> b) { (void)model_->prefetch_engram(b); }, [] {});
  ASSERT_EQ(on.size(), off.size());
  ASSERT_FALSE(on.empty());
  size_t first = on.size();
  float worst = 0;
  for (size_t i = 0; i < on.size(); ++i) {
    if (std::memcmp(&on[i], &off[i], sizeof(float)) != 0 && first == on.size()) first = i;
    worst = std::max(worst, std::fabs(on[i] - off[i]));
  }
  EXPECT_EQ(first, on.size()) << "first mismatch at " << first << ", max abs diff " << worst;
}

TEST_F(EngramPrefetch, ModelInterfacePrefetchLeavesResultsUnchanged) {
  std::unique_ptr<Model> view = model_view(*model_);
  const std::vector<int32_t> t = random_tokens(9, model_->config().vocab_size, 5);
  auto run = [&](bool hint) {
    std::unique_ptr<ModelState> st = view->new_state();
    ModelInput in{st.get(), t, true};
    if (hint) view->prefetch(std::span<const ModelInput>(&in, 1));
    v4::ForwardOutput out;
    EXPECT_TRUE(view->forward(std::span<const ModelInput>(&in, 1), out).is_ok());
    return out.logits;
  };
  const std::vector<float> a = run(false), b = run(true);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(EngramTablePages, HandCases) {
  constexpr size_t kPage = 64;
  void* buf = std::aligned_alloc(4096, 4096);
  void* sbuf = std::aligned_alloc(4096, 4096);
  ASSERT_TRUE(buf && sbuf);
  std::shared_ptr<const void> own(buf, std::free), sown(sbuf, std::free);
  const uintptr_t base = reinterpret_cast<uintptr_t>(buf), sbase = reinterpret_cast<uintptr_t>(sbuf);
  // F32 [16, 4]: 16 bytes per row.
  Weight w;
  w.format = WeightFormat::kF32;
  w.rows = 16;
  w.cols = 4;
  w.data = Tensor(DType::kF32, {16, 4}, buf, own);
  auto pages = [&](const Weight& t, std::vector<int64_t> rows) { return v41::table_row_pages(t, rows, kPage); };
  using PR = v41::PageRange;
  EXPECT_EQ(pages(w, {}), std::vector<PR>{});
  EXPECT_EQ(pages(w, {5, 0, 1}), (std::vector<PR>{{base, base + 128}}));         // rows 0-1: page 0; 5: page 1
  EXPECT_EQ(pages(w, {12, 0}), (std::vector<PR>{{base, base + 64}, {base + 192, base + 256}}));
  EXPECT_EQ(pages(w, {3, 3, 3}), (std::vector<PR>{{base, base + 64}}));
  // FP8 [16, 32] with one E8M0 per row (1 x 32 blocks): data rows of 32 bytes, scale rows of 1 byte.
  Weight f;
  f.format = WeightFormat::kFp8Block;
  f.rows = 16;
  f.cols = 32;
  f.block_rows = 1;
  f.block_cols = 32;
  f.data = Tensor(DType::kF8E4M3, {16, 32}, buf, own);
  f.scale = Tensor(DType::kF8E8M0, {16, 1}, sbuf, sown);
  const std::vector<PR> p3 = pages(f, {3});
  std::vector<PR> want = {{base + 64, base + 128}, {sbase, sbase + 64}};
  std::sort(want.begin(), want.end(), [](const PR& a, const PR& b) { return a.begin < b.begin; });
  EXPECT_EQ(p3, want);
}

}  // namespace
}  // namespace deepinfer
