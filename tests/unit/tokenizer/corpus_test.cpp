// Exactness against HF tokenizers: every corpus document, both special-token modes, and decode.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_data.h"

namespace deepinfer::tokenizer {
namespace {

using testing::corpus;
using testing::deepseek_tokenizer;

size_t first_diff(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

void check_mode(SpecialTokenMode mode) {
  const Tokenizer& tok = deepseek_tokenizer();
  ASSERT_EQ(corpus().size(), 6560u);
  int failures = 0;
  for (size_t d = 0; d < corpus().size(); ++d) {
    const auto& doc = corpus()[d];
    auto ids = tok.encode(doc.text, mode);
    ASSERT_TRUE(ids.is_ok()) << ids.status().to_string();
    const auto& want = mode == SpecialTokenMode::kParse ? doc.ids : doc.ids_text;
    if (*ids != want && ++failures <= 5) {
      size_t i = first_diff(*ids, want);
      ADD_FAILURE() << "doc " << d << " (" << doc.src << "): first diff at token " << i << " of "
                    << want.size() << ": got " << (i < ids->size() ? (*ids)[i] : -1) << " want "
                    << (i < want.size() ? want[i] : -1);
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(CorpusTest, ParseModeMatchesHf) { check_mode(SpecialTokenMode::kParse); }

TEST(CorpusTest, TextModeMatchesHfWithoutAddedVocabulary) { check_mode(SpecialTokenMode::kText); }

TEST(CorpusTest, DecodeRoundTripsEveryDocument) {
  const Tokenizer& tok = deepseek_tokenizer();
  for (const auto& doc : corpus()) {
    auto parsed = tok.decode(doc.ids);
    ASSERT_TRUE(parsed.is_ok());
    EXPECT_EQ(*parsed, doc.text);
    auto plain = tok.decode(doc.ids_text);
    ASSERT_TRUE(plain.is_ok());
    EXPECT_EQ(*plain, doc.text);
  }
}

TEST(CorpusTest, ModesDifferOnlyWhereAddedTokensAppear) {
  const Tokenizer& tok = deepseek_tokenizer();
  int with_added = 0;
  for (const auto& doc : corpus()) {
    std::vector<TextSegment> segs;
    tok.added_vocabulary().split(doc.text, segs);
    bool has_added = false;
    for (const auto& s : segs) has_added |= s.token_id >= 0;
    with_added += has_added;
    if (has_added) {
      EXPECT_NE(doc.ids, doc.ids_text) << doc.src;
    } else {
      EXPECT_EQ(doc.ids, doc.ids_text) << doc.src;
    }
  }
  EXPECT_GT(with_added, 0) << "the corpus should contain added-token spellings";
}

// The load-time guard: a tokenizer.json that is not DeepSeek's layout is refused with
// kUnsupported and a message that says what differs, never loaded and tokenized differently.
// Each variant changes one thing of a small file (DeepSeek's normalizer, pre-tokenizer and
// decoder, the 259 base tokens without merges, the first three added tokens) that loads as is.
class LoadGuardTest : public ::testing::Test {
 protected:
  static const nlohmann::json& small() {
    static const nlohmann::json j = [] {
      nlohmann::json full = nlohmann::json::parse(testing::read_file(testing::data_path("tokenizer.json")));
      nlohmann::json out = full;
      out["model"]["merges"] = nlohmann::json::array();
      nlohmann::json vocab = nlohmann::json::object();
      for (auto it = full["model"]["vocab"].begin(); it != full["model"]["vocab"].end(); ++it) {
        if (it.value().get<int>() < 259) vocab[it.key()] = it.value();
      }
      out["model"]["vocab"] = vocab;
      out["added_tokens"] = nlohmann::json::array();
      for (int i = 0; i < 3; ++i) out["added_tokens"].push_back(full["added_tokens"][i]);
      return out;
    }();
    return j;
  }
  static Status load(const nlohmann::json& j) {
    auto t = Tokenizer::from_json(j.dump());
    return t.is_ok() ? Status::ok() : t.status();
  }
  static void expect_refused(const nlohmann::json& j, const std::string& what, const std::string& case_name) {
    Status st = load(j);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << case_name << ": " << st.to_string();
    EXPECT_NE(std::string(st.message()).find(what), std::string::npos) << case_name << ": " << st.to_string();
  }
};

TEST_F(LoadGuardTest, TheUnchangedSmallFileLoads) {
  EXPECT_TRUE(load(small()).is_ok()) << load(small()).to_string();
}

TEST_F(LoadGuardTest, OtherPreTokenizerLayoutsAreRefused) {
  using nlohmann::json;
  const json& base = small();
  const json pts = base["pre_tokenizer"]["pretokenizers"];
  std::vector<std::pair<std::string, json>> variants;
  auto with_steps = [&](json steps) {
    json j = base;
    j["pre_tokenizer"]["pretokenizers"] = std::move(steps);
    return j;
  };
  {
    json s = pts;
    s[0]["pattern"]["Regex"] = "\\p{N}";  // digits not cut in runs of three
    variants.emplace_back("pattern 1 changed", with_steps(s));
  }
  {
    json s = pts;
    s[2]["pattern"]["Regex"] = s[2]["pattern"]["Regex"].get<std::string>() + "|x";
    variants.emplace_back("pattern 3 extended", with_steps(s));
  }
  {
    json s = pts;
    std::swap(s[0], s[1]);
    variants.emplace_back("splits reordered", with_steps(s));
  }
  {
    json s = pts;
    s[1]["behavior"] = "Removed";
    variants.emplace_back("behavior Removed", with_steps(s));
  }
  {
    json s = pts;
    s[0]["invert"] = true;
    variants.emplace_back("invert", with_steps(s));
  }
  {
    json s = pts;
    s[0]["pattern"] = {{"String", "\\p{N}{1,3}"}};
    variants.emplace_back("String instead of Regex", with_steps(s));
  }
  {
    json s = pts;
    s[3]["add_prefix_space"] = true;
    variants.emplace_back("ByteLevel add_prefix_space", with_steps(s));
  }
  {
    json s = pts;
    s[3]["use_regex"] = true;
    variants.emplace_back("ByteLevel use_regex (GPT-2 regex)", with_steps(s));
  }
  {
    json s = pts;
    s.erase(s.begin() + 3);
    variants.emplace_back("ByteLevel missing", with_steps(s));
  }
  {
    json s = pts;
    s.push_back(json{{"type", "Digits"}, {"individual_digits", true}});
    variants.emplace_back("extra step", with_steps(s));
  }
  {
    json j = base;
    j["pre_tokenizer"] = pts[3];  // ByteLevel alone
    variants.emplace_back("ByteLevel alone", j);
  }
  {
    json j = base;
    j["pre_tokenizer"] = nullptr;
    variants.emplace_back("null", j);
  }
  {
    json j = base;
    j.erase("pre_tokenizer");
    variants.emplace_back("missing", j);
  }
  for (const auto& [name, j] : variants) expect_refused(j, "not the DeepSeek pre-tokenizer", name);
}

TEST_F(LoadGuardTest, AddedTokenFlagsAreRefused) {
  for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
    nlohmann::json j = small();
    j["added_tokens"].push_back({{"id", 259}, {"content", "<｜User｜>"}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", true}, {"special", false}});
    j["added_tokens"].back()[flag] = true;
    expect_refused(j, std::string("added token \"<｜User｜>\" (id 259) sets ") + flag, flag);
  }
}

TEST_F(LoadGuardTest, OtherNormalizerDecoderAndModelOptionsAreRefused) {
  nlohmann::json j = small();
  j["normalizer"] = {{"type", "NFC"}};
  expect_refused(j, "normalizer must be empty", "normalizer");
  j = small();
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  expect_refused(j, "decoder must be ByteLevel", "decoder");
  j = small();
  j["model"]["byte_fallback"] = true;
  expect_refused(j, "unsupported BPE options", "byte_fallback");
}

}  // namespace
}  // namespace deepinfer::tokenizer
