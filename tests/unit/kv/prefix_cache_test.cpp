#include <gtest/gtest.h>

#include "kv/prefix_cache.h"

namespace deepinfer {
namespace {

std::shared_ptr<const void> payload(int v) { return std::make_shared<const int>(v); }
int value(const PrefixCache::Hit& h) { return *static_cast<const int*>(h.payload.get()); }

std::vector<int32_t> seq(int n, int base = 0) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = base + i;
  return v;
}

TEST(PrefixCache, LongestBoundaryWithinLimitWins) {
  PrefixCache c(4, 1000);
  const auto t = seq(20);
  c.insert(std::span(t).subspan(0, 4), payload(4), 10);
  c.insert(std::span(t).subspan(0, 12), payload(12), 10);
  auto h = c.lookup(t, 19);
  EXPECT_EQ(h.tokens, 12);
  EXPECT_EQ(value(h), 12);
  h = c.lookup(t, 11);  // limit below 12: the 4-token entry
  EXPECT_EQ(h.tokens, 4);
  EXPECT_EQ(value(h), 4);
  auto other = t;
  other[2] = 99;  // differs inside the first block: nothing matches
  EXPECT_EQ(c.lookup(other, 19).tokens, 0);
  EXPECT_EQ(c.stats().hits, 2);
  EXPECT_EQ(c.stats().lookups, 3);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedOverBudget) {
  PrefixCache c(2, 25);
  const auto a = seq(2, 0), b = seq(2, 10), d = seq(2, 20);
  c.insert(a, payload(1), 10);
  c.insert(b, payload(2), 10);
  EXPECT_EQ(c.lookup(a, 2).tokens, 2);  // a is now the most recent
  c.insert(d, payload(3), 10);          // over 25 bytes: b goes
  EXPECT_TRUE(c.contains(a));
  EXPECT_FALSE(c.contains(b));
  EXPECT_TRUE(c.contains(d));
  EXPECT_EQ(c.stats().evictions, 1);
  EXPECT_EQ(c.stats().bytes, 20);
  c.insert(seq(2, 30), payload(4), 100);  // larger than the whole budget: not cached
  EXPECT_FALSE(c.contains(seq(2, 30)));
  c.clear();
  EXPECT_EQ(c.stats().entries, 0);
}

// Every block hashes to the same value, so every prefix of every length collides. The cache must
// still only return a prefix whose stored ids equal the lookup's: a collision costs a miss.
uint64_t constant_hash(std::span<const int32_t>, uint64_t) { return 42; }

TEST(PrefixCache, HashCollisionIsAMissNeverAWrongHit) {
  PrefixCache c(4, 1000, &constant_hash);
  const auto a = seq(8, 0), b = seq(8, 100);
  c.insert(std::span(a).subspan(0, 4), payload(1), 10);
  EXPECT_EQ(c.lookup(a, 8).tokens, 4);  // the real entry is found
  // Same hash at both boundaries of b, different ids: a miss, and the payload is not a's.
  auto h = c.lookup(b, 8);
  EXPECT_EQ(h.tokens, 0);
  EXPECT_EQ(h.payload, nullptr);
  EXPECT_FALSE(c.contains(std::span(b).subspan(0, 4)));
  // a's 8-token prefix collides with its own 4-token entry (same hash, other length): a miss at 8.
  EXPECT_FALSE(c.contains(a));
  // The colliding newer prefix replaces the older one; looking up the old one now misses.
  c.insert(std::span(b).subspan(0, 4), payload(2), 10);
  EXPECT_EQ(c.stats().entries, 1);
  EXPECT_EQ(c.stats().bytes, 10);
  EXPECT_EQ(c.lookup(a, 8).tokens, 0);
  h = c.lookup(b, 8);
  EXPECT_EQ(h.tokens, 4);
  EXPECT_EQ(value(h), 2);
  EXPECT_EQ(c.stats().hits, 2);
}

}  // namespace
}  // namespace deepinfer
