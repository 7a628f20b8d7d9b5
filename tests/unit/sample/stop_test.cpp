#include "sample/stop.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

struct Outcome {
  std::vector<std::string> emits;  // per push, then flush (if not stopped) as a last entry
  std::string text;                // everything emitted
  int32_t stop_index = -1;
};

Outcome run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopMatcher m(stops);
  Outcome o;
  for (const std::string& piece : pieces) {
    StopMatcher::Update u = m.push(piece);
    o.text += u.emit;
    o.emits.push_back(u.emit);
    if (u.stop_index) {
      o.stop_index = *u.stop_index;
      EXPECT_TRUE(m.stopped());
      EXPECT_EQ(m.push("more text").emit, "");  // nothing after a stop
      EXPECT_EQ(m.flush(), "");
      return o;
    }
  }
  const std::string rest = m.flush();
  o.text += rest;
  o.emits.push_back(rest);
  return o;
}

struct Case {
  const char* name;
  std::vector<std::string> stops;
  std::vector<std::string> pieces;
  std::vector<std::string> emits;  // expected per push (+ flush when no stop)
  std::string text;
  int32_t stop_index;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {"split across pieces", {"wor"}, {"Hel", "lo w", "orld"}, {"Hel", "lo ", ""}, "Hello ", 0},
      {"split across three pieces", {"<|stop|>"}, {"ok <", "|st", "op", "|> tail"},
       {"ok ", "", "", ""}, "ok ", 0},
      {"stop at the very start", {"ab"}, {"ab", "c"}, {""}, "", 0},
      {"stop at the very start, split", {"ab"}, {"a", "bc"}, {"", ""}, "", 0},
      {"whole piece is the stop", {"\n\n"}, {"x", "\n\n"}, {"x", ""}, "x", 0},
      {"overlapping prefix aab", {"aab"}, {"a", "a", "a", "b"}, {"", "", "a", ""}, "a", 0},
      {"self-overlapping abab", {"abab"}, {"ab", "a", "c"}, {"", "", "abac", ""}, "abac", -1},
      {"self-overlapping abab found", {"abab"}, {"xaba", "bab"}, {"x", ""}, "x", 0},
      {"false start released", {"END"}, {"foo E", "N", "x"}, {"foo ", "", "ENx", ""}, "foo ENx", -1},
      {"held text flushed at the end", {"END"}, {"foo E", "N"}, {"foo ", "", "EN"}, "foo EN", -1},
      {"no stops", {}, {"a", "b"}, {"a", "b", ""}, "ab", -1},
      {"multiple: first ending wins", {"abcd", "bc"}, {"abcd"}, {"a"}, "a", 1},
      {"multiple: list order does not matter", {"bc", "abcd"}, {"ab", "cd"}, {"", "a"}, "a", 0},
      {"multiple: same end, longer wins", {"c", "bc"}, {"abc"}, {"a"}, "a", 1},
      {"multiple: second string earlier", {"xyz", "12"}, {"a1", "2 xyz"}, {"a", ""}, "a", 1},
      {"hold back the longest candidate", {"abc", "bcd"}, {"xab", "cd"}, {"x", ""}, "x", 0},
      {"utf-8 stop", {"停止"}, {"好", "停", "止了"}, {"好", "", ""}, "好", 0},
      {"utf-8 false start", {"停止"}, {"好停", "下"}, {"好", "停下", ""}, "好停下", -1},
      {"empty piece", {"ab"}, {"a", "", "b"}, {"", "", ""}, "", 0},
  };
  return kCases;
}

TEST(StopMatcherTest, Table) {
  for (const Case& c : cases()) {
    const Outcome o = run(c.stops, c.pieces);
    EXPECT_EQ(o.emits, c.emits) << c.name;
    EXPECT_EQ(o.text, c.text) << c.name;
    EXPECT_EQ(o.stop_index, c.stop_index) << c.name;
  }
}

