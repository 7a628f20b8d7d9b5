// Engram's compressed token map derived in C++ (src/model/deepseek_v41/engram_token_map.cpp) against
// the Python derivation (tools/reference/tokenizer_compress.py): bitwise on the tiny V4.1 fixtures'
// maps and on the 128,815-token DeepSeek tokenizer (tests/data/engram/tokenizer-map.json.gz, written by
// tools/reference/make_engram_map_fixture.py), including its tokens where NFD changes the NFKC text,
// where the final-sigma rule applies and where lowercasing is not one-to-one; the normaliser on
// hand cases (expected values printed by Python 3.11's tokenizer_compress.normalize); and the
// loader's rules (derive when the JSON is absent, check it when present).
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/engram_token_map.h"
#include "tests/util/checkpoint_writer.h"

namespace deepinfer {
namespace {

using json = nlohmann::json;
using testing::fixture_dir;
using testing::TempDir;

std::string read_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return {};
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

json read_json_file(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

std::vector<int32_t> ints(const json& a) {
  std::vector<int32_t> v;
  for (const auto& x : a) v.push_back(x.get<int32_t>());
  return v;
}

// Diagnostics for a map mismatch: count and the first few ids with both values and the raw token.
std::string mismatches(const std::vector<int32_t>& want, const std::vector<int32_t>& got, const json& tok) {
  std::map<int64_t, std::string> raw;
  for (const auto& [t, id] : tok["model"]["vocab"].items()) raw[id.get<int64_t>()] = t;
  for (const auto& a : tok["added_tokens"]) raw[a["id"].get<int64_t>()] = a["content"].get<std::string>();
  std::string msg;
  int64_t count = 0;
  for (size_t i = 0; i < std::min(want.size(), got.size()); ++i)
    if (want[i] != got[i] && ++count <= 8)
      msg += "  id " + std::to_string(i) + " '" + raw[static_cast<int64_t>(i)] + "' (normalised '" +
             v41::engram_normalize(raw[static_cast<int64_t>(i)]) + "'): got " + std::to_string(got[i]) + ", want " +
             std::to_string(want[i]) + "\n";
  return std::to_string(count) + " mismatching ids (sizes " + std::to_string(got.size()) + " / " +
         std::to_string(want.size()) + ")\n" + msg;
}

TEST(EngramNormalize, MatchesPythonOnHandCases) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\uFB01le", "file"},                      // NFKC ligature
      {"\u212B", "a"},                           // angstrom sign -> A + ring (NFD), ring stripped
      {"Caf\u00E9", "cafe"},                     // NFD + StripAccents
      {"\u039F\u0394\u039F\u03A3", "\u03BF\u03B4\u03BF\u03C2"},  // final sigma
      {"\u03A3", "\u03C3"},                      // no cased letter before: not final
      {"\u03A3\u03B1", "\u03C3\u03B1"},
      {"\u03B1\u03A3.", "\u03B1\u03C2."},        // '.' is case-ignorable, end follows: final
      {"  \t\n ", " "},                          // a run of spaces -> " " -> U+E000, kept through Strip
      {" ", " "},
      {"  Hello\t\tWorld \n", "hello world"},
      {"\u0130stanbul", "istanbul"},             // NFD splits the dot above, which is stripped
      {"\u2460", "1"},
      {"\uFF71", "\u30A2"},                      // halfwidth katakana
      {"\u304C", "\u304B"},                      // NFD splits the dakuten (Mn), stripped
      {"\u1E9E", "\u00DF"},
      {"x\u000B", "x"},                          // str.strip() removes \v (the regex does not)
      {"\u00A0a\u3000", "a"},
      {"\uE000b", " b"},                         // a literal U+E000 becomes a space after Strip
      {"A\u0301\u0302", "a"},
      {"\u2168", "ix"},
      {"\u00BD", "1\u20442"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(v41::engram_normalize(in), want) << "input '" << in << "'";
}

TEST(EngramTokenMap, EqualsTheTinyFixtureMaps) {
  for (const char* name : {"tiny-v41-a", "tiny-v41-b"}) {
    const std::string dir = fixture_dir(name);
    auto derived = v41::derive_compressed_token_map_file(dir + "/tokenizer.json");
    ASSERT_TRUE(derived.is_ok()) << derived.status().to_string();
    const json stored = read_json_file(dir + "/engram_token_map.json");
    const std::vector<int32_t> want = ints(stored["token_map"]);
    EXPECT_EQ(derived->compressed_vocab, stored["compressed_vocab_size"].get<int64_t>()) << name;
    EXPECT_TRUE(derived->token_map == want) << name << ": "
                                            << mismatches(want, derived->token_map, read_json_file(dir + "/tokenizer.json"));
  }
}

TEST(EngramTokenMap, EqualsPythonOnTheFullDeepSeekTokenizer) {
  const std::string text = read_gzip(std::string(DI_TEST_DATA_DIR) + "/engram/tokenizer-map.json.gz");
  ASSERT_FALSE(text.empty()) << "tests/data/engram/tokenizer-map.json.gz missing or unreadable";
  const json ref = json::parse(text);
  const json tok = read_json_file(std::string(DI_TEST_DATA_DIR) + "/tokenizer/tokenizer.json");
  auto derived = v41::derive_compressed_token_map(tok);
  ASSERT_TRUE(derived.is_ok()) << derived.status().to_string();
  const std::vector<int32_t> want = ints(ref["token_map"]);
  ASSERT_EQ(want.size(), 128815u);
  EXPECT_EQ(derived->compressed_vocab, ref["compressed_vocab_size"].get<int64_t>());
  EXPECT_TRUE(derived->token_map == want) << mismatches(want, derived->token_map, tok);
  // The cases where the steps matter are in the vocabulary, and each matches on its own.
  for (const char* key : {"nfd_differs_ids", "capital_sigma_ids", "full_lowercase_ids"}) {
    const std::vector<int32_t> ids = ints(ref[key]);
    EXPECT_FALSE(ids.empty()) << key;
    int64_t bad = 0;
    for (int32_t i : ids) bad += derived->token_map[static_cast<size_t>(i)] != want[static_cast<size_t>(i)];
    EXPECT_EQ(bad, 0) << key << ": " << bad << " of " << ids.size() << " ids differ";
    std::cout << key << ": " << ids.size() << " tokens, " << bad << " differ\n";
  }
  EXPECT_GT(ints(ref["nfd_differs_ids"]).size(), 1000u);
}

TEST(EngramTokenMap, CompareNamesTheFirstDifferingId) {
  EXPECT_TRUE(v41::compare_token_maps({0, 1, 1}, {0, 1, 1}, "m").is_ok());
  const Status s = v41::compare_token_maps({0, 1, 1, 2}, {0, 1, 2, 3}, "m");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("token id 2 maps to 2, expected 1"), std::string::npos) << s.message();
  const Status n = v41::compare_token_maps({0, 1}, {0}, "m");
  EXPECT_NE(n.message().find("1 entries, expected 2"), std::string::npos) << n.message();
}

class EngramTokenMapLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = fixture_dir("tiny-v41-a");
    auto cfg = v41::V41Config::from_json(read_json_file(fixture_ + "/config.json"), "config.json");
    ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
    cfg_ = std::move(cfg).value();
    want_ = ints(read_json_file(fixture_ + "/engram_token_map.json")["token_map"]);
  }
  std::string folder(bool tokenizer, bool map, const std::vector<int32_t>* map_values = nullptr) {
    dirs_.push_back(std::make_unique<TempDir>("engram-map"));
    const std::string d = dirs_.back()->path;
    if (tokenizer) std::filesystem::copy_file(fixture_ + "/tokenizer.json", d + "/tokenizer.json");
    if (map) {
      json j;
      j["token_map"] = map_values ? *map_values : want_;
      std::ofstream(d + "/engram_token_map.json") << j.dump();
    }
    return d;
  }
  std::string fixture_;
  v41::V41Config cfg_;
  std::vector<int32_t> want_;
  std::vector<std::unique_ptr<TempDir>> dirs_;
};

