// Structured-output fields at the API edge: which constraint a body asks for, one at most, and
// compile errors that come back as invalid-argument (HTTP 400) with the reason.
#include <gtest/gtest.h>

#include "server/openai_types.h"
#include "server/structured.h"

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

}  // namespace
}  // namespace deepinfer::server
