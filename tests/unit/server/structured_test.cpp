// Structured-output fields at the API edge: which constraint a body asks for, one at most, and
// compile errors that come back as invalid-argument (HTTP 400) with the reason.
#include <gtest/gtest.h>

#include <chrono>

#include "server/generation.h"
#include "server/openai_types.h"
#include "server/structured.h"
#include "grammar/matcher.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::server {
namespace {

using Kind = StructuredOutput::Kind;

StructuredOutput chat_constraint(const std::string& body, Status* status = nullptr) {
  ParseError err;
  auto r = parse_chat_request(Json::parse(body), ParseLimits{}, &err);
  if (status) *status = r.is_ok() ? Status::ok() : r.status();
  return r.is_ok() ? r->structured : StructuredOutput{};
}

TEST(StructuredFields, EverySpellingIsRecognised) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_EQ(chat_constraint("{" + msgs + R"(, "response_format": {"type": "json_object"}})").kind, Kind::kJsonObject);
  auto s = chat_constraint("{" + msgs +
                           R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true, "schema": {"type": "integer"}}}})");
  EXPECT_EQ(s.kind, Kind::kJsonSchema);
  EXPECT_EQ(Json::parse(s.spec), Json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(chat_constraint("{" + msgs + R"(, "guided_regex": "a+"})").kind, Kind::kRegex);
  EXPECT_EQ(chat_constraint("{" + msgs + R"(, "regex": "a+"})").spec, "a+");
  EXPECT_EQ(chat_constraint("{" + msgs + R"(, "guided_grammar": "root ::= \"a\""})").kind, Kind::kEbnf);
  EXPECT_EQ(chat_constraint("{" + msgs + R"(, "structured_outputs": {"json": {"type": "string"}}})").kind,
            Kind::kJsonSchema);
  EXPECT_EQ(chat_constraint("{" + msgs + R"(, "json": "{\"type\": \"boolean\"}"})").spec, R"({"type": "boolean"})");
  EXPECT_EQ(chat_constraint("{" + msgs + R"(, "response_format": {"type": "text"}})").kind, Kind::kNone);
  auto c = parse_completion_request(Json::parse(R"({"prompt": "x", "response_format": {"type": "json_object"}})"),
                                    ParseLimits{}, nullptr);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->structured.kind, Kind::kJsonObject);
}

TEST(StructuredFields, ConflictsAndBadTypesAreErrors) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  Status s;
  chat_constraint("{" + msgs + R"(, "regex": "a", "guided_grammar": "root ::= \"a\""})", &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  chat_constraint("{" + msgs + R"(, "regex": "a", "response_format": {"type": "json_object"}})", &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  chat_constraint("{" + msgs + R"(, "regex": 5})", &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  chat_constraint("{" + msgs + R"(, "response_format": {"type": "json_schema"}})", &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

