// End-to-end tests of `deepinfer tokenize` / `deepinfer detokenize` (the built binary).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_data.h"

namespace deepinfer::tokenizer {
namespace {

struct RunResult {
  int exit_code;
  std::string output;  // stdout + stderr
};

RunResult run(const std::string& args) {
  std::string cmd = std::string(DI_DEEPINFER_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/" + name + std::to_string(getpid());
}

void write(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

std::vector<std::vector<TokenId>> read_ids(const std::string& path) {
  std::vector<std::vector<TokenId>> out;
  std::istringstream in(testing::read_file(path));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line)["ids"]);
  return out;
}

std::string tokenizer_dir() { return std::string(DI_TEST_DATA_DIR) + "/tokenizer"; }

TEST(CliTest, TokenizeWholeCorpusBothModesMatchesReference) {
  const std::string corpus = testing::data_path("corpus-shared.jsonl");
  for (const char* mode : {"parse", "text"}) {
    std::string out = temp_path(std::string("ids-") + mode);
    auto r = run("tokenize --tokenizer " + tokenizer_dir() + " --special-tokens " + mode + " --input " + corpus +
                 " --output " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto ids = read_ids(out);
    ASSERT_EQ(ids.size(), testing::corpus().size());
    int mismatches = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto& want = std::string(mode) == "parse" ? testing::corpus()[i].ids : testing::corpus()[i].ids_text;
      mismatches += ids[i] != want;
    }
    EXPECT_EQ(mismatches, 0) << mode;
    std::remove(out.c_str());
  }
}

TEST(CliTest, SpecialTokensModeDecidesControlTokens) {
  std::string in = temp_path("user-in");
  write(in, "{\"text\": \"<｜User｜>hi\"}\n");
  auto parse = run("tokenize --tokenizer " + tokenizer_dir() + " --special-tokens parse --input " + in);
  auto text = run("tokenize --tokenizer " + tokenizer_dir() + " --special-tokens text --input " + in);
  ASSERT_EQ(parse.exit_code, 0) << parse.output;
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_EQ(nlohmann::json::parse(parse.output)["ids"][0], 128803);
  auto plain = nlohmann::json::parse(text.output)["ids"];
  for (const auto& id : plain) EXPECT_LT(id.get<int>(), 128000);
  std::remove(in.c_str());
}

TEST(CliTest, InvalidUtf8IsAClearErrorWithLineAndByte) {
  std::string in = temp_path("bad-in");
  write(in, "{\"text\": \"fine\"}\n{\"text\": \"bad \xC3\x28 here\"}\n");
  auto r = run("tokenize --tokenizer " + tokenizer_dir() + " --special-tokens text --input " + in);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(":2: invalid UTF-8 at byte 14 (0xC3)"), std::string::npos) << r.output;
  write(in, "{\"text\": \"lone \\ud800 surrogate\"}\n");
  r = run("tokenize --tokenizer " + tokenizer_dir() + " --special-tokens text --input " + in);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("surrogate"), std::string::npos) << r.output;
  std::remove(in.c_str());
}

TEST(CliTest, DetokenizeRoundTripsAndSkipsSpecials) {
  std::string in = temp_path("ids-in");
  write(in, "{\"ids\": [0, 19923, 128803, 1]}\n");
  auto r = run("detokenize --tokenizer " + tokenizer_dir() + "/tokenizer.json --input " + in);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["text"], "<｜begin▁of▁sentence｜>Hello<｜User｜><｜end▁of▁sentence｜>");
  r = run("detokenize --skip-special-tokens --tokenizer " + tokenizer_dir() + " --input " + in);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["text"], "Hello<｜User｜>");  // <｜User｜> is not special
  write(in, "{\"ids\": [999999]}\n");
  r = run("detokenize --tokenizer " + tokenizer_dir() + " --input " + in);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("unknown token id 999999"), std::string::npos) << r.output;
  std::remove(in.c_str());
}

TEST(CliTest, TokenizerJsonFilePathWorksLikeTheDirectory) {
  std::string in = temp_path("file-path-in");
  write(in, "{\"text\": \"Hello <｜User｜> 中文 12345\"}\n{\"text\": \"x\"}\n");
  auto by_dir = run("tokenize --tokenizer " + tokenizer_dir() + " --special-tokens parse --input " + in);
  auto by_file = run("tokenize --tokenizer " + tokenizer_dir() + "/tokenizer.json --special-tokens parse --input " + in);
  ASSERT_EQ(by_file.exit_code, 0) << by_file.output;
  ASSERT_EQ(by_dir.exit_code, 0) << by_dir.output;
  EXPECT_EQ(by_file.output, by_dir.output);
  auto first = nlohmann::json::parse(by_file.output.substr(0, by_file.output.find('\n')))["ids"];
  EXPECT_NE(std::find(first.begin(), first.end(), 128803), first.end()) << first;  // parse mode applied
  auto missing = run("tokenize --tokenizer " + tokenizer_dir() + "/nope.json --special-tokens parse --input " + in);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("nope.json"), std::string::npos) << missing.output;
  std::remove(in.c_str());
}

// Output line N answers input line N: a blank line is an error naming it, never skipped (which would
// shift every later answer); empty text is {"text": ""} and gets its own (empty) answer.
TEST(CliTest, BlankInputLinesAreAnErrorAndEveryLineGetsOneAnswer) {
  std::string in = temp_path("blank-in");
  write(in, "{\"text\": \"a\"}\n{\"text\": \"\"}\r\n{\"text\": \"b\"}\n");
  auto ok = run("tokenize --tokenizer " + tokenizer_dir() + " --special-tokens text --input " + in);
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  std::istringstream lines(ok.output);
  std::vector<nlohmann::json> outs;
  for (std::string l; std::getline(lines, l);) outs.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[1]["ids"], nlohmann::json::array());
  EXPECT_EQ(outs[0]["ids"].size(), 1u);
  for (const char* blank : {"\n", "   \n", "\r\n", "\t\n"}) {
    write(in, std::string("{\"text\": \"a\"}\n") + blank + "{\"text\": \"b\"}\n");
    auto r = run("tokenize --tokenizer " + tokenizer_dir() + " --special-tokens text --input " + in);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(in + ":2: blank line"), std::string::npos) << r.output;
  }
  write(in, "{\"ids\": [19923]}\n\n");
  auto d = run("detokenize --tokenizer " + tokenizer_dir() + " --input " + in);
  EXPECT_EQ(d.exit_code, 1) << d.output;
  EXPECT_NE(d.output.find(in + ":2: blank line"), std::string::npos) << d.output;
  std::remove(in.c_str());
}

TEST(CliTest, UsageErrorsExitWithTwo) {
  EXPECT_EQ(run("tokenize --tokenizer " + tokenizer_dir()).exit_code, 2);  // --special-tokens missing
  EXPECT_EQ(run("tokenize --tokenizer " + tokenizer_dir() + " --special-tokens maybe").exit_code, 2);
  EXPECT_EQ(run("tokenize --tokenizer /nonexistent --special-tokens text --input /dev/null").exit_code, 1);
}

}  // namespace
}  // namespace deepinfer::tokenizer
