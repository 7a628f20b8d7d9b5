// Real-world JSON schemas (tests/data/grammar/schemas.json) with DeepSeek's 129k-token tokenizer:
// random walks over the allowed tokens always terminate, every output parses as JSON, and an
// independent validator (ajv + ajv-formats, tests/js/validate_with_ajv.mjs) accepts every output.
// Also: the mask equals brute force on the real vocabulary (multi-byte and partial-UTF-8 tokens).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "grammar/json_schema_converter.h"
#include "tests/unit/grammar/grammar_test_util.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

const std::string kDataDir = DI_TEST_DATA_DIR;

std::shared_ptr<const TokenizerInfo> deepseek_vocab() {
  static std::shared_ptr<const TokenizerInfo> info = [] {
    auto tok = tokenizer::Tokenizer::from_path(kDataDir + "/tokenizer/tokenizer.json");
    DI_CHECK(tok.is_ok());
    return TokenizerInfo::from_tokenizer(**tok).value();
  }();
  return info;
}

GrammarCompiler& compiler() {
  static GrammarCompiler c(deepseek_vocab());
  return c;
}

struct NamedSchema {
  std::string name;
  std::string schema;
};

std::vector<NamedSchema> load_schemas() {
  std::ifstream in(kDataDir + "/grammar/schemas.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<NamedSchema> out;
  try {
    for (const auto& e : nlohmann::ordered_json::parse(ss.str())) {
      out.push_back({e.at("name").get<std::string>(), e.at("schema").dump()});
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "schemas.json: " << e.what();
  }
  return out;
}

TEST(GrammarJsonSchemaWalk, OutputsTerminateAndValidateWithAjv) {
  std::vector<NamedSchema> schemas = load_schemas();
  ASSERT_GE(schemas.size(), 15u);
  std::filesystem::path out_path = std::filesystem::path(::testing::TempDir()) / "grammar_walk_outputs.jsonl";
  std::ofstream out(out_path);
  int64_t num_outputs = 0;
  for (const NamedSchema& s : schemas) {
    for (JsonWhitespace ws : {JsonWhitespace::kCompact, JsonWhitespace::kFlexible}) {
      JsonSchemaOptions opts;
      opts.whitespace = ws;
      opts.max_whitespace = 4;
      auto g = compiler().compile_json_schema(s.schema, opts);
      ASSERT_TRUE(g.is_ok()) << s.name << ": " << g.status().to_string();
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        testing::WalkResult r = testing::random_walk(*g, seed * 1000003 + static_cast<uint64_t>(ws), /*budget=*/30);
        ASSERT_TRUE(r.terminated) << s.name << " seed " << seed << ": " << r.text;
        bool parses = nlohmann::json::accept(r.text);
        EXPECT_TRUE(parses) << s.name << ": not JSON: " << r.text;
        try {
          out << nlohmann::json{{"name", s.name}, {"output", r.text}}.dump() << "\n";
          ++num_outputs;
        } catch (const std::exception& e) {
          ADD_FAILURE() << s.name << ": output is not UTF-8: " << e.what();
        }
      }
    }
  }
  out.close();
  ASSERT_GT(num_outputs, 0);
  // Independent validation. Fails (never skips) when node or ajv is missing.
  std::string js_dir = kDataDir + "/../js";
  std::string cmd = "node " + js_dir + "/validate_with_ajv.mjs " + kDataDir + "/grammar/schemas.json " +
                    out_path.string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  ASSERT_NE(rc, -1) << "could not run: " << cmd;
  int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  ASSERT_NE(code, 127) << "node is not installed (needed for ajv validation): " << cmd;
  ASSERT_NE(code, 2) << "ajv is not installed: run `npm ci --prefix tests/js` (" << cmd << ")";
  ASSERT_EQ(code, 0) << "ajv rejected outputs (see above); outputs in " << out_path;
}

TEST(GrammarJsonSchemaWalk, MaskEqualsBruteForceOnRealVocabulary) {
  std::vector<NamedSchema> schemas = load_schemas();
  for (const char* name : {"person", "tree", "event"}) {
    auto it = std::find_if(schemas.begin(), schemas.end(), [&](const NamedSchema& s) { return s.name == name; });
    ASSERT_NE(it, schemas.end());
    auto g = compiler().compile_json_schema(it->schema).value();
    Matcher m(g, /*max_rollback_tokens=*/4);
    std::mt19937_64 rng(42);
    std::vector<uint32_t> mask(static_cast<size_t>(g->tokenizer().bitmask_words()));
    for (int step = 0; step < 4; ++step) {
      m.fill_next_token_bitmask(mask);
      ASSERT_EQ(mask, testing::brute_force_mask(m)) << name << " step " << step;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < g->tokenizer().vocab_size(); ++id) {
        if (testing::bit(mask, id)) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
    }
  }
}

TEST(GrammarJsonSchemaWalk, SpecialTokensAreMaskedAndStopNeedsCompletion) {
  auto g = compiler().compile_builtin_json(/*object_only=*/true).value();
  const TokenizerInfo& tok = g->tokenizer();
  Matcher m(g);
  std::vector<uint32_t> mask(static_cast<size_t>(tok.bitmask_words()));
  m.fill_next_token_bitmask(mask);
  EXPECT_FALSE(testing::bit(mask, 0));                  // <｜begin▁of▁sentence｜>
  EXPECT_FALSE(testing::bit(mask, tok.stop_ids()[0]));  // not complete yet
  ASSERT_TRUE(m.accept_string("{\"a\": [1, true]}"));
  m.fill_next_token_bitmask(mask);
  EXPECT_TRUE(testing::bit(mask, tok.stop_ids()[0]));
  EXPECT_TRUE(m.accept_token(tok.stop_ids()[0]));
  EXPECT_TRUE(m.is_terminated());
}

}  // namespace
}  // namespace deepinfer::grammar
