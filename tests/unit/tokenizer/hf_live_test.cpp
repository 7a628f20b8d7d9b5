// Live reference: runs HF tokenizers itself (npm @anush008/tokenizers, the Rust crate through
// napi; tests/js/hf_tokenize.mjs) on freshly generated inputs and compares the ids with ours in
// both modes: parse (the tokenizer.json as is) and text (the same file with "added_tokens": []).
// Never skips: a missing node binary or npm package is a failure (install: npm ci --prefix tests/js).
// DI_TOKENIZER_SEED / DI_TOKENIZER_LIVE_DOCS override the seed and the number of documents.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/tokenizer/test_data.h"
#include "tests/unit/tokenizer/text_gen.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode_class.h"

namespace deepinfer::tokenizer {
namespace {

using testing::data_path;
using testing::deepseek_tokenizer;

uint64_t env_u64(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : def;
}

std::string escaped(const std::string& s) {
  std::string out = nlohmann::json(s).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);  // ASCII, \uXXXX
  return out.size() > 400 ? out.substr(0, 400) + "..." : out;
}

// The ids around the first difference, with their bytes.
std::string first_difference(const Tokenizer& tok, const std::vector<TokenId>& hf, const std::vector<TokenId>& ours) {
  size_t k = 0;
  while (k < hf.size() && k < ours.size() && hf[k] == ours[k]) ++k;
  auto show = [&](const std::vector<TokenId>& v) {
    std::string ids, text;
    for (size_t i = k >= 3 ? k - 3 : 0; i < v.size() && i < k + 6; ++i) {
      ids += std::to_string(v[i]) + " ";
      text += tok.token_bytes(v[i]);
    }
    return ids + escaped(std::string(text));
  };
  return "first difference at token " + std::to_string(k) + "\n  hf:   " + show(hf) + "\n  ours: " + show(ours);
}

TEST(HfLiveTest, GeneratedInputsGiveHfIdsInBothModes) {
  // HF tokenizers' Oniguruma classifies code points per Unicode 16.0; a table built from the
  // utf8proc fallback (Unicode 15.0) must not pass unnoticed.
  EXPECT_STREQ(char_class_unicode_version(), "16.0.0")
      << "the tokenizer was built with " << char_class_unicode_source()
      << "; run `npm ci --prefix tests/js` and reconfigure (DI_UNICODE16)";
  const Tokenizer& tok = deepseek_tokenizer();
  const uint64_t seed = env_u64("DI_TOKENIZER_SEED", 20261202);
  const size_t num_docs = env_u64("DI_TOKENIZER_LIVE_DOCS", 3000);
  std::vector<std::string> specials;
  for (const auto& t : tok.added_vocabulary().tokens()) specials.push_back(t.content);
  testing::TextGenerator gen(seed, specials);
  std::vector<std::string> docs;
  for (size_t i = 0; i < num_docs; ++i) docs.push_back(gen.next(i % 100 == 0 ? 2000 : 60));

  const auto dir = std::filesystem::temp_directory_path() /
                   ("di_hf_live_" + std::to_string(::getpid()) + "_" + std::to_string(seed));
  std::filesystem::create_directories(dir);
  const auto in_path = dir / "in.jsonl", out_path = dir / "out.jsonl";
  {
    std::ofstream in(in_path, std::ios::binary);
    for (const auto& d : docs) in << nlohmann::json{{"text", d}}.dump() << "\n";
  }
  const std::string cmd = std::string("\"") + DI_NODE_BIN + "\" \"" + DI_HF_TOKENIZE_SCRIPT + "\" ids \"" +
                          data_path("tokenizer.json") + "\" \"" + in_path.string() + "\" \"" + out_path.string() + "\"";
  const int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << "the HF reference failed (node: " << DI_NODE_BIN << "); command: " << cmd
                   << "\nInstall it with: npm ci --prefix tests/js";

  std::ifstream out(out_path);
  std::vector<nlohmann::json> ref;
  for (std::string line; std::getline(out, line);) ref.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(ref.size(), docs.size());

  size_t bad = 0, bytes = 0, tokens = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    bytes += docs[i].size();
    for (auto [mode, key] : {std::pair{SpecialTokenMode::kParse, "ids"}, std::pair{SpecialTokenMode::kText, "ids_text"}}) {
      auto ours = tok.encode(docs[i], mode);
      ASSERT_TRUE(ours.is_ok()) << ours.status().to_string();
      const auto hf = ref[i][key].get<std::vector<TokenId>>();
      tokens += hf.size();
      if (*ours != hf && ++bad <= 10) {
        ADD_FAILURE() << "doc " << i << " (seed " << seed << ", mode " << key << "): " << escaped(docs[i])
                      << "\n" << first_difference(tok, hf, *ours);
      }
      auto back = tok.decode(*ours);
      ASSERT_TRUE(back.is_ok());
      EXPECT_EQ(*back, docs[i]) << "decode round trip, doc " << i;
    }
  }
  EXPECT_EQ(bad, 0u) << bad << " mismatches; Unicode tables: " << char_class_unicode_version();
  std::printf("HF live: %zu docs, %zu bytes, %zu reference tokens, seed %llu, Unicode %s, %zu mismatches\n",
              docs.size(), bytes, tokens, static_cast<unsigned long long>(seed), char_class_unicode_version(), bad);
  std::filesystem::remove_all(dir);
}

