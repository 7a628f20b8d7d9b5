// Incremental detokenizer and output parser: streaming equals one-shot, nothing partial leaks.
#include <gtest/gtest.h>

#include <random>

#include "test_data.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/output_parser.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

using Json = nlohmann::ordered_json;

std::string stream_decode(const Tokenizer& tok, const std::vector<TokenId>& ids, std::vector<std::string>* chunks,
                          DecodeOptions opts = {}) {
  IncrementalDecoder dec(tok, opts);
  std::string all;
  for (TokenId id : ids) {
    auto r = dec.push(id);
    EXPECT_TRUE(r.is_ok());
    if (chunks) chunks->push_back(*r);
    all += *r;
  }
  all += dec.flush();
  return all;
}

TEST(IncrementalDecoderTest, CorpusStreamEqualsOneShotAndChunksAreWholeCharacters) {
  const Tokenizer& tok = testing::deepseek_tokenizer();
  for (const auto& doc : testing::corpus()) {
    std::vector<std::string> chunks;
    ASSERT_EQ(stream_decode(tok, doc.ids, &chunks), doc.text) << doc.src;
    for (const auto& c : chunks) ASSERT_TRUE(validate_utf8(c).is_ok());
  }
}

TEST(IncrementalDecoderTest, MultiTokenCharacterIsHeldBackUntilComplete) {
  const Tokenizer& tok = testing::deepseek_tokenizer();
  auto ids = tok.encode("🦀", SpecialTokenMode::kText).value();
  ASSERT_GE(ids.size(), 2u);
  std::vector<std::string> chunks;
  EXPECT_EQ(stream_decode(tok, ids, &chunks), "🦀");
  for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_EQ(chunks[i], "");
  EXPECT_EQ(chunks.back(), "🦀");
}

TEST(IncrementalDecoderTest, RandomIdStreamsMatchLossyOneShotDecode) {
  const Tokenizer& tok = testing::deepseek_tokenizer();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<TokenId> any(0, tok.vocab_size() - 1);
  std::uniform_int_distribution<TokenId> bytes(3, 258);  // single-byte tokens: lots of invalid UTF-8
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<TokenId> ids;
    for (int k = 0; k < 12; ++k) {
      TokenId id = (trial % 2) ? bytes(rng) : any(rng);
      if (tok.is_known(id)) ids.push_back(id);
    }
    for (bool skip : {false, true}) {
      DecodeOptions o;
      o.skip_special_tokens = skip;
      ASSERT_EQ(stream_decode(tok, ids, nullptr, o), tok.decode(ids, o).value());
    }
  }
}

TEST(IncrementalDecoderTest, UnknownIdIsAnErrorAndLeavesStateAlone) {
  const Tokenizer& tok = testing::deepseek_tokenizer();
  IncrementalDecoder dec(tok);
  auto ids = tok.encode("é", SpecialTokenMode::kText).value();
  EXPECT_FALSE(dec.push(tok.vocab_size() + 5).is_ok());
  EXPECT_FALSE(dec.push(-1).is_ok());
  std::string s;
  for (TokenId id : ids) s += dec.push(id).value();
  EXPECT_EQ(s + dec.flush(), "é");
  // A truncated character at the end of the stream flushes as U+FFFD, like decode().
  IncrementalDecoder dec2(tok);
  auto crab = tok.encode("🦀", SpecialTokenMode::kText).value();
  EXPECT_EQ(dec2.push(crab[0]).value(), "");
  EXPECT_EQ(dec2.flush(), tok.decode(std::vector<TokenId>{crab[0]}).value());
}

// ---- OutputParser ----

OutputParserOptions thinking_v4() { return OutputParserOptions{ChatFormat::kV4, true}; }

const std::string kToolText =
    "need a tool</think>Let me check.\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"search\">\n"
    "<｜DSML｜parameter name=\"query\" string=\"true\">DeepSeek \"V4\"\nline</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"n\" string=\"false\">[1, 2]</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"now\">\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls><｜end▁of▁sentence｜>";

