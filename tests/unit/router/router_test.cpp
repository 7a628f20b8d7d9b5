#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "router/prompt_key.h"
#include "router/replica_picker.h"
#include "router/router.h"

namespace deepinfer::router {
namespace {

using Json = nlohmann::ordered_json;

std::string text(int seed, size_t bytes) {
  std::string s;
  for (size_t i = 0; i < bytes; ++i) s += static_cast<char>('a' + (seed * 7 + i * 13) % 26);
  return s;
}

TEST(ReplicaPicker, SharedPrefixGoesWhereItWasSentUnlessTheLoadIsImbalanced) {
  PickerOptions o;
  o.balance_abs = 2;
  ReplicaPicker p(3, o);
  const std::string system = text(1, 640);  // 10 chunks
  const int first = p.pick(system + "question one");
  p.done(first);
  // Idle replicas with nothing remembered win a prompt nobody has seen.
  const int other = p.pick(text(2, 640));
  EXPECT_NE(other, first);
  p.done(other);
  // The same 10 chunks plus a different tail: >= 50% matched, so the same replica.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.pick(system + "question " + std::to_string(i)), first);
  }
  EXPECT_EQ(p.stats().cache_hits, 3);
  EXPECT_EQ(p.in_flight(first), 3);
  // Now first has 3 in flight, the others 0: max - min > 2, so the least loaded takes it.
  const int balanced = p.pick(system + "question 4");
  EXPECT_NE(balanced, first);
  EXPECT_EQ(p.stats().cache_hits, 3);
  EXPECT_EQ(p.match(balanced, system).first, 10u);  // and now remembers the prefix too
}

TEST(ReplicaPicker, BelowTheThresholdTheLeastLoadedWins) {
  ReplicaPicker p(2, PickerOptions{});
  const std::string a = text(3, 64 * 4);
  const int ra = p.pick(a);
  // One chunk of ten in common (10%): not enough for affinity; the idle replica takes it.
  const int rb = p.pick(a.substr(0, 64) + text(4, 64 * 9));
  EXPECT_NE(ra, rb);
  EXPECT_EQ(p.stats().cache_hits, 0);
  EXPECT_EQ(p.match(ra, a), (std::pair<size_t, size_t>{4, 4}));
}

TEST(ReplicaPicker, UnhealthyAndExcludedReplicasAreSkipped) {
  ReplicaPicker p(3, PickerOptions{});
  const std::string k = text(5, 300);
  const int r = p.pick(k);
  p.done(r);
  p.set_healthy(r, false);
  const int s = p.pick(k);
  EXPECT_NE(s, r);
  p.done(s);
  const int t = p.pick(k, {s});
  EXPECT_NE(t, r);
  EXPECT_NE(t, s);
  p.done(t);
  EXPECT_EQ(p.pick(k, {0, 1, 2}), -1);
  p.set_healthy(0, false), p.set_healthy(1, false), p.set_healthy(2, false);
  EXPECT_EQ(p.pick(k), -1);
  p.set_healthy(1, true);
  EXPECT_EQ(p.pick(k), 1);
}

TEST(ReplicaPicker, RoundRobinAndLeastLoad) {
  PickerOptions rr;
  rr.policy = Policy::kRoundRobin;
  ReplicaPicker p(3, rr);
  EXPECT_EQ(p.pick("x"), 0);
  EXPECT_EQ(p.pick("x"), 1);
  EXPECT_EQ(p.pick("x"), 2);
  p.set_healthy(0, false);
  EXPECT_EQ(p.pick("x"), 1);
  PickerOptions ll;
  ll.policy = Policy::kLeastLoad;
  ReplicaPicker q(2, ll);
  EXPECT_EQ(q.pick("x"), 0);
  EXPECT_EQ(q.pick("x"), 1);
  q.done(0);
  EXPECT_EQ(q.pick("x"), 0);
  EXPECT_FALSE(parse_policy("random").is_ok());
  EXPECT_EQ(*parse_policy("least_load"), Policy::kLeastLoad);
}

TEST(ReplicaPicker, RememberedChunksAreBoundedLeastRecentlyUsedFirst) {
  PickerOptions o;
  o.max_chunks = 8;
  ReplicaPicker p(1, o);
  const std::string a = text(6, 64 * 6), b = text(7, 64 * 6);
  p.pick(a);
  p.pick(b);  // 12 chunks sent, 8 kept: b's 6 and a's last 2
  EXPECT_EQ(p.match(0, b).first, 6u);
  EXPECT_EQ(p.match(0, a).first, 0u);  // a's first chunks are gone, so no prefix of it matches
  PickerOptions bad;
  bad.cache_threshold = 1.5;
  EXPECT_FALSE(bad.validate().is_ok());
}

TEST(PromptKey, CompletionsAndChatPromptsInOrder) {
  EXPECT_EQ(prompt_key(Json{{"prompt", "hello"}}), "hello");
  EXPECT_EQ(prompt_key(Json{{"prompt", {1, 2, 3}}}), "1,2,3,");
  EXPECT_EQ(prompt_key(Json{{"prompt", {"ab", "cd"}}}), "ab\x1d" "cd\x1d");
  const Json chat = {{"messages", {{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "U"}}}}};
  const std::string k = prompt_key(chat);
  EXPECT_EQ(k, "system\x1fS\x1euser\x1fU\x1e");
  Json more = chat;
  more["messages"].push_back({{"role", "assistant"}, {"content", "A"}});
  EXPECT_EQ(prompt_key(more).substr(0, k.size()), k);  // a longer conversation extends the key
  Json tools = chat;
  tools["tools"] = Json::array({{{"type", "function"}}});
  EXPECT_NE(prompt_key(tools).substr(0, k.size()), k);  // tools come first: they open the prompt
  EXPECT_EQ(prompt_key(Json::array()), "");
  EXPECT_EQ(prompt_key(Json{{"prompt", {{1, 2}, {3}}}}), "1,2,\x1d" "3,\x1d");
  EXPECT_EQ(prompt_key(Json{{"prompt", {{{{1}}}}}}), "\x1d");  // deeper than the API allows: nothing
  EXPECT_EQ(prompt_key(Json{{"other", 1}}), "");
}

TEST(ReplicaAddress, ParsedOrRefusedWithTheReason) {
  auto a = parse_replica_url("http://10.0.0.2:8001/v1");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a->host, "10.0.0.2");
  EXPECT_EQ(a->port, 8001);
  EXPECT_EQ(a->url, "http://10.0.0.2:8001");
  EXPECT_EQ(parse_replica_url("http://localhost:9/")->url, "http://localhost:9");
  for (const char* bad : {"10.0.0.2:8001", "https://h:1", "http://h", "http://h:0", "http://h:70000", "http://h:1/x", "http://:5"})
    EXPECT_FALSE(parse_replica_url(bad).is_ok()) << bad;
  RouterConfig c;
  EXPECT_FALSE(c.validate().is_ok());  // no replica
  c.replicas = {"http://h:1"};
  EXPECT_TRUE(c.validate().is_ok());
}

}  // namespace
}  // namespace deepinfer::router