// The same text split any other way gives the same text and match: every single split point,
// and one byte per piece.
TEST(StopMatcherTest, IndependentOfPieceBoundaries) {
  for (const Case& c : cases()) {
    std::string full;
    for (const std::string& p : c.pieces) full += p;
    // Only the text up to where the stop ends matters; pieces after a stop are not fed.
    std::vector<std::vector<std::string>> splits;
    for (size_t cut = 0; cut <= full.size(); ++cut) splits.push_back({full.substr(0, cut), full.substr(cut)});
    std::vector<std::string> bytes;
    for (char ch : full) bytes.emplace_back(1, ch);
    splits.push_back(bytes);
    for (const auto& pieces : splits) {
      const Outcome o = run(c.stops, pieces);
      EXPECT_EQ(o.text, c.text) << c.name;
      EXPECT_EQ(o.stop_index, c.stop_index) << c.name;
    }
  }
}

TEST(StopMatcherTest, HeldBytesNeverExceedLongestStopMinusOne) {
  StopMatcher m({"abcdef", "xy"});
  for (const char* piece : {"abc", "de", "x", "abcde"}) {
    (void)m.push(piece);
    EXPECT_LE(m.held_bytes(), 5u);
  }
  EXPECT_EQ(m.held_bytes(), 5u);
}

TEST(StopMatcherTest, MatchesSuppressedBeforeMinTokens) {
  StopMatcher m({"ab", "abc"});
  StopMatcher::Update u = m.push("ab", /*allow_match=*/false);  // "ab" held: could become "abc"
  EXPECT_FALSE(u.stop_index);
  EXPECT_EQ(u.emit, "");
  u = m.push("x");  // "ab" ended in a disallowed piece: does not count
  EXPECT_FALSE(u.stop_index);
  EXPECT_EQ(u.emit, "abx");
  u = m.push("a", false);
  EXPECT_EQ(u.emit, "");
  u = m.push("bc");  // "abc" ends in an allowed piece: counts (and so does "ab", ending first)
  ASSERT_TRUE(u.stop_index);
  EXPECT_EQ(*u.stop_index, 0);
  EXPECT_EQ(u.emit, "");
  EXPECT_EQ(m.stop_string(*u.stop_index), "ab");
}

TEST(CheckTokenStopTest, EosStopIdsLengthAndMinTokens) {
  SamplingParams p;
  p.stop_token_ids = {7};
  p.max_tokens = 10;
  const std::vector<int32_t> eos = {1, 2};
  EXPECT_EQ(check_token_stop(5, 1, p, eos), FinishReason::kNone);
  EXPECT_EQ(check_token_stop(1, 1, p, eos), FinishReason::kStop);
  EXPECT_EQ(check_token_stop(2, 3, p, eos), FinishReason::kStop);
  EXPECT_EQ(check_token_stop(7, 3, p, eos), FinishReason::kStop);
  EXPECT_EQ(check_token_stop(5, 10, p, eos), FinishReason::kLength);
  EXPECT_EQ(check_token_stop(1, 10, p, eos), FinishReason::kStop);  // a stop beats length
  EXPECT_EQ(check_token_stop(5, 4, p, eos, /*max_tokens_limit=*/4), FinishReason::kLength);
  p.ignore_eos = true;
  EXPECT_EQ(check_token_stop(1, 1, p, eos), FinishReason::kNone);
  EXPECT_EQ(check_token_stop(7, 1, p, eos), FinishReason::kStop);  // stop ids still stop
  p.ignore_eos = false;
  p.min_tokens = 3;
  EXPECT_EQ(check_token_stop(1, 2, p, eos), FinishReason::kNone);
  EXPECT_EQ(check_token_stop(1, 3, p, eos), FinishReason::kStop);
  p.max_tokens.reset();
  EXPECT_EQ(check_token_stop(5, 1000000, p, eos), FinishReason::kNone);
}

}  // namespace
}  // namespace deepinfer