TEST(OutputParserTest, OneShotToolCallsBecomeOpenAiArguments) {
  auto m = parse_completion(kToolText, thinking_v4());
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->reasoning_content, "need a tool");
  EXPECT_EQ(m->content, "Let me check.");
  ASSERT_EQ(m->tool_calls.size(), 2u);
  EXPECT_EQ(m->tool_calls[0].name, "search");
  EXPECT_EQ(m->tool_calls[0].arguments, R"({"query": "DeepSeek \"V4\"\nline", "n": [1, 2]})");
  EXPECT_EQ(Json::parse(m->tool_calls[0].arguments)["query"], "DeepSeek \"V4\"\nline");
  EXPECT_EQ(m->tool_calls[1].name, "now");
  EXPECT_EQ(m->tool_calls[1].arguments, "{}");
}

// Splits the text at every byte boundary that is a character boundary (and in 3 pieces with a
// random second cut); the concatenated deltas must equal the one-shot message.
TEST(OutputParserTest, EveryChunkingGivesTheSameDeltasAndNoMarkerLeaks) {
  auto whole = parse_completion(kToolText, thinking_v4()).value();
  std::mt19937 rng(7);
  for (size_t cut = 0; cut <= kToolText.size(); ++cut) {
    if (cut < kToolText.size() && (static_cast<unsigned char>(kToolText[cut]) & 0xC0) == 0x80) continue;
    size_t cut2 = cut + rng() % (kToolText.size() - cut + 1);
    while (cut2 < kToolText.size() && (static_cast<unsigned char>(kToolText[cut2]) & 0xC0) == 0x80) ++cut2;
    OutputParser p(thinking_v4());
    std::string reasoning, content;
    std::vector<ParsedToolCall> calls;
    auto absorb = [&](const OutputDelta& d) {
      reasoning += d.reasoning_content;
      content += d.content;
      EXPECT_EQ(d.content.find("<｜"), std::string::npos);
      EXPECT_EQ(d.content.find("</think"), std::string::npos);
      for (const auto& tc : d.tool_calls) {
        if (static_cast<size_t>(tc.index) == calls.size()) calls.push_back({tc.name, ""});
        calls[tc.index].arguments += tc.arguments;
      }
    };
    absorb(p.push(std::string_view(kToolText).substr(0, cut)));
    absorb(p.push(std::string_view(kToolText).substr(cut, cut2 - cut)));
    absorb(p.push(std::string_view(kToolText).substr(cut2)));
    auto fin = p.finish();
    ASSERT_TRUE(fin.is_ok()) << cut;
    absorb(*fin);
    EXPECT_EQ(reasoning, whole.reasoning_content) << cut;
    EXPECT_EQ(content, whole.content) << cut;
    ASSERT_EQ(calls.size(), whole.tool_calls.size()) << cut;
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].name, whole.tool_calls[i].name);
      EXPECT_EQ(calls[i].arguments, whole.tool_calls[i].arguments);
    }
  }
}

TEST(OutputParserTest, ParsesTheOfficialGoldenAssistantTurns) {
  Json cases = Json::parse(testing::read_file(testing::data_path("chat/golden.json")));
  const std::string prompt = cases[0]["expected"];  // V4 case 1
  const std::string marker = "<｜Assistant｜><think>";
  size_t first = prompt.find(marker) + marker.size();
  size_t first_end = prompt.find("<｜User｜>", first);
  auto tc = parse_completion(prompt.substr(first, first_end - first), thinking_v4()).value();
  EXPECT_EQ(tc.reasoning_content, "The user wants to know the weather in Beijing. I should use the get_weather tool.");
  EXPECT_EQ(tc.content, "");
  ASSERT_EQ(tc.tool_calls.size(), 1u);
  EXPECT_EQ(tc.tool_calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(tc.tool_calls[0].arguments), Json::parse(R"({"location": "Beijing", "unit": "celsius"})"));
  auto last = parse_completion(prompt.substr(prompt.rfind(marker) + marker.size()), thinking_v4()).value();
  EXPECT_EQ(last.reasoning_content, "Got the weather data. Let me format a nice response.");
  EXPECT_NE(last.content.find("22°C"), std::string::npos);
  EXPECT_TRUE(last.tool_calls.empty());

  // Official case 2 (test_encoding_dsv4.py test_case_2): the last turn parses back, the first
  // turn's reasoning is gone from the prompt.
  ASSERT_EQ(cases[1]["name"], "v4_case2_thinking_drop_thinking");
  const std::string p2 = cases[1]["expected"];
  auto fin = parse_completion(p2.substr(p2.rfind(marker) + marker.size()), thinking_v4()).value();
  EXPECT_EQ(fin.reasoning_content, "The user asks about the capital of France. It is Paris.");
  EXPECT_EQ(fin.content, "The capital of France is Paris.");
  EXPECT_TRUE(fin.tool_calls.empty());
  EXPECT_EQ(p2.find("The user said hello"), std::string::npos);
}

