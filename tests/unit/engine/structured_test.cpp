// Structured outputs through the engine: every sample of a constrained request matches its
// grammar (regex, EBNF, JSON Schema), and a grammar_start_token (</think> in thinking mode)
// leaves the tokens before it free; a DSML tool-call grammar (tool_choice required) always yields
// tool calls the output parser reads and whose arguments follow the tool's schema.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "engine/engine.h"
#include "grammar/compiler.h"
#include "grammar/dsml_grammar.h"
#include "tokenizer/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

const std::string kModel = std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b";

class Structured : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = tokenizer::Tokenizer::from_path(kModel);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    tok_ = std::move(t).value().release();
    auto info = grammar::TokenizerInfo::from_tokenizer(*tok_, {1});
    ASSERT_TRUE(info.is_ok());
    compiler_ = new grammar::GrammarCompiler(std::move(info).value());
    EngineOptions o;
    o.threads = 2;
    auto e = make_engine(kModel, o);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    engine_ = std::move(e).value().release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete compiler_;
    delete tok_;
  }

  // Runs n seeded samples; returns each sample's tokens.
  std::vector<std::vector<int32_t>> run(std::shared_ptr<const grammar::CompiledGrammar> g, int n, int64_t max_tokens,
                                        int32_t start_token = -1, std::map<int32_t, float> bias = {}) {
    EngineRequest r;
    r.id = "s" + std::to_string(counter_++);
    r.prompt = {0, 42, 7, 300};
    r.sampling.max_tokens = max_tokens;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 1000 + counter_;
    r.sampling.n = n;
    r.sampling.logit_bias = std::move(bias);
    r.grammar = std::move(g);
    r.grammar_start_token = start_token;
    auto s = engine_->submit(r);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    std::vector<std::vector<int32_t>> out(n);
    for (;;) {
      auto ev = (*s)->next(std::chrono::milliseconds(30000));
      if (!ev) break;
      if (ev->kind == StreamEvent::Kind::kTokens)
        for (const auto& t : ev->tokens) out[ev->sample_index].push_back(t.id);
      if (ev->kind == StreamEvent::Kind::kFinished) EXPECT_EQ(ev->finish_reason, "stop");
    }
    return out;
  }
  std::string text(std::vector<int32_t> ids) {
    if (!ids.empty() && ids.back() == 1) ids.pop_back();  // EOS ends a complete output
    auto t = tok_->decode(ids);
    EXPECT_TRUE(t.is_ok());
    return t.is_ok() ? *t : "";
  }

  static inline tokenizer::Tokenizer* tok_ = nullptr;
  static inline grammar::GrammarCompiler* compiler_ = nullptr;
  static inline EngineClient* engine_ = nullptr;
  static inline int counter_ = 0;
};

TEST_F(Structured, RegexSamplesMatch) {
  auto g = compiler_->compile_regex("[a-c]{2,5}-(x|yz)[0-9]{3}");
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  const std::regex re("[a-c]{2,5}-(x|yz)[0-9]{3}");
  for (const auto& s : run(*g, 6, 64)) EXPECT_TRUE(std::regex_match(text(s), re)) << text(s);
}

TEST_F(Structured, EbnfChoice) {
  auto g = compiler_->compile_ebnf("root ::= (\"red\" | \"green\" | \"blue\") \" \" [0-9]");
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  const std::regex re("(red|green|blue) [0-9]");
  for (const auto& s : run(*g, 6, 32)) EXPECT_TRUE(std::regex_match(text(s), re)) << text(s);
}

TEST_F(Structured, JsonSchemaSamplesValidate) {
  const std::string schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6},
      "age": {"type": "integer", "minimum": 1, "maximum": 99},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
    "required": ["name", "age", "tags"], "additionalProperties": false})";
  grammar::JsonSchemaOptions compact;
  compact.max_whitespace = 0;
  auto g = compiler_->compile_json_schema(schema, compact);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  for (const auto& s : run(*g, 6, 200)) {
    const std::string t = text(s);
    auto j = nlohmann::json::parse(t, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << t;
    EXPECT_EQ(j.size(), 3u) << t;
    ASSERT_TRUE(j["age"].is_number_integer()) << t;
    EXPECT_GE(j["age"].get<int>(), 1);
    EXPECT_LE(j["age"].get<int>(), 99);
    ASSERT_TRUE(j["name"].is_string());
    EXPECT_LE(j["name"].get<std::string>().size(), 6u * 4);  // maxLength counts code points
    ASSERT_TRUE(j["tags"].is_array());
    EXPECT_LE(j["tags"].size(), 3u);
    for (const auto& tag : j["tags"]) EXPECT_TRUE(tag == "a" || tag == "b") << t;
  }
}

