// Grammar front ends and matcher on a small vocabulary: accept/reject tables per construct (EBNF,
// regex, JSON Schema), parse errors with line:column, masks against brute force, rollback,
// jump-forward, the compile cache.
#include <gtest/gtest.h>

#include "grammar/ebnf_parser.h"
#include "grammar/json_schema_converter.h"
#include "grammar/regex_converter.h"
#include "tests/unit/grammar/grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

using testing::brute_force_mask;
using testing::full_match;

// Every single byte, some multi-byte pieces JSON and the tables use, and a stop token (last id).
std::shared_ptr<const TokenizerInfo> small_vocab() {
  static std::shared_ptr<const TokenizerInfo> info = [] {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
    for (const char* s : {"true", "false", "null", "{\"", "\":", "\",", "\"}", "\"]", "},", "}]", "ab", "abc",
                          "  ", "\n  ", "12", "123", "-1", ".5", "e+", "hello", " world", "\"a", "a\"", "[{",
                          "\\n", "\\u00", "é", "\xC3", "\xA9", "ba", "aa", "\"\"", "2024", "-0", "00", "\"name",
                          "\": \"", "\", \"", "\"age\":", "xyz", ",\"", "1,", "5}", "[]", "{}", "ab\"}"}) {
      v.push_back(s);
    }
    v.push_back("<eos>");
    auto eos = static_cast<int32_t>(v.size() - 1);
    return TokenizerInfo::from_vocab(std::move(v), {eos}).value();
  }();
  return info;
}

GrammarCompiler& compiler() {
  static GrammarCompiler c(small_vocab());
  return c;
}

struct Case {
  const char* grammar;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

void run_ebnf_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    auto g = compiler().compile_ebnf(c.grammar);
    ASSERT_TRUE(g.is_ok()) << c.grammar << ": " << g.status().to_string();
    for (const std::string& s : c.accept) EXPECT_TRUE(full_match(*g, s)) << c.grammar << " should accept '" << s << "'";
    for (const std::string& s : c.reject) EXPECT_FALSE(full_match(*g, s)) << c.grammar << " should reject '" << s << "'";
  }
}

TEST(GrammarEbnf, AcceptRejectTable) {
  run_ebnf_cases({
      {R"(root ::= "abc")", {"abc"}, {"", "ab", "abcd", "abd"}},
      {R"(root ::= 'single' | "double")", {"single", "double"}, {"singledouble", "'single'"}},
      {R"(root ::= "a" "b" | "c")", {"ab", "c"}, {"a", "ac", "bc"}},
      {R"(root ::= ("a" | "b") "c")", {"ac", "bc"}, {"c", "abc"}},
      {R"(root ::= "x"?)", {"", "x"}, {"xx"}},
      {R"(root ::= "x"*)", {"", "x", "xxxx"}, {"y"}},
      {R"(root ::= "x"+)", {"x", "xxx"}, {""}},
      {R"(root ::= "x"{3})", {"xxx"}, {"xx", "xxxx"}},
      {R"(root ::= "x"{2,})", {"xx", "xxxxx"}, {"x"}},
      {R"(root ::= "x"{1,3})", {"x", "xx", "xxx"}, {"", "xxxx"}},
      {R"(root ::= "x"{0,0} "y")", {"y"}, {"xy"}},
      {R"(root ::= [a-c]+)", {"a", "abcabc"}, {"d", "", "A"}},
      {R"(root ::= [^a-c])", {"d", "é", "\n", "中"}, {"a", "b", "", "dd"}},
      {R"(root ::= [a-cx-z0-9_])", {"a", "y", "5", "_"}, {"d", "-"}},
      {R"(root ::= [\-\]\\])", {"-", "]", "\\"}, {"a"}},
      {R"(root ::= "\x41\u00e9\U0001F600\n\t\"\\")", {"Aé😀\n\t\"\\"}, {"A"}},
      {R"(root ::= [\u4e00-\u9fff]+)", {"中文", "一"}, {"a", "中a"}},
      {R"(root ::= .)", {"a", "é", "😀"}, {"", "ab"}},
      {"# comment\nroot ::= a b # trailing\na ::= \"a\"\nb ::= \"b\" | \"\"\n", {"ab", "a"}, {"b", ""}},
      {"root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= [0-9]+ | list\n",
       {"[]", "[1]", "[1,[2,[]],33]", "[[[[]]]]"}, {"[", "[1,]", "[[]", "1"}},
      {"root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= [0-9]+ | \"(\" expr \")\"\n",
       {"1+2", "(1+2)-3", "((4))"}, {"1+", "(1", "+1"}},
      {"root ::= a\na ::= \"x\" a \"y\" | \"\"\n", {"", "xy", "xxxyyy"}, {"xxy", "yx"}},
  });
}

