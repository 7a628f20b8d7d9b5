// Special-token terminals (`<"...">`: an added token matched by id, text fallback) and the DSML
// tool-call grammar built from OpenAI tools: it accepts the V4 encoder's own rendering of tool
// calls (as text, and as the token ids of the tiny-v4-b tokenizer where ｜DSML｜ is added id 1020),
// rejects malformed calls, and the mask equals brute force including the special id.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/dsml_grammar.h"
#include "grammar/ebnf_parser.h"
#include "tests/unit/grammar/grammar_test_util.h"
#include "tokenizer/chat_encoding.h"
#include "tokenizer/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

using Json = nlohmann::ordered_json;
using testing::bit;
using testing::brute_force_mask;
using testing::full_match;

// Single bytes, a few words, two added tokens (<|sp|> and ｜DSML｜) and a stop token.
struct Vocab {
  std::shared_ptr<const TokenizerInfo> info;
  int32_t sp = -1, dsml = -1, eos = -1;
};

const Vocab& special_vocab() {
  static Vocab v = [] {
    Vocab r;
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    for (const char* s : {"ab", "<|", "sp", "|>", "</", "name", "\">\n", "｜", "DSML"}) t.push_back(s);
    r.sp = static_cast<int32_t>(t.size());
    t.push_back("<|sp|>");
    r.dsml = static_cast<int32_t>(t.size());
    t.push_back(kDsmlToken);
    r.eos = static_cast<int32_t>(t.size());
    t.push_back("<eos>");
    r.info = TokenizerInfo::from_vocab(std::move(t), {r.eos}, {r.sp, r.dsml},
                                       {{"<|sp|>", r.sp}, {kDsmlToken, r.dsml}}).value();
    return r;
  }();
  return v;
}

// Every byte, no added tokens: special-token terminals fall back to their text.
std::shared_ptr<const TokenizerInfo> byte_vocab() {
  static auto info = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    t.push_back("<eos>");
    return TokenizerInfo::from_vocab(std::move(t), {256}).value();
  }();
  return info;
}

int32_t byte_token(char c) { return static_cast<uint8_t>(c); }

TEST(GrammarSpecialToken, ParsePrintRoundTripAndErrors) {
  auto g = parse_ebnf("root ::= \"a\" <\"<|sp|>\"> (\"b\" | <'｜DSML｜'>)*\n");
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  std::string text = g->to_ebnf();
  EXPECT_NE(text.find("<\"<|sp|>\">"), std::string::npos) << text;
  auto again = parse_ebnf(text);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(again->to_ebnf(), text);
  for (const char* bad : {"root ::= <sp>", "root ::= <\"sp\"", "root ::= <\"\">"}) {
    auto r = parse_ebnf(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("1:10"), std::string::npos) << r.status().to_string();
  }
}

TEST(GrammarSpecialToken, MatchedByIdNeverByBytes) {
  const Vocab& v = special_vocab();
  GrammarCompiler c(v.info);
  auto g = c.compile_ebnf("root ::= \"a\" <\"<|sp|>\"> \"b\"+\n");
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  {
    Matcher m(*g);
    EXPECT_TRUE(m.accept_token(byte_token('a')));
    EXPECT_FALSE(m.accept_token(v.dsml));  // another special token
    EXPECT_FALSE(m.can_terminate());
    EXPECT_TRUE(m.accept_token(v.sp));
    EXPECT_FALSE(m.accept_token(v.sp));
    EXPECT_FALSE(m.accept_token(v.eos));
    EXPECT_TRUE(m.accept_token(byte_token('b')));
    EXPECT_TRUE(m.accept_token(v.eos));
    EXPECT_TRUE(m.is_terminated());
  }
  {
    // The text spelling, in any tokenization, is not the token.
    Matcher m(*g);
    EXPECT_TRUE(m.accept_token(byte_token('a')));
    EXPECT_FALSE(m.accept_string("<|sp|>"));
    EXPECT_FALSE(m.accept_token(byte_token('<')));
    std::vector<uint32_t> mask(static_cast<size_t>(v.info->bitmask_words()));
    m.fill_next_token_bitmask(mask);
    for (int32_t id = 0; id < v.info->vocab_size(); ++id) EXPECT_EQ(bit(mask, id), id == v.sp) << id;
    EXPECT_TRUE(m.find_jump_forward_string().empty());
    ASSERT_TRUE(m.accept_token(v.sp));
    EXPECT_EQ(m.min_completion_bytes(), 1);
    ASSERT_TRUE(m.rollback(1));
    m.fill_next_token_bitmask(mask);
    EXPECT_TRUE(bit(mask, v.sp));
  }
}