// structured_outputs.whitespace / disable_any_whitespace / key_order, and json_schema.strict.
TEST(StructuredFields, JsonOptionsAndStrict) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::string rf = R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}})";
  auto s = chat_constraint("{" + msgs + ", " + rf + R"(, "structured_outputs": {"whitespace": "compact", "key_order": "any"}})");
  EXPECT_EQ(s.kind, Kind::kJsonSchema);
  EXPECT_EQ(s.whitespace, StructuredOutput::Whitespace::kCompact);
  EXPECT_EQ(s.key_order, StructuredOutput::KeyOrder::kAny);
  EXPECT_TRUE(s.json_options_set);
  EXPECT_FALSE(s.strict);  // strict absent: JSON Schema semantics
  s = chat_constraint("{" + msgs + R"(, "structured_outputs": {"json": {"type": "object"}, "whitespace": "spaced"}})");
  EXPECT_EQ(s.whitespace, StructuredOutput::Whitespace::kSpaced);
  EXPECT_EQ(s.key_order, StructuredOutput::KeyOrder::kSchema);
  EXPECT_TRUE(s.strict);  // guided_json / json: XGrammar's (and vLLM's) default
  s = chat_constraint("{" + msgs + R"(, "json": {"type": "object"}, "structured_outputs": {"disable_any_whitespace": true}})");
  EXPECT_EQ(s.whitespace, StructuredOutput::Whitespace::kCompact);
  s = chat_constraint("{" + msgs + R"(, "json": {"type": "object"}})");
  EXPECT_EQ(s.whitespace, StructuredOutput::Whitespace::kFlexible);
  EXPECT_FALSE(s.json_options_set);
  for (const char* strict : {"true", "false"}) {
    s = chat_constraint("{" + msgs + R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": )" +
                        strict + R"(, "schema": {"type": "object"}}}})");
    EXPECT_EQ(s.strict, std::string(strict) == "true");
  }
  auto c = parse_completion_request(Json::parse(R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema":
    {"strict": true, "schema": {}}}, "structured_outputs": {"whitespace": "compact"}})"), ParseLimits{}, nullptr);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_TRUE(c->structured.strict);
  EXPECT_EQ(c->structured.whitespace, StructuredOutput::Whitespace::kCompact);
  Status st;
  for (const char* bad : {R"("structured_outputs": {"whitespace": "tabs"})", R"("structured_outputs": {"key_order": 1})",
                          R"("structured_outputs": {"disable_any_whitespace": "yes"})",
                          R"("structured_outputs": {"whitespace": "spaced", "disable_any_whitespace": true})",
                          R"("response_format": {"type": "json_schema", "json_schema": {"strict": "yes", "schema": {}}})"}) {
    chat_constraint("{" + msgs + ", " + bad + "}", &st);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
  }
}

// The options reach the grammar: whitespace, key order, strict; JSON options on a regex are an error.
TEST(ConstraintCompiler, JsonOptionsShapeTheGrammar) {
  auto tok = tokenizer::Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b");
  ASSERT_TRUE(tok.is_ok());
  ConstraintCompiler cc(**tok, 1);
  auto accepts = [&](const StructuredOutput& so, const std::string& text) {
    auto g = cc.compile(so);
    EXPECT_TRUE(g.is_ok()) << g.status().to_string();
    if (!g.is_ok()) return false;
    grammar::Matcher m(*g);
    return m.accept_string(text) && m.can_terminate();
  };
  StructuredOutput so{Kind::kJsonSchema, R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})"};
  so.strict = true;
  EXPECT_TRUE(accepts(so, "{ \"a\" :1,\n\"b\": 2}"));  // flexible by default
  so.whitespace = StructuredOutput::Whitespace::kCompact;
  EXPECT_TRUE(accepts(so, R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(so, R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(accepts(so, R"({"b":2,"a":1})"));
  EXPECT_FALSE(accepts(so, R"({"a":1,"c":2})"));  // strict: additionalProperties absent = false
  so.strict = false;
  EXPECT_TRUE(accepts(so, R"({"a":1,"c":2})"));
  so.key_order = StructuredOutput::KeyOrder::kAny;
  EXPECT_TRUE(accepts(so, R"({"b":2,"a":1})"));
  so.whitespace = StructuredOutput::Whitespace::kSpaced;
  EXPECT_TRUE(accepts(so, R"({"b": 2, "a": 1})"));
  EXPECT_FALSE(accepts(so, R"({"b":2,"a":1})"));
  StructuredOutput obj{Kind::kJsonObject, ""};
  obj.whitespace = StructuredOutput::Whitespace::kCompact;
  EXPECT_TRUE(accepts(obj, R"({"x":[1,{"y":null}]})"));
  EXPECT_FALSE(accepts(obj, R"({"x": 1})"));
  StructuredOutput re{Kind::kRegex, "[0-9]+"};
  re.json_options_set = true;
  auto bad = cc.compile(re);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("JSON constraints only"), std::string_view::npos) << bad.status().to_string();
}

TEST(ConstraintCompiler, InvalidConstraintsNameTheProblem) {
  auto tok = tokenizer::Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b");
  ASSERT_TRUE(tok.is_ok());
  ConstraintCompiler cc(**tok, 1);
  EXPECT_TRUE(cc.compile({Kind::kRegex, "[0-9]+"}).is_ok());
  auto bad_schema = cc.compile({Kind::kJsonSchema, R"({"type": "object", "patternProperties": {"a": {}}})"});
  ASSERT_FALSE(bad_schema.is_ok());
  EXPECT_EQ(bad_schema.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_schema.status().message().find("patternProperties"), std::string_view::npos)
      << bad_schema.status().to_string();
  EXPECT_FALSE(cc.compile({Kind::kRegex, "(a"}).is_ok());
  EXPECT_FALSE(cc.compile({Kind::kEbnf, "root ::= undefined_rule"}).is_ok());
  EXPECT_FALSE(cc.compile({Kind::kJsonSchema, "not json"}).is_ok());
}

// At the 129k vocabulary: a long bounded string compiles (its positions share one classification);
// an exponential automaton is refused by the compile budget as a 400, in seconds, not minutes.
TEST(ConstraintCompiler, LongStringsCompileAndExponentialPatternsAreRefused) {
  auto tok = tokenizer::Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + "/tokenizer/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  ConstraintCompiler cc(**tok, *(*tok)->added_token_id(tokenizer::tokens::kEos));
  auto s = cc.compile({Kind::kJsonSchema, R"({"type": "object", "properties": {"note": {"type": "string",
    "maxLength": 2000}}, "required": ["note"]})"});
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_LT((*s)->stats().num_classified_states, (*s)->stats().num_cached_states / 10);
  const auto t0 = std::chrono::steady_clock::now();
  auto bad = cc.compile({Kind::kRegex, ".*a.{12}"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("too complex"), std::string_view::npos) << bad.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60)) << "the budget bounds the time";
}