TEST(GrammarEbnf, ErrorsCarryLineAndColumn) {
  struct Bad {
    const char* text;
    const char* expect;  // substring of the message
  };
  for (const Bad& b : std::vector<Bad>{
           {"root ::= \"abc", "1:10: unterminated string literal"},
           {"root ::= a\n", "1:10: rule 'a' is referenced but not defined"},
           {"root ::= \"a\"\nroot ::= \"b\"", "2:1: rule 'root' is defined twice"},
           {"root ::= (\"a\"", "1:10: unclosed '('"},
           {"root ::= [a-", "unterminated character class"},
           {"root ::= [z-a]", "1:10: character range is out of order"},
           {"root ::= \"\\q\"", "1:11: unknown escape"},
           {"root ::= \"a\"{3,1}", "1:13: bad repetition bounds"},
           {"start ::= \"a\"", "no rule named 'root'"},
           {"root ::= \"a\" )", "1:14: unexpected ')'"},
           {"root ::= root \"a\" | \"b\"", "left-recursive"},
           {"", "empty grammar"},
       }) {
    auto g = compiler().compile_ebnf(b.text);
    ASSERT_FALSE(g.is_ok()) << b.text;
    EXPECT_NE(g.status().message().find(b.expect), std::string_view::npos)
        << b.text << " -> " << g.status().to_string();
  }
}

TEST(GrammarEbnf, PrintParseRoundTrip) {
  const char* text = "root ::= (\"a\" | [b-d\\]]+ x{2,5})? \"\\n\\\"\" y*\nx ::= [^\\x00-\\x1F] | \"é\"\ny ::= \"q\"{3,}\n";
  auto g1 = parse_ebnf(text);
  ASSERT_TRUE(g1.is_ok()) << g1.status().to_string();
  std::string printed = g1->to_ebnf();
  auto g2 = parse_ebnf(printed);
  ASSERT_TRUE(g2.is_ok()) << printed << g2.status().to_string();
  EXPECT_EQ(printed, g2->to_ebnf());
}

TEST(GrammarRegex, AcceptRejectTable) {
  struct R {
    const char* re;
    std::vector<std::string> accept, reject;
  };
  for (const R& c : std::vector<R>{
           {"abc", {"abc"}, {"ab", "xabc"}},
           {"^a+b?$", {"a", "aab"}, {"b", "abb"}},
           {"\\d{3}-\\d{4}", {"555-1234"}, {"5551234", "55-1234"}},
           {"[A-Z][a-z]*", {"Hello", "H"}, {"hello", ""}},
           {"(cat|dog)s?", {"cat", "dogs"}, {"cats dogs", "bird"}},
           {"(?:ab){2,3}", {"abab", "ababab"}, {"ab", "abababab"}},
           {"\\w+@\\w+\\.com", {"me@site.com", "a_1@b.com"}, {"@b.com", "a@b.org"}},
           {"[^\\s]+", {"abc", "é"}, {"a b", "\t"}},
           {"\\s*", {"", " \t\n"}, {"x"}},
           {"a.c", {"abc", "a-c", "aéc"}, {"a\nc", "ac"}},
           {"[\\d.]+", {"3.14", "..."}, {"3,14"}},
           {"\\(\\)\\[\\]\\{\\}\\.\\*", {"()[]{}.*"}, {"()"}},
           {"x{2}y{1,}z{0,2}", {"xxy", "xxyyyzz"}, {"xy", "xxyzzz"}},
           {"(?<year>\\d{4})-(?P<m>\\d\\d)", {"2024-05"}, {"24-05"}},
           {"\\u00e9\\x41\\u{1F600}", {"éA😀"}, {"eA"}},
           {"a|b|", {"a", "b", ""}, {"ab"}},
           {"[a-c-]", {"-", "b"}, {"d"}},
       }) {
    auto g = compiler().compile_regex(c.re);
    ASSERT_TRUE(g.is_ok()) << c.re << ": " << g.status().to_string();
    for (const std::string& s : c.accept) EXPECT_TRUE(full_match(*g, s)) << "/" << c.re << "/ should accept '" << s << "'";
    for (const std::string& s : c.reject) EXPECT_FALSE(full_match(*g, s)) << "/" << c.re << "/ should reject '" << s << "'";
  }
}