TEST_F(EngramTokenMapLoad, DerivesWhenTheJsonIsAbsent) {
  auto m = v41::load_token_map(folder(true, false), cfg_);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_TRUE(*m == want_);
}

TEST_F(EngramTokenMapLoad, ChecksThePresentJson) {
  auto ok = v41::load_token_map(folder(true, true), cfg_);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_TRUE(*ok == want_);
  std::vector<int32_t> bad = want_;
  bad[700] = bad[700] == 0 ? 1 : 0;
  auto m = v41::load_token_map(folder(true, true, &bad), cfg_);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("token id 700 maps to"), std::string::npos) << m.status().to_string();
}

TEST_F(EngramTokenMapLoad, JsonAloneIsTakenAsGivenAndNeitherIsAnError) {
  auto m = v41::load_token_map(folder(false, true), cfg_);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_TRUE(*m == want_);
  auto none = v41::load_token_map(folder(false, false), cfg_);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("tokenizer.json"), std::string::npos) << none.status().to_string();
}

TEST_F(EngramTokenMapLoad, CompressedVocabSizeMustMatchTheConfig) {
  cfg_.engram_compressed_vocab += 1;
  auto m = v41::load_token_map(folder(true, false), cfg_);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("engram_compressed_vocab_size"), std::string::npos) << m.status().to_string();
}

}  // namespace
}  // namespace deepinfer