// Our pre-tokenizer's pieces against HF's own (the three Split regexes through HF's Oniguruma:
// `hf_tokenize.mjs pieces`, tokenizer.json's pre_tokenizer without its ByteLevel step) on generated
// documents plus a probe record around every 61st Unicode scalar value (TOKENIZER.md's probe shape).
TEST(HfLiveTest, PreTokenizerPiecesEqualHfPreTokenizer) {
  const uint64_t seed = env_u64("DI_TOKENIZER_SEED", 20261202) ^ 0x9e3779b97f4a7c15ull;
  const size_t num_docs = env_u64("DI_TOKENIZER_LIVE_DOCS", 3000);
  std::vector<std::string> specials;
  for (const auto& t : deepseek_tokenizer().added_vocabulary().tokens()) specials.push_back(t.content);
  testing::TextGenerator gen(seed, specials);
  std::vector<std::string> docs;
  for (size_t i = 0; i < num_docs; ++i) docs.push_back(gen.next(i % 100 == 0 ? 2000 : 60));
  auto utf8 = [](char32_t cp) {
    std::string o;
    if (cp < 0x80) {
      o += static_cast<char>(cp);
    } else if (cp < 0x800) {
      o += static_cast<char>(0xC0 | (cp >> 6)), o += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      o += static_cast<char>(0xE0 | (cp >> 12)), o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      o += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      o += static_cast<char>(0xF0 | (cp >> 18)), o += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), o += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return o;
  };
  for (char32_t cp = 0; cp < 0x110000; cp += 61) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string c = utf8(cp);
    docs.push_back("x" + c + "x " + c + c + " ." + c + "\n" + c + " 1" + c + "中" + c + "!");
  }
  docs.push_back(std::string(5000, ' ') + "x\n \n\t \r\n" + std::string(3001, '7') + "\xE3\x80\x80\xE3\x80\x80y");

  const auto dir = std::filesystem::temp_directory_path() / ("di_hf_pieces_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto in_path = dir / "in.jsonl", out_path = dir / "out.jsonl";
  {
    std::ofstream in(in_path, std::ios::binary);
    for (const auto& d : docs) in << nlohmann::json{{"text", d}}.dump() << "\n";
  }
  const std::string cmd = std::string("\"") + DI_NODE_BIN + "\" \"" + DI_HF_TOKENIZE_SCRIPT + "\" pieces \"" +
                          data_path("tokenizer.json") + "\" \"" + in_path.string() + "\" \"" + out_path.string() + "\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "the HF reference failed (node: " << DI_NODE_BIN << "); command: " << cmd
                                         << "\nInstall it with: npm ci --prefix tests/js";
  std::ifstream out(out_path);
  std::vector<std::vector<uint32_t>> ref;
  for (std::string line; std::getline(out, line);) ref.push_back(nlohmann::json::parse(line)["pieces"].get<std::vector<uint32_t>>());
  ASSERT_EQ(ref.size(), docs.size());

  PreTokenizer pre;
  std::vector<Piece> pieces;
  size_t bad = 0, total = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    pre.split(docs[i], pieces);
    std::vector<uint32_t> ours;
    for (const Piece& p : pieces) ours.push_back(p.end - p.begin);
    total += ref[i].size();
    if (ours != ref[i] && ++bad <= 10) {
      size_t k = 0, off = 0;
      while (k < ours.size() && k < ref[i].size() && ours[k] == ref[i][k]) off += ours[k++];
      ADD_FAILURE() << "doc " << i << ": " << escaped(docs[i]) << "\n  first different piece " << k << " at byte " << off
                    << ": hf " << (k < ref[i].size() ? escaped(docs[i].substr(off, ref[i][k])) : "(none)") << ", ours "
                    << (k < ours.size() ? escaped(docs[i].substr(off, ours[k])) : "(none)");
    }
  }
  EXPECT_EQ(bad, 0u) << bad << " of " << docs.size() << " documents split differently";
  std::printf("HF pre-tokenizer: %zu docs, %zu pieces, %zu differ\n", docs.size(), total, bad);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer::tokenizer