TEST(GrammarRegex, UnsupportedConstructsAreErrors) {
  for (const char* re : {"(a)\\1", "(?=a)", "(?!a)", "(?<=a)b", "\\bword", "a^b", "a$b", "\\p{L}", "a++", "(ab", "ab)", "*a"}) {
    auto g = regex_to_grammar(re);
    EXPECT_FALSE(g.is_ok()) << re;
  }
}

struct SchemaCase {
  const char* schema;
  std::vector<std::string> accept, reject;
};

void run_schema_cases(const std::vector<SchemaCase>& cases, JsonSchemaOptions opts) {
  for (const SchemaCase& c : cases) {
    auto g = compiler().compile_json_schema(c.schema, opts);
    ASSERT_TRUE(g.is_ok()) << c.schema << ": " << g.status().to_string();
    for (const std::string& s : c.accept) EXPECT_TRUE(full_match(*g, s)) << c.schema << " should accept " << s;
    for (const std::string& s : c.reject) EXPECT_FALSE(full_match(*g, s)) << c.schema << " should reject " << s;
  }
}

TEST(GrammarJsonSchema, CompactTable) {
  JsonSchemaOptions o;
  o.whitespace = JsonWhitespace::kCompact;
  run_schema_cases(
      {
          {R"({"type":"string"})", {R"("")", R"("a\"b\\c\n\u00e9")", "\"é中\""}, {R"("a)", "\"a\nb\"", R"("\ud800")", "1"}},
          {R"({"type":"integer"})", {"0", "-12", "1234567"}, {"01", "1.5", "-", "+1"}},
          {R"({"type":"number"})", {"0", "-1.5", "2e10", "3.0E-2"}, {".5", "1.", "1e"}},
          {R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}},
          {R"({"type":"null"})", {"null"}, {"nul"}},
          {R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"}},
          {R"({"type":"string","nullable":true})", {"null", R"("x")"}, {"1"}},
          {R"({"enum":["red","green",3,null,{"a":1}]})", {R"("red")", "3", "null", R"({"a":1})"}, {R"("blue")", "4"}},
          {R"({"const":"fixed"})", {R"("fixed")"}, {R"("other")"}},
          {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]})",
           {R"({"a":1})", R"({"a":1,"b":"x"})"}, {R"({})", R"({"b":"x","a":1})", R"({"a":1,"c":2})", R"({"a":1,})"}},
          {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})",
           {"{}", R"({"b":2})", R"({"a":1,"c":3})", R"({"a":1,"b":2,"c":3})"}, {R"({,"b":2})", R"({"c":3,"a":1})"}},
          {R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})",
           {R"({"a":1,"x":true})", R"({"x":false,"y":true})", "{}", R"({"ab":true})"}, {R"({"x":1})", R"({"a":true})"}},
          {R"({"type":"object","additionalProperties":true})", {R"({"k":[1,{"z":null}]})", "{}"}, {"[]"}},
          {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
           {"[1]", "[1,2,3]"}, {"[]", "[1,2,3,4]", "[1,]"}},
          {R"({"type":"array","items":{"type":"integer"}})", {"[]", "[1,2]"}, {"[,]"}},
          {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false,"minItems":1})",
           {R"(["a"])", R"(["a",1])"}, {"[]", R"(["a",1,2])", R"([1])"}},
          {R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"},"minItems":2})",
           {R"(["a",1])", R"(["a",1,2,3])"}, {R"(["a"])", R"(["a","b"])"}},
          {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})", {"5", R"("ab")"}, {R"("abc")"}},
          {R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                        {"properties":{"b":{"type":"integer"}},"required":["b"]}]})",
           {R"({"a":1,"b":2})"}, {R"({"a":1})", R"({"b":2})"}},
          {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"})",
           {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"}, {R"({"v":1,"next":{"v":2}})"}},
          {R"({"type":"string","pattern":"^[a-z]+-\\d+$"})", {R"("abc-12")"}, {R"("abc")", R"("ABC-1")"}},
          {R"({"type":"string","pattern":"a\"b\\\\"})", {R"("a\"b\\")"}, {R"("a"b\")"}},
          {R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("a\nb")", R"("é中文")"}, {R"("a")", R"("abcd")"}},
          {R"({"type":"string","format":"date"})", {R"("2024-02-28")", R"("1999-12-31")"}, {R"("2024-13-01")", R"("2024-02-30")", R"("2024-04-31")"}},
          {R"({"type":"string","format":"date-time"})", {R"("2024-05-01T12:30:00Z")", R"("2024-05-01T23:59:59.123+05:30")"}, {R"("2024-05-01 12:30")"}},
          {R"({"type":"string","format":"email"})", {R"("john.doe@example.com")"}, {R"("john@")", R"("@x.com")"}},
          {R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}},
          {R"({"type":"integer","minimum":-5,"maximum":120})", {"-5", "0", "7", "99", "120"}, {"-6", "121", "200", "-10"}},
          {R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":1000})", {"1", "999"}, {"0", "1000"}},
          {R"({"type":"integer","minimum":18})", {"18", "19", "99", "100", "123456"}, {"17", "9", "0", "-1"}},
          {R"({"type":"integer","maximum":-3})", {"-3", "-40"}, {"-2", "0", "5"}},
          {R"({"type":"number","minimum":0,"maximum":1})", {"0", "0.5", "1", "1.0", "0.999"}, {"1.5", "-0.1", "2", "1.01"}},
          {R"({"type":"number","exclusiveMinimum":0})", {"0.001", "5", "12.5"}, {"0", "0.0", "-1"}},
          {R"({"type":"number","minimum":-10,"exclusiveMaximum":-2})", {"-10", "-2.5", "-3"}, {"-2", "-10.5", "0"}},
      },
      o);
}

