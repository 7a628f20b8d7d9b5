// The compiler's shared classification (state_classes.h): every state's token cache equals the
// one it gets when classified alone, for bounded repetitions, rule references inside them (nullable
// and not), special tokens and real JSON schemas; and the compile budgets fail cleanly.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "grammar/ebnf_parser.h"
#include "grammar/json_schema_converter.h"
#include "grammar/regex_converter.h"
#include "grammar/state_classes.h"
#include "tests/unit/grammar/grammar_test_util.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

// Single bytes, pieces of up to 7 bytes (so the classes reach 8 bytes deep) and a special token.
std::shared_ptr<const TokenizerInfo> vocab() {
  static std::shared_ptr<const TokenizerInfo> info = [] {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
    for (const char* s : {"ab", "abc", "aaaa", "aaaaaaa", "xa", "\"a", "a\"", "\",", "\":", "{\"", "\"}", "12", "123",
                          "1234567", "  ", "    ", "\n  ", "\\u00", "é", "éé", "true", "null", ", \"", "2024-",
                          "-12-", "T10:", "<|t|>", "</think>"}) {
      v.push_back(s);
    }
    v.push_back("<eos>");
    const auto eos = static_cast<int32_t>(v.size() - 1);
    const auto special = static_cast<int32_t>(v.size() - 3);  // <|t|>
    return TokenizerInfo::from_vocab(std::move(v), {eos}, {special}, {{"<|t|>", special}}).value();
  }();
  return info;
}

std::vector<int32_t> accepted(const StateTokenCache& c) {
  std::vector<int32_t> out = c.accepted_ids;
  for (size_t w = 0; w < c.accepted_bitset.size(); ++w) {
    for (int b = 0; b < 32; ++b) {
      if ((c.accepted_bitset[w] >> b) & 1u) out.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(b)));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Compared {
  int32_t cached = 0;
  int32_t classified = 0;
};

// Compiles `g` with and without sharing and compares every cached state's accepted and uncertain
// tokens, then the masks along a few random walks.
Compared expect_same_caches(const Grammar& g, std::shared_ptr<const TokenizerInfo> tok, const std::string& what) {
  GrammarCompiler shared(tok), alone(tok, CompilerOptions{.share_equivalent_states = false});
  auto a = shared.compile(g);
  auto b = alone.compile(g);
  EXPECT_TRUE(a.is_ok() && b.is_ok()) << what;
  if (!a.is_ok() || !b.is_ok()) return {};
  const ByteMachine& m = (*a)->machine();
  for (int32_t s = 0; s < m.num_states; ++s) {
    if (!m.needs_cache[static_cast<size_t>(s)]) continue;
    const StateTokenCache& x = (*a)->cache(s);
    const StateTokenCache& y = (*b)->cache(s);
    EXPECT_EQ(accepted(x), accepted(y)) << what << ": state " << s;
    EXPECT_EQ(x.num_accepted, y.num_accepted) << what << ": state " << s;
    std::vector<int32_t> ux = x.uncertain_ids, uy = y.uncertain_ids;
    std::sort(ux.begin(), ux.end());
    std::sort(uy.begin(), uy.end());
    EXPECT_EQ(ux, uy) << what << ": state " << s;
  }
  EXPECT_EQ((*b)->stats().num_classified_states, (*b)->stats().num_cached_states) << what;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    const testing::WalkResult w = testing::random_walk(*a, seed, 24);
    Matcher ma(*a), mb(*b);
    std::vector<uint32_t> ka(static_cast<size_t>(tok->bitmask_words())), kb(ka.size());
    for (size_t i = 0; i <= w.text.size(); ++i) {
      ma.fill_next_token_bitmask(ka);
      mb.fill_next_token_bitmask(kb);
      EXPECT_EQ(ka, kb) << what << ": after '" << w.text.substr(0, i) << "'";
      if (i < w.text.size() && !(ma.accept_string(w.text.substr(i, 1)) && mb.accept_string(w.text.substr(i, 1)))) break;
    }
  }
  return {(*a)->stats().num_cached_states, (*a)->stats().num_classified_states};
}

TEST(GrammarStateClasses, BoundedRepeatsShareTheirClassification) {
  for (const char* re : {R"([^"]{0,40})", R"((ab|c){0,30}d)", R"(a{0,25}b?)", R"(.*a.{4})", R"([0-9]{2,20}(\.[0-9]{1,12})?)",
                         R"((é|x){3,30})", R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})"}) {
    auto g = regex_to_grammar(re);
    ASSERT_TRUE(g.is_ok()) << re;
    const Compared c = expect_same_caches(*g, vocab(), re);
    if (std::string(re) == R"([^"]{0,40})" || std::string(re) == R"(a{0,25}b?)") {
      EXPECT_LT(c.classified, c.cached / 2) << re << ": positions far from the bound share one classification";
    }
  }
}