TEST_F(Structured, ConstraintStartsAfterTheStartToken) {
  const int32_t think_end = *tok_->added_token_id("</think>");
  auto g = compiler_->compile_regex("[0-9]{4}");
  ASSERT_TRUE(g.is_ok());
  // A strong bias makes </think> the first token; with the constraint active from the start it
  // could never be chosen (added tokens are outside every grammar).
  for (const auto& s : run(*g, 3, 16, think_end, {{think_end, 100.f}})) {
    ASSERT_GE(s.size(), 2u);
    EXPECT_EQ(s[0], think_end);
    EXPECT_TRUE(std::regex_match(text(std::vector<int32_t>(s.begin() + 1, s.end())), std::regex("[0-9]{4}")));
  }
  for (const auto& s : run(*g, 3, 16, -1, {{think_end, 100.f}})) {
    EXPECT_NE(s[0], think_end);
    EXPECT_TRUE(std::regex_match(text(s), std::regex("[0-9]{4}"))) << text(s);
  }
}

// Tools whose parameters are all bounded (a random model would not end free text).
const char* kBoundedTools = R"([
  {"type": "function", "function": {"name": "set_mode", "parameters": {"type": "object", "properties": {
     "mode": {"type": "string", "enum": ["fast", "slow", "auto"]},
     "level": {"type": "integer", "minimum": 0, "maximum": 20},
     "dry_run": {"type": "boolean"}}, "required": ["mode", "level"]}}},
  {"type": "function", "function": {"name": "tag", "parameters": {"type": "object", "properties": {
     "label": {"type": "string", "maxLength": 4},
     "opts": {"type": "object", "properties": {"x": {"enum": [1, 2]}}, "required": ["x"]}},
     "required": ["opts"]}}},
  {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}
])";

// The checks ajv would make for these schemas.
void expect_valid_arguments(const std::string& name, const nlohmann::json& a) {
  ASSERT_TRUE(a.is_object());
  if (name == "set_mode") {
    ASSERT_TRUE(a.contains("mode") && a.contains("level")) << a.dump();
    EXPECT_TRUE(a["mode"] == "fast" || a["mode"] == "slow" || a["mode"] == "auto") << a.dump();
    ASSERT_TRUE(a["level"].is_number_integer()) << a.dump();
    EXPECT_GE(a["level"].get<int>(), 0);
    EXPECT_LE(a["level"].get<int>(), 20);
    if (a.contains("dry_run")) EXPECT_TRUE(a["dry_run"].is_boolean());
    for (auto it = a.begin(); it != a.end(); ++it) EXPECT_TRUE(it.key() == "mode" || it.key() == "level" || it.key() == "dry_run");
  } else if (name == "tag") {
    ASSERT_TRUE(a.contains("opts")) << a.dump();
    EXPECT_TRUE(a["opts"] == nlohmann::json({{"x", 1}}) || a["opts"] == nlohmann::json({{"x", 2}})) << a.dump();
    if (a.contains("label")) {
      ASSERT_TRUE(a["label"].is_string());
      EXPECT_LE(a["label"].get<std::string>().size(), 4u * 4u);
    }
    EXPECT_LE(a.size(), 2u);
  } else {
    EXPECT_EQ(name, "ping");
    EXPECT_TRUE(a.empty()) << a.dump();
  }
}

TEST_F(Structured, RequiredToolCallsParseAndValidate) {
  auto grammar = grammar::dsml_tool_calls_grammar(kBoundedTools);
  ASSERT_TRUE(grammar.is_ok()) << grammar.status().to_string();
  auto g = compiler_->compile(*grammar);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ((*g)->machine().special_ids, std::vector<int32_t>{1020});  // ｜DSML｜ by id
  int calls = 0;
  for (const auto& ids : run(*g, 4, 600)) {
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.back(), 1) << "did not end with EOS";
    EXPECT_NE(std::find(ids.begin(), ids.end(), 1020), ids.end());
    std::string t = text(ids);
    if (std::getenv("DI_SHOW_SAMPLES")) std::cerr << t << "\n----\n";
    auto parsed = tokenizer::parse_completion(t, {});
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string() << "\n" << t;
    EXPECT_TRUE(parsed->content.empty()) << t;
    ASSERT_FALSE(parsed->tool_calls.empty()) << t;
    for (const auto& tc : parsed->tool_calls) {
      auto args = nlohmann::json::parse(tc.arguments, nullptr, false);
      ASSERT_FALSE(args.is_discarded()) << tc.arguments;
      expect_valid_arguments(tc.name, args);
      ++calls;
    }
  }
  EXPECT_GE(calls, 4);
}

}  // namespace
}  // namespace deepinfer