TEST(GrammarJsonSchema, FlexibleAndSpacedWhitespace) {
  const char* schema = R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]})";
  JsonSchemaOptions flex;
  run_schema_cases({{schema, {R"({"a":[1,2]})", "{ \"a\" : [ 1 ,\n 2 ] }"}, {" {\"a\":[]}"}}}, flex);
  JsonSchemaOptions spaced;
  spaced.whitespace = JsonWhitespace::kSpaced;
  run_schema_cases({{schema, {R"({"a": [1, 2]})"}, {R"({"a":[1,2]})"}}}, spaced);
}

// key_order "any": the properties present in any order, each at most once, required ones always.
TEST(GrammarJsonSchema, AnyKeyOrderTable) {
  JsonSchemaOptions o;
  o.whitespace = JsonWhitespace::kCompact;
  o.key_order = JsonKeyOrder::kAny;
  const char* abc = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["a","c"]})";
  run_schema_cases(
      {
          {abc,
           {R"({"a":1,"c":true})", R"({"c":true,"a":1})", R"({"b":"x","c":false,"a":2})", R"({"c":true,"b":"","a":3})",
            R"({"a":1,"b":"x","c":true})"},
           {"{}", R"({"a":1})", R"({"c":true,"b":"x"})", R"({"a":1,"a":2,"c":true})", R"({"a":1,"c":true,"c":false})",
            R"({"a":1,"c":true,"d":1})", R"({"c":true,,"a":1})", R"({"a":"x","c":true})"}},
          // Optional only: the empty object too; extra keys (additionalProperties) anywhere.
          {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"additionalProperties":{"type":"null"}})",
           {"{}", R"({"b":2})", R"({"b":2,"a":1})", R"({"x":null,"b":2,"y":null,"a":1})", R"({"x":null})"},
           {R"({"b":2,"b":3})", R"({"x":1})", R"({"a":1,"b":2,"a":3})"}},
      },
      o);
  o.key_order = JsonKeyOrder::kSchema;
  run_schema_cases({{abc, {R"({"a":1,"c":true})", R"({"a":1,"b":"x","c":true})"}, {R"({"c":true,"a":1})"}}}, o);
  // One rule per subset: objects with more than kMaxAnyOrderProperties properties are an error.
  std::string big = R"({"type":"object","properties":{)";
  for (int i = 0; i <= kMaxAnyOrderProperties; ++i) big += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\":{\"type\":\"integer\"}";
  big += "}}";
  o.key_order = JsonKeyOrder::kAny;
  auto g = json_schema_to_grammar(big, o);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("key order 'any'"), std::string_view::npos) << g.status().to_string();
}