TEST(GrammarSpecialToken, FallsBackToTextWithoutTheAddedToken) {
  GrammarCompiler c(byte_vocab());
  auto g = c.compile_ebnf("root ::= \"a\" <\"<|sp|>\"> \"b\"\n");
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_TRUE(full_match(*g, "a<|sp|>b"));
  EXPECT_FALSE(full_match(*g, "ab"));
  EXPECT_TRUE((*g)->machine().special_ids.empty());
  // Same text, different tokenizer: a different compiled grammar (the cache key has the tokenizer).
  GrammarCompiler c2(special_vocab().info);
  auto g2 = c2.compile_ebnf("root ::= \"a\" <\"<|sp|>\"> \"b\"\n");
  ASSERT_TRUE(g2.is_ok());
  EXPECT_EQ((*g2)->machine().special_ids, std::vector<int32_t>{special_vocab().sp});
  EXPECT_FALSE(full_match(*g2, "a<|sp|>b"));
}

// Random walks: the mask (incl. the special ids) equals accept_token + rollback of every token.
TEST(GrammarSpecialToken, MaskEqualsBruteForce) {
  const Vocab& v = special_vocab();
  GrammarCompiler c(v.info);
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars;
  grammars.push_back(c.compile_ebnf("root ::= (\"ab\" | <\"<|sp|>\"> | \"<|\" x)+\nx ::= <\"｜DSML｜\"> \"a\"? | \"sp\"\n").value());
  auto tools = R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"s":{"type":"string"},"n":{"type":"integer","minimum":0,"maximum":99}},"required":["n"]}}}])";
  grammars.push_back(c.compile(dsml_tool_calls_grammar(tools).value()).value());
  for (size_t gi = 0; gi < grammars.size(); ++gi) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      std::mt19937_64 rng(seed * 31 + gi);
      Matcher m(grammars[gi], /*max_rollback_tokens=*/8);
      std::vector<uint32_t> mask(static_cast<size_t>(v.info->bitmask_words()));
      bool saw_special = false;
      for (int step = 0; step < 60 && !m.is_terminated(); ++step) {
        m.fill_next_token_bitmask(mask);
        ASSERT_EQ(mask, brute_force_mask(m)) << "grammar " << gi << " seed " << seed << " step " << step;
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < v.info->vocab_size(); ++id) {
          if (bit(mask, id)) allowed.push_back(id);
        }
        ASSERT_FALSE(allowed.empty());
        int32_t pick = allowed[rng() % allowed.size()];
        saw_special = saw_special || pick == v.sp || pick == v.dsml;
        ASSERT_TRUE(m.accept_token(pick));
      }
      if (gi == 1) EXPECT_TRUE(saw_special);  // the DSML grammar starts with ｜DSML｜ after 3 bytes
    }
  }
}

// ---- DSML tool-call grammar ----

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "description": "City name"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 14}},
     "required": ["city"]}}},
  {"type": "function", "function": {"name": "search",
    "parameters": {"type": "object", "properties": {
      "query": {"type": "string"},
      "filters": {"type": "object", "properties": {"site": {"type": "string"}, "safe": {"type": "boolean"}},
                  "required": ["safe"]},
      "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 3}},
     "required": ["query", "filters"],
     "$defs": {"tag": {"type": "string", "pattern": "[a-z]+"}}}}},
  {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
])";

// The encoder's rendering of an assistant turn with these calls: the DSML block, from the "\n\n".
std::string encoder_block(const Json& calls, bool v41 = false) {
  Json msgs = Json::array({Json{{"role", "user"}, {"content", "hi"}},
                           Json{{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}});
  tokenizer::ChatEncodeOptions o;
  o.format = v41 ? tokenizer::ChatFormat::kV41 : tokenizer::ChatFormat::kV4;
  auto r = tokenizer::render_chat(msgs, o);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  const std::string& t = r->text;
  const std::string start = std::string("\n\n<") + kDsmlToken + (v41 ? " calls" : "tool_calls");
  const std::string end = std::string("</") + kDsmlToken + (v41 ? " calls>" : "tool_calls>");
  size_t b = t.find(start), e = t.find(end);
  EXPECT_NE(b, std::string::npos) << t;
  EXPECT_NE(e, std::string::npos) << t;
  return t.substr(b, e + end.size() - b);
}

Json call(const std::string& name, const Json& args) {
  return Json{{"id", "c"}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args.dump()}}}};
}

std::vector<Json> good_calls() {
  return {
      Json::array({call("get_weather", {{"city", "Paris"}})}),
      Json::array({call("get_weather", {{"city", "New York <NY>\nline 2 </x>"}, {"unit", "fahrenheit"}, {"days", 3}})}),
      Json::array({call("search", {{"query", "deep \"infer\""}, {"filters", {{"site", "a.org"}, {"safe", true}}},
                                   {"tags", {"x", "yz"}}}),
                   call("get_weather", {{"city", "Oslo"}, {"days", 14}})}),
      Json::array({call("search", {{"query", ""}, {"filters", {{"safe", false}}}})}),
  };
}