// The server's grammar budgets (ServerConfig::grammar) reach the compiler: the maxLength 2000
// string that the default budget compiles is refused under a budget of 1M classification steps,
// and a ServerConfig with a zero budget is invalid.
TEST(ConstraintCompiler, ServerGrammarBudgetsReachTheCompiler) {
  auto tok = tokenizer::Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + "/tokenizer/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  grammar::CompilerOptions small;
  small.max_classify_steps = int64_t{1} << 20;
  ConstraintCompiler cc(**tok, *(*tok)->added_token_id(tokenizer::tokens::kEos), small);
  const StructuredOutput long_string{Kind::kJsonSchema, R"({"type": "object", "properties": {"note": {"type": "string",
    "maxLength": 2000}}, "required": ["note"]})"};
  auto s = cc.compile(long_string);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("too complex"), std::string_view::npos) << s.status().to_string();
  EXPECT_TRUE(cc.compile({Kind::kRegex, "yes|no"}).is_ok()) << "small grammars still compile";
  ServerConfig cfg;
  EXPECT_TRUE(cfg.validate().is_ok());
  cfg.grammar.max_classify_steps = 0;
  EXPECT_FALSE(cfg.validate().is_ok());
  cfg = ServerConfig{};
  cfg.grammar.max_cache_bytes = -1;
  EXPECT_FALSE(cfg.validate().is_ok());
}

const char* kOneTool = R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
  "properties": {"q": {"type": "string"}}, "required": ["q"]}}}])";