// strict: additionalProperties absent = false; not strict: JSON Schema's meaning (any extra key).
TEST(GrammarJsonSchema, StrictDecidesMissingAdditionalProperties) {
  const char* schema = R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})";
  JsonSchemaOptions o;
  o.whitespace = JsonWhitespace::kCompact;
  o.strict = true;
  run_schema_cases({{schema, {R"({"a":1})"}, {R"({"a":1,"b":2})", R"({"a":1,"a2":[true]})"}}}, o);
  o.strict = false;
  run_schema_cases({{schema, {R"({"a":1})", R"({"a":1,"b":2})", R"({"a":1,"a2":[true]})"}, {R"({"b":2})", R"({"a":1,"a":2})"}},
                    {R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false})",
                     {R"({"a":1})", "{}"}, {R"({"a":1,"b":2})"}}},
                   o);
}

// enum / const values are filtered by the keywords beside them; keywords of one type apply to
// values of that type only; minItems alone makes the value an array.
TEST(GrammarJsonSchema, EnumAndConstFollowTheirSiblings) {
  JsonSchemaOptions o;
  o.whitespace = JsonWhitespace::kCompact;
  run_schema_cases(
      {
          {R"({"enum":[1,"a","bb",null],"type":"string"})", {R"("a")", R"("bb")"}, {"1", "null"}},
          {R"({"enum":[1,"a",null],"type":"string","nullable":true})", {R"("a")", "null"}, {"1"}},
          {R"({"enum":["a","bbb","cc"],"maxLength":2})", {R"("a")", R"("cc")"}, {R"("bbb")"}},
          {R"({"enum":[1,5,10,"x"],"minimum":3,"exclusiveMaximum":10})", {"5", R"("x")"}, {"1", "10"}},
          {R"({"enum":[1.5,2,3.0],"type":"integer"})", {"2", "3.0"}, {"1.5"}},
          {R"({"enum":["ab-1","xy","ab-2"],"pattern":"^ab-\\d$"})", {R"("ab-1")", R"("ab-2")"}, {R"("xy")"}},
          {R"({"enum":[[1],[],[1,2,3]],"minItems":1,"maxItems":2})", {"[1]"}, {"[]", "[1,2,3]"}},
          {R"({"enum":[{"a":1},{"b":2},{"a":"x"}],"required":["a"],"properties":{"a":{"type":"integer"}}})",
           {R"({"a":1})"}, {R"({"b":2})", R"({"a":"x"})"}},
          {R"({"enum":[1,"a",true],"anyOf":[{"type":"integer"},{"type":"boolean"}]})", {"1", "true"}, {R"("a")"}},
          {R"({"enum":["a","b"],"const":"b"})", {R"("b")"}, {R"("a")"}},
          {R"({"$defs":{"s":{"type":"string"}},"enum":["a",2],"$ref":"#/$defs/s"})", {R"("a")"}, {"2"}},
          {R"({"minItems":1})", {"[1]", R"(["x",{}])"}, {"[]"}},
          {R"({"maxItems":1,"items":{"type":"integer"}})", {"[]", "[1]"}, {"[1,2]", R"(["x"])"}},
      },
      o);
  struct Bad {
    const char* schema;
    const char* expect;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"({"enum":[1],"type":"string"})", "no 'enum' value satisfies the keywords beside it (value 1 fails 'type')"},
           {R"({"const":"abc","maxLength":2})", "no 'const' value satisfies the keywords beside it (value \"abc\" fails 'maxLength')"},
           {R"({"enum":["2024-01-01"],"format":"date"})", "'enum' together with 'format' is not supported"},
           {R"({"enum":[1],"multipleOf":1})", "unsupported keyword 'multipleOf'"},
       }) {
    auto g = json_schema_to_grammar(b.schema, o);
    ASSERT_FALSE(g.is_ok()) << b.schema;
    EXPECT_NE(g.status().message().find(b.expect), std::string_view::npos) << b.schema << " -> " << g.status().to_string();
  }
}