TEST(DsmlGrammar, AcceptsTheEncodersRenderingAsText) {
  GrammarCompiler c(byte_vocab());
  for (bool v41 : {false, true}) {
    DsmlGrammarOptions o;
    o.v41 = v41;
    auto g = c.compile(dsml_tool_calls_grammar(kTools, o).value());
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    for (const Json& calls : good_calls()) {
      std::string s = encoder_block(calls, v41);
      EXPECT_TRUE(full_match(*g, s)) << "v41=" << v41 << " should accept:\n" << s;
      // And the output parser reads it back as these calls.
      tokenizer::OutputParserOptions po;
      po.format = v41 ? tokenizer::ChatFormat::kV41 : tokenizer::ChatFormat::kV4;
      auto parsed = tokenizer::parse_completion(s, po);
      ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
      ASSERT_EQ(parsed->tool_calls.size(), calls.size());
      for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(Json::parse(parsed->tool_calls[i].arguments), Json::parse(calls[i]["function"]["arguments"].get<std::string>()));
      }
    }
  }
}

TEST(DsmlGrammar, RejectsMalformedCalls) {
  GrammarCompiler c(byte_vocab());
  auto g = c.compile(dsml_tool_calls_grammar(kTools).value()).value();
  const std::string D = kDsmlToken;
  auto wrap = [&](const std::string& invokes) {
    return "\n\n<" + D + "tool_calls>\n" + invokes + "\n</" + D + "tool_calls>";
  };
  auto inv = [&](const std::string& name, const std::string& params) {
    return "<" + D + "invoke name=\"" + name + "\">\n" + params + "</" + D + "invoke>";
  };
  auto par = [&](const std::string& k, bool str, const std::string& v) {
    return "<" + D + "parameter name=\"" + k + "\" string=\"" + (str ? "true" : "false") + "\">" + v + "</" + D + "parameter>\n";
  };
  EXPECT_TRUE(full_match(g, wrap(inv("get_weather", par("city", true, "Rome")))));
  EXPECT_TRUE(full_match(g, wrap(inv("now", ""))));  // no parameters: the form the parser accepts
  const std::vector<std::string> bad = {
      "",                                                                   // no call at all
      "plain text answer",
      wrap(inv("get_wether", par("city", true, "Rome"))),                   // unknown tool
      wrap(inv("get_weather", ""))                                          // missing required
      , wrap(inv("get_weather", par("unit", true, "celsius"))),             // missing required city
      wrap(inv("get_weather", par("city", false, "\"Rome\""))),             // string param as JSON
      wrap(inv("get_weather", par("city", true, "Rome") + par("unit", true, "kelvin"))),  // not in enum
      wrap(inv("get_weather", par("city", true, "Rome") + par("days", false, "15"))),    // above maximum
      wrap(inv("get_weather", par("city", true, "Rome") + par("days", true, "3"))),      // integer as raw text
      wrap(inv("get_weather", par("days", false, "3") + par("city", true, "Rome"))),     // out of schema order
      wrap(inv("get_weather", par("city", true, "Rome") + par("zip", true, "1"))),       // unknown parameter
      wrap(inv("get_weather", par("city", true, "a</" + D + "parameter>b"))),           // value ends early
      wrap(inv("search", par("query", true, "q") + par("filters", false, "{\"site\": \"x\"}"))),  // missing safe
      wrap(inv("search", par("query", true, "q") + par("filters", false, "{\"safe\": true}") +
                         par("tags", false, "[\"A\"]"))),                  // pattern
      wrap(inv("now", "\n")),                                              // stray newline
      wrap(inv("get_weather", par("city", true, "Rome"))).substr(2),       // no leading blank line
      wrap(inv("get_weather", par("city", true, "Rome"))) + "x",           // text after the block
  };
  for (const std::string& s : bad) EXPECT_FALSE(full_match(g, s)) << "should reject:\n" << s;
}