TEST(GrammarStateClasses, RuleReferencesAndSpecialTokens) {
  const char* grammars[] = {
      // a nullable reference inside a repetition: its return states must match exactly
      "root ::= (\"x\" r){0,20} \"y\"\nr ::= \"a\"?\n",
      "root ::= (r \",\"){0,15} r\nr ::= [0-9]{1,3}\n",
      "root ::= \"[\" (v (\", \" v){0,12})? \"]\"\nv ::= \"null\" | [0-9]+ | root\n",
      "root ::= (<\"<|t|>\"> \"a\"{0,6}){0,8} \"z\"\n",
      "root ::= [^\\x00]{0,12} <\"</think>\"> t\nt ::= \"ok\" | \"no\"{1,9}\n",
  };
  for (const char* e : grammars) {
    auto g = parse_ebnf(e);
    ASSERT_TRUE(g.is_ok()) << e << g.status().to_string();
    expect_same_caches(*g, vocab(), e);
  }
}

std::vector<std::pair<std::string, std::string>> schemas() {
  std::ifstream in(std::string(DI_TEST_DATA_DIR) + "/grammar/schemas.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : nlohmann::ordered_json::parse(ss.str())) {
    out.emplace_back(e.at("name").get<std::string>(), e.at("schema").dump());
  }
  return out;
}

TEST(GrammarStateClasses, JsonSchemasInEveryWhitespaceMode) {
  const auto all = schemas();
  ASSERT_GE(all.size(), 15u);
  for (JsonWhitespace ws : {JsonWhitespace::kFlexible, JsonWhitespace::kCompact, JsonWhitespace::kSpaced}) {
    for (const auto& [name, schema] : all) {
      JsonSchemaOptions o;
      o.whitespace = ws;
      auto g = json_schema_to_grammar(schema, o);
      ASSERT_TRUE(g.is_ok()) << name;
      expect_same_caches(*g, vocab(), name + " ws " + std::to_string(static_cast<int>(ws)));
    }
  }
}

// The DeepSeek vocabulary (tokens up to 128 bytes): a string field with a long maxLength.
TEST(GrammarStateClasses, LongStringAtTheDeepSeekVocabulary) {
  auto tok = tokenizer::Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + "/tokenizer/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  auto info = TokenizerInfo::from_tokenizer(**tok).value();
  auto g = json_schema_to_grammar(
      R"({"type":"object","properties":{"note":{"type":"string","maxLength":200}},"required":["note"]})");
  ASSERT_TRUE(g.is_ok());
  const Compared c = expect_same_caches(*g, info, "maxLength 200");
  EXPECT_LT(c.classified, c.cached);
}

TEST(GrammarStateClasses, ClassesRefineOnlyWithinDepth) {
  auto g = regex_to_grammar("a{0,10}");
  ASSERT_TRUE(g.is_ok());
  auto m = build_byte_machine(*g);
  ASSERT_TRUE(m.is_ok());
  // 11 positions; the last reads nothing; at depth d the positions with more than d a's left are alike.
  for (int32_t depth : {0, 1, 3, 10, 20}) {
    const std::vector<int32_t> cls = classification_classes(*m, depth);
    const int32_t n = *std::max_element(cls.begin(), cls.end()) + 1;
    EXPECT_EQ(n, std::min(depth + 2, 11)) << "depth " << depth;
  }
}

TEST(GrammarCompileBudget, OverBudgetIsAClearError) {
  auto g = regex_to_grammar(".*a.{6}");
  ASSERT_TRUE(g.is_ok());
  GrammarCompiler ample(vocab());
  auto ok = ample.compile(*g);
  ASSERT_TRUE(ok.is_ok());
  const int64_t steps = (*ok)->stats().classify_steps;
  ASSERT_GT(steps, 1000);
  GrammarCompiler tight(vocab(), CompilerOptions{.max_classify_steps = steps / 4});
  auto over = tight.compile(*g);
  ASSERT_FALSE(over.is_ok());
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("too complex"), std::string::npos) << over.status().to_string();
  GrammarCompiler small_cache(vocab(), CompilerOptions{.max_cache_bytes = 1024});
  auto over_bytes = small_cache.compile(*g);
  ASSERT_FALSE(over_bytes.is_ok());
  EXPECT_EQ(over_bytes.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tight.cache_size(), 0u) << "a failed compile is not a compiled grammar";
  const int64_t hits = tight.cache_hits();
  auto again = tight.compile(*g);
  ASSERT_FALSE(again.is_ok());
  EXPECT_EQ(again.status().message(), over.status().message());
  EXPECT_EQ(tight.cache_hits(), hits + 1) << "the failure is remembered, not rebuilt";
}

}  // namespace
}  // namespace deepinfer::grammar