TEST(GrammarJsonSchema, ErrorsNameTheKeyword) {
  struct Bad {
    const char* schema;
    const char* expect;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"({"type":"object","patternProperties":{"^a":{}}})", "unsupported keyword 'patternProperties'"},
           {R"({"type":"integer","multipleOf":3})", "unsupported keyword 'multipleOf'"},
           {R"({"not":{"type":"string"}})", "unsupported keyword 'not'"},
           {R"({"type":"array","uniqueItems":true})", "unsupported keyword 'uniqueItems'"},
           {R"({"type":"string","format":"ipv6"})", "unsupported format 'ipv6'"},
           {R"({"type":"string","pattern":"(a)\\1"})", "backreferences"},
           {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
           {R"({"$ref":"http://x/y.json"})", "only local $ref"},
           {R"({"type":"integer","minimum":5,"maximum":1})", "range is empty"},
           {R"({"type":"object","properties":{},"required":["a"]})", "required property 'a'"},
           {R"({"type":"object",)", "not valid JSON"},
           {R"({"type":"strin"})", "unknown type 'strin'"},
       }) {
    auto g = json_schema_to_grammar(b.schema);
    ASSERT_FALSE(g.is_ok()) << b.schema;
    EXPECT_NE(g.status().message().find(b.expect), std::string_view::npos) << b.schema << " -> " << g.status().to_string();
  }
}

// The mask (table lookups + uncertain-token walk) equals brute force at every step of random walks.
TEST(GrammarMatcher, MaskEqualsBruteForceOnWalks) {
  JsonSchemaOptions o;
  o.whitespace = JsonWhitespace::kFlexible;
  o.max_whitespace = 2;
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars;
  grammars.push_back(compiler().compile_json_schema(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},"age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"enum":["a","ab","ba"]}}},"required":["name"]})",
      o).value());
  grammars.push_back(compiler().compile_builtin_json(/*object_only=*/false, o).value());
  grammars.push_back(compiler().compile_ebnf("root ::= (\"a\" | \"ab\" | x)+ \"!\"?\nx ::= \"b\" x? \"a\"\n").value());
  grammars.push_back(compiler().compile_regex("(\\d+|[a-c]{2,4}\"?)(,\\s?\\d+)*").value());
  for (size_t gi = 0; gi < grammars.size(); ++gi) {
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      std::mt19937_64 rng(seed * 7919 + gi);
      Matcher m(grammars[gi], /*max_rollback_tokens=*/8);
      std::vector<uint32_t> mask(static_cast<size_t>(small_vocab()->bitmask_words()));
      std::string text;
      for (int step = 0; step < 30 && !m.is_terminated(); ++step) {
        m.fill_next_token_bitmask(mask);
        std::vector<uint32_t> ref = brute_force_mask(m);
        ASSERT_EQ(mask, ref) << "grammar " << gi << " seed " << seed << " step " << step << " after '" << text << "'";
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < small_vocab()->vocab_size(); ++id) {
          if (testing::bit(mask, id)) allowed.push_back(id);
        }
        ASSERT_FALSE(allowed.empty());
        int32_t pick = allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.accept_token(pick));
        text += small_vocab()->token_bytes(pick);
      }
    }
  }
}

TEST(GrammarMatcher, RollbackRestoresState) {
  auto g = compiler().compile_ebnf("root ::= \"{\" [a-z]* \"}\"").value();
  Matcher m(g, /*max_rollback_tokens=*/3);
  const TokenizerInfo& tok = *small_vocab();
  auto id_of = [&](std::string_view s) {
    for (int32_t i = 0; i < tok.vocab_size(); ++i) {
      if (tok.token_bytes(i) == s && tok.is_matchable(i)) return i;
    }
    return -1;
  };
  ASSERT_TRUE(m.accept_token(id_of("{")));
  ASSERT_TRUE(m.accept_token(id_of("ab")));
  EXPECT_FALSE(m.accept_token(id_of("{")));
  ASSERT_TRUE(m.accept_token(id_of("}")));
  EXPECT_TRUE(m.can_terminate());
  ASSERT_TRUE(m.accept_token(tok.stop_ids()[0]));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_TRUE(m.rollback(2));
  EXPECT_FALSE(m.is_terminated());
  EXPECT_FALSE(m.can_terminate());
  EXPECT_TRUE(m.accept_token(id_of("abc")));
  EXPECT_FALSE(m.rollback(3));  // only 3 were kept, 2 undone since
  EXPECT_TRUE(m.rollback(2));    // back to just after "{"
  EXPECT_EQ(m.num_rollback_available(), 0);
  EXPECT_FALSE(m.accept_token(id_of("{")));
  EXPECT_TRUE(m.accept_token(id_of("}")));
}