// The tool-call grammar on both vocabularies: ｜DSML｜ by id (tiny-v4-b) or as text (129k, where
// thinking mode also lets the grammar run the reasoning to </think>, which is not an added token).
TEST(ConstraintCompiler, ToolCallsOnBothTokenizers) {
  const std::string block = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"q\" "
                            "string=\"true\">hi</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  {
    auto tok = tokenizer::Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b");
    ASSERT_TRUE(tok.is_ok());
    ConstraintCompiler cc(**tok, 1);
    ToolCallConstraint c;
    c.tools = Json::parse(kOneTool);
    auto g = cc.compile_tool_calls(c);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_EQ((*g)->machine().special_ids, std::vector<int32_t>{1020});
    grammar::Matcher m(*g);
    EXPECT_FALSE(m.accept_string(block));  // ｜DSML｜ as text is not the token
    c.named = "g";
    auto bad = cc.compile_tool_calls(c);
    ASSERT_FALSE(bad.is_ok());
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    c.named = "";
    c.tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"n": {"type": "number", "multipleOf": 3}}}}}])");
    bad = cc.compile_tool_calls(c);
    ASSERT_FALSE(bad.is_ok());
    EXPECT_NE(bad.status().message().find("multipleOf"), std::string_view::npos) << bad.status().to_string();
    EXPECT_NE(bad.status().message().find("tool 'f'"), std::string_view::npos) << bad.status().to_string();
  }
  {
    auto tok = tokenizer::Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + "/tokenizer/tokenizer.json");
    ASSERT_TRUE(tok.is_ok());
    ASSERT_FALSE((*tok)->added_token_id(tokenizer::tokens::kDsml).has_value());
    ASSERT_FALSE((*tok)->added_token_id(tokenizer::tokens::kThinkEnd).has_value());
    ConstraintCompiler cc(**tok, *(*tok)->added_token_id(tokenizer::tokens::kEos));
    ToolCallConstraint c;
    c.tools = Json::parse(kOneTool);
    auto g = cc.compile_tool_calls(c);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_TRUE((*g)->machine().special_ids.empty());
    grammar::Matcher m(*g);
    EXPECT_TRUE(m.accept_string(block));
    EXPECT_TRUE(m.can_terminate());
    c.after_reasoning = true;
    auto gt = cc.compile_tool_calls(c);
    ASSERT_TRUE(gt.is_ok()) << gt.status().to_string();
    grammar::Matcher mt(*gt);
    EXPECT_TRUE(mt.accept_string("Let me call f.</think>" + block));
    EXPECT_TRUE(mt.can_terminate());
    grammar::Matcher mt2(*gt);
    EXPECT_FALSE(mt2.accept_string(block) && mt2.can_terminate());  // the calls come after </think>
  }
}

// after_reasoning wraps every constraint kind: free reasoning, </think> (the added token where
// there is one, else text), then the constraint.
TEST(ConstraintCompiler, AfterReasoningWrapsEveryKindOnBothTokenizers) {
  struct Case {
    StructuredOutput so;
    std::string answer;
  };
  const std::vector<Case> cases = {{{Kind::kJsonSchema, R"({"type": "array", "items": {"type": "integer"}})"}, "[1, 2]"},
                                   {{Kind::kJsonObject, ""}, R"({"a": "b"})"},
                                   {{Kind::kRegex, "[a-c]{3}"}, "abc"},
                                   {{Kind::kEbnf, R"(root ::= "x" root | "y")"}, "xxy"}};
  const std::string reasoning = "First {[ some thoughts ]} and </thin no end";
  for (const std::string dir : {"/tiny-v4-b", "/tokenizer/tokenizer.json"}) {
    SCOPED_TRACE(dir);
    auto tok = tokenizer::Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + dir);
    ASSERT_TRUE(tok.is_ok());
    const auto think_end = (*tok)->added_token_id(tokenizer::tokens::kThinkEnd);
    ConstraintCompiler cc(**tok, *(*tok)->added_token_id(tokenizer::tokens::kEos));
    for (Case c : cases) {
      c.so.after_reasoning = true;
      auto g = cc.compile(c.so);
      ASSERT_TRUE(g.is_ok()) << g.status().to_string();
      grammar::Matcher m(*g);
      ASSERT_TRUE(m.accept_string(reasoning));
      EXPECT_FALSE(m.can_terminate());
      if (think_end) {
        EXPECT_FALSE(m.accept_string("</think>"));  // the added token, never its text
        ASSERT_TRUE(m.accept_token(*think_end));
      } else {
        ASSERT_TRUE(m.accept_string("</think>"));
      }
      EXPECT_FALSE(m.accept_string("</think>"));  // the constraint applies now
      ASSERT_TRUE(m.accept_string(c.answer)) << c.answer;
      EXPECT_TRUE(m.can_terminate());
      c.so.after_reasoning = false;
      grammar::Matcher plain(cc.compile(c.so).value());
      EXPECT_FALSE(plain.accept_string(reasoning));
    }
  }
}

}  // namespace
}  // namespace deepinfer::server