TEST(DsmlGrammar, NamedToolAndSingleCall) {
  GrammarCompiler c(byte_vocab());
  DsmlGrammarOptions o;
  o.only = {"get_weather"};
  o.max_calls = 1;
  auto g = c.compile(dsml_tool_calls_grammar(kTools, o).value()).value();
  auto calls = good_calls();
  EXPECT_TRUE(full_match(g, encoder_block(calls[0])));
  EXPECT_FALSE(full_match(g, encoder_block(calls[3])));  // search is not the named tool
  o.max_calls = kUnbounded;
  auto g2 = c.compile(dsml_tool_calls_grammar(kTools, o).value()).value();
  Json two = Json::array({calls[0][0], calls[1][0]});
  EXPECT_TRUE(full_match(g2, encoder_block(two)));
  EXPECT_FALSE(full_match(g, encoder_block(two)));  // parallel_tool_calls=false: one call
  o.only = {"missing"};
  EXPECT_FALSE(dsml_tool_calls_grammar(kTools, o).is_ok());
  auto bad = dsml_tool_calls_grammar(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"integer","multipleOf":2}}}}}])");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("multipleOf"), std::string::npos) << bad.status().to_string();
  EXPECT_NE(bad.status().message().find("tool 'f'"), std::string::npos) << bad.status().to_string();
}

TEST(DsmlGrammar, AfterReasoningStartsWithFreeThinking) {
  GrammarCompiler c(byte_vocab());
  DsmlGrammarOptions o;
  o.after_reasoning = true;
  auto g = c.compile(dsml_tool_calls_grammar(kTools, o).value()).value();
  const std::string block = encoder_block(good_calls()[0]);
  EXPECT_TRUE(full_match(g, "</think>" + block));
  EXPECT_TRUE(full_match(g, "Let me think </thin k> <think> about it.</think>" + block));
  EXPECT_FALSE(full_match(g, block));
  EXPECT_FALSE(full_match(g, "a</think>b</think>" + block));  // the reasoning ends at the first </think>
}

// On the tiny-v4-b tokenizer ｜DSML｜ is added token 1020: the encoder's token ids (DSML by id) are
// accepted token by token, then EOS; the same text with ｜DSML｜ spelled as text is rejected.
TEST(DsmlGrammar, TinyTokenizerMatchesDsmlById) {
  auto tok = tokenizer::Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  auto dsml_id = (*tok)->added_token_id(kDsmlToken);
  ASSERT_TRUE(dsml_id.has_value());
  EXPECT_EQ(*dsml_id, 1020);
  auto info = TokenizerInfo::from_tokenizer(**tok, {1});
  ASSERT_TRUE(info.is_ok());
  EXPECT_EQ((*info)->special_token_id(kDsmlToken), 1020);
  GrammarCompiler c(*info);
  auto g = c.compile(dsml_tool_calls_grammar(kTools).value()).value();
  EXPECT_EQ(g->machine().special_ids, std::vector<int32_t>{1020});
  for (const Json& calls : good_calls()) {
    Json msgs = Json::array({Json{{"role", "user"}, {"content", "hi"}},
                             Json{{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}});
    auto rendered = tokenizer::render_chat(msgs, {});
    ASSERT_TRUE(rendered.is_ok());
    // Keep only the DSML block: the rendered prompt's ranges map ｜DSML｜ to its id.
    tokenizer::RenderedPrompt block;
    const std::string start = std::string("\n\n<") + kDsmlToken + "tool_calls";
    const std::string end = std::string("</") + kDsmlToken + "tool_calls>";
    size_t b = rendered->text.find(start), e = rendered->text.find(end) + end.size();
    block.text = rendered->text.substr(b, e - b);
    for (const auto& r : rendered->special_ranges) {
      if (r.begin >= b && r.end <= e) block.special_ranges.push_back({static_cast<uint32_t>(r.begin - b), static_cast<uint32_t>(r.end - b)});
    }
    auto ids = tokenizer::encode_rendered(**tok, block);
    ASSERT_TRUE(ids.is_ok());
    EXPECT_NE(std::find(ids->begin(), ids->end(), 1020), ids->end());
    Matcher m(g);
    std::vector<uint32_t> mask(static_cast<size_t>((*info)->bitmask_words()));
    for (int32_t id : *ids) {
      m.fill_next_token_bitmask(mask);
      ASSERT_TRUE(bit(mask, id)) << "token " << id << " masked in:\n" << block.text;
      ASSERT_TRUE(m.accept_token(id)) << "token " << id << " rejected in:\n" << block.text;
    }
    EXPECT_TRUE(m.accept_token(1));
    // The text spelling of ｜DSML｜ (ordinary tokens) is not accepted.
    auto as_text = (*tok)->encode(block.text, tokenizer::SpecialTokenMode::kText);
    ASSERT_TRUE(as_text.is_ok());
    EXPECT_EQ(std::find(as_text->begin(), as_text->end(), 1020), as_text->end());
    Matcher m2(g);
    bool all = true;
    for (int32_t id : *as_text) all = all && m2.accept_token(id);
    EXPECT_FALSE(all);
  }
}

}  // namespace
}  // namespace deepinfer::grammar