TEST(OutputParserTest, V41SpacedTagsAndRawValues) {
  const std::string text =
      "Sure.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"bash\">\n"
      "<｜DSML｜ parameter name=\"command\" string=\"true\">echo '&lt;b&gt;' && ls</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"n\" string=\"false\">3</｜DSML｜ parameter>\n"
      "</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  auto m = parse_completion(text, OutputParserOptions{ChatFormat::kV41, false});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->content, "Sure.");
  ASSERT_EQ(m->tool_calls.size(), 1u);
  EXPECT_EQ(m->tool_calls[0].arguments, "{\"command\": \"echo '&lt;b&gt;' && ls\", \"n\": 3}");
  // The V4 parser does not treat V4.1 tags as a tool-call block.
  auto v4 = parse_completion(text, OutputParserOptions{ChatFormat::kV4, false});
  ASSERT_TRUE(v4.is_ok());
  EXPECT_TRUE(v4->tool_calls.empty());
}

TEST(OutputParserTest, StrayThinkEndIsDroppedAndHeldBackTextIsReleasedAtTheEnd) {
  OutputParser p(OutputParserOptions{ChatFormat::kV4, false});
  auto d = p.push("a</think>b\n\n<");
  EXPECT_EQ(d.content, "ab");  // "\n\n<" may start a tool-call block: held back
  auto fin = p.finish();
  ASSERT_TRUE(fin.is_ok());
  EXPECT_EQ(fin->content, "\n\n<");
  EXPECT_EQ(p.message().content, "ab\n\n<");
}

TEST(OutputParserTest, MalformedOrTruncatedToolCallsAreErrors) {
  EXPECT_FALSE(parse_completion("x\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke nam=\"f\">\n", OutputParserOptions{}).is_ok());
  auto truncated = parse_completion("r</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n", thinking_v4());
  EXPECT_FALSE(truncated.is_ok());
  EXPECT_NE(truncated.status().message().find("inside a tool-call block"), std::string_view::npos);
  EXPECT_FALSE(parse_completion("hi<｜end▁of▁sentence｜>more", OutputParserOptions{}).is_ok());
  const std::string bad_flag =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"k\" string=\"maybe\">v";
  EXPECT_FALSE(parse_completion(bad_flag, OutputParserOptions{}).is_ok());
}

TEST(OutputParserTest, DecoderToParserPipelineOnTokenIds) {
  // Token-by-token: detokenize, then parse; the result equals the one-shot parse.
  const Tokenizer& tok = testing::deepseek_tokenizer();
  auto ids = tok.encode(kToolText, SpecialTokenMode::kParse).value();
  IncrementalDecoder dec(tok);
  OutputParser p(thinking_v4());
  for (TokenId id : ids) p.push(dec.push(id).value());
  p.push(dec.flush());
  ASSERT_TRUE(p.finish().is_ok());
  auto whole = parse_completion(kToolText, thinking_v4()).value();
  EXPECT_EQ(p.message().content, whole.content);
  EXPECT_EQ(p.message().tool_calls.size(), 2u);
  EXPECT_EQ(p.message().tool_calls[0].arguments, whole.tool_calls[0].arguments);
}

}  // namespace
}  // namespace deepinfer::tokenizer
