// AttentionDpBalancer: a scenario table (arrivals, progress, finishes) with the expected rank of
// each arrival and the outstanding tokens per rank after each event.
#include <gtest/gtest.h>

#include <string>

#include "parallel/dp_balancer.h"

namespace deepinfer::parallel {
namespace {

struct Event {
  char kind;  // 'a' assign, 'p' progress, 'f' finish
  uint64_t id;
  int64_t x, y;                       // assign: prompt, expected decode; progress: prefilled, decoded
  int want_rank;                      // assign only
  std::vector<int64_t> outstanding;   // per rank, after the event
};

TEST(AttentionDpBalancer, ScenarioTable) {
  const std::vector<Event> events = {
      {'a', 1, 100, 50, 0, {150, 0, 0}},    // all empty: lowest rank
      {'a', 2, 10, 10, 1, {150, 20, 0}},    // ranks 1 and 2 tie at 0 tokens and 0 requests: rank 1
      {'a', 3, 5, 15, 2, {150, 20, 20}},    // rank 2 is empty
      {'a', 4, 0, 0, 1, {150, 20, 20}},     // ranks 1, 2 tie at 20 tokens and 1 request: rank 1
      {'a', 5, 1, 0, 2, {150, 20, 21}},     // tokens tie (20, 20): rank 2 has fewer requests (1 < 2)
      {'p', 1, 100, 10, -1, {40, 20, 21}},  // request 1 prefilled and decoded 10
      {'a', 6, 30, 0, 1, {40, 50, 21}},     // rank 1 has 20: fewest
      {'p', 6, 10, 5, -1, {40, 40, 21}},    // decoding beyond the expectation is clamped at 0
      {'f', 1, 0, 0, -1, {0, 40, 21}},      // finish returns the rest of rank 0's tokens
      {'a', 7, 8, 8, 0, {16, 40, 21}},
  };
  AttentionDpBalancer b(3);
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    const std::string where = "event " + std::to_string(i) + " (" + e.kind + " " + std::to_string(e.id) + ")";
    if (e.kind == 'a') {
      auto r = b.assign(e.id, e.x, e.y);
      ASSERT_TRUE(r.is_ok()) << where << ": " << r.status().to_string();
      EXPECT_EQ(*r, e.want_rank) << where;
      EXPECT_EQ(b.rank_of(e.id), e.want_rank) << where;
    } else if (e.kind == 'p') {
      ASSERT_TRUE(b.progress(e.id, e.x, e.y).is_ok()) << where;
    } else {
      ASSERT_TRUE(b.finish(e.id).is_ok()) << where;
      EXPECT_EQ(b.rank_of(e.id), -1) << where;
    }
    for (int r = 0; r < 3; ++r) EXPECT_EQ(b.outstanding_tokens(r), e.outstanding[r]) << where << " rank " << r;
  }
  EXPECT_EQ(b.requests(0), 1);
  EXPECT_EQ(b.requests(1), 3);
  EXPECT_EQ(b.requests(2), 2);
}

TEST(AttentionDpBalancer, RejectsDuplicatesUnknownIdsAndNegativeCounts) {
  AttentionDpBalancer b(2);
  ASSERT_TRUE(b.assign(1, 4, 4).is_ok());
  EXPECT_FALSE(b.assign(1, 4, 4).is_ok());
  EXPECT_FALSE(b.assign(2, -1, 4).is_ok());
  EXPECT_FALSE(b.progress(9, 1, 1).is_ok());
  EXPECT_FALSE(b.progress(1, -1, 0).is_ok());
  EXPECT_FALSE(b.finish(9).is_ok());
  EXPECT_EQ(b.outstanding_tokens(0), 8);
}

TEST(AttentionDpBalancer, SameArrivalsGiveTheSameAssignment) {
  auto run = [] {
    AttentionDpBalancer b(4);
    std::vector<int> ranks;
    for (uint64_t i = 0; i < 40; ++i) {
      ranks.push_back(b.assign(i, static_cast<int64_t>((i * 37) % 101), static_cast<int64_t>((i * 11) % 64)).value());
      if (i % 3 == 0) {
        EXPECT_TRUE(b.progress(i, 20, 3).is_ok());
      }
      if (i % 5 == 4) {
        EXPECT_TRUE(b.finish(i - 2).is_ok());
      }
    }
    return ranks;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace deepinfer::parallel