TEST(GrammarMatcher, JumpForwardAndCompletion) {
  JsonSchemaOptions o;
  o.whitespace = JsonWhitespace::kCompact;
  auto g = compiler().compile_json_schema(
      R"({"type":"object","properties":{"name":{"type":"string"},"kind":{"const":"person"}},"required":["name","kind"]})", o).value();
  Matcher m(g);
  EXPECT_EQ(m.find_jump_forward_string(), "{\"name\":\"");
  ASSERT_TRUE(m.accept_string("{\"name\":\"Al\""));
  EXPECT_EQ(m.find_jump_forward_string(), ",\"kind\":\"person\"}");
  EXPECT_EQ(m.min_completion_bytes(), static_cast<int64_t>(m.find_jump_forward_string().size()));
  EXPECT_FALSE(m.can_terminate());
}

// Stacked and nested quantifiers: `x+` is one copy of x (found by request_fuzz: 100 stacked `+`
// doubled the automaton 100 times), and repetitions nested in repetitions stop at the state
// budget with an error instead of exhausting memory.
TEST(GrammarCompiler, StackedAndNestedRepetitionsStayBounded) {
  const std::string plus = "root ::= \"ab\"" + std::string(200, '+') + " | \"c\"\n";
  auto g = compiler().compile_ebnf(plus);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  for (const char* ok : {"ab", "abab", "ababab", "c"}) EXPECT_TRUE(full_match(*g, ok)) << ok;
  for (const char* bad : {"", "a", "aba", "abc", "cc"}) EXPECT_FALSE(full_match(*g, bad)) << bad;
  auto re = compiler().compile_regex("((((x+)+)+)+)+y");
  ASSERT_TRUE(re.is_ok()) << re.status().to_string();
  EXPECT_TRUE(full_match(*re, "xxxy"));
  EXPECT_FALSE(full_match(*re, "y"));
  for (const char* loop : {"root ::= (\"a\"?)+ \"b\"\n", "root ::= (\"a\"*)+ \"b\"\n", "root ::= (\"a\" | \"\")+ \"b\"\n"}) {
    auto n = compiler().compile_ebnf(loop);  // a nullable body under + (an epsilon cycle)
    ASSERT_TRUE(n.is_ok()) << loop << n.status().to_string();
    for (const char* ok : {"b", "ab", "aaab"}) EXPECT_TRUE(full_match(*n, ok)) << loop << ok;
    EXPECT_FALSE(full_match(*n, "a")) << loop;
  }
  std::string nested = "\"ab\"";
  for (int i = 0; i < 40; ++i) nested = "(" + nested + "){2}";
  auto big = compiler().compile_ebnf("root ::= " + nested + "\n");
  ASSERT_FALSE(big.is_ok()) << "2^40 copies";
  EXPECT_NE(big.status().message().find("too large"), std::string::npos) << big.status().to_string();
  // Found by grammar_fuzz: DFA states that are sets of ~200 NFA states took 13 s to reach the state
  // budget; the construction's own budget stops it in well under a second.
  auto wide = compiler().compile_regex(R"((\\\\name?:/ab|c[^x-z]+|\u{1F601}){133}\.?)");
  ASSERT_FALSE(wide.is_ok());
  EXPECT_NE(wide.status().message().find("construction exceeds its budget"), std::string::npos)
      << wide.status().to_string();
}

TEST(GrammarCompiler, CacheByTextAndTokenizer) {
  GrammarCompiler c(small_vocab());
  auto a = c.compile_ebnf("root ::= \"x\"+").value();
  auto b = c.compile_ebnf("root   ::=   \"x\"+   # same grammar").value();
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(c.cache_hits(), 1);
  auto d = c.compile_ebnf("root ::= \"y\"+").value();
  EXPECT_NE(a.get(), d.get());
  EXPECT_EQ(c.cache_size(), 2u);
  // A different vocabulary gives a different fingerprint.
  auto other = TokenizerInfo::from_vocab({"x", "y", "xx", "<s>"}, {3}).value();
  EXPECT_NE(other->fingerprint(), small_vocab()->fingerprint());
}

}  // namespace
}  // namespace deepinfer::grammar
