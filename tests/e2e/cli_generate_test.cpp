// `deepinfer generate` through the built binary on tiny-v4-b (which has a tokenizer.json): text
// `prompt` lines give the same result as the same prompt as `prompt_tokens` (tokenized by
// `deepinfer tokenize` through the same tokenizer), chat `messages` lines give tokens and text,
// and --target-step-ms (generate and serve) is validated and changes no result.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "tests/util/checkpoint_writer.h"

namespace deepinfer {
namespace {

using namespace deepinfer::testing;
using Json = nlohmann::json;
namespace fs = std::filesystem;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class CliGenerate : public ::testing::Test {
 protected:
  struct Run {
    int exit_code;
    std::string err;
  };
  Run run(const std::string& args) {
    const std::string cmd = quote(DI_CLI_PATH) + " " + args + " > /dev/null 2> " + quote(dir_ / "stderr");
    const int st = std::system(cmd.c_str());
    return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), read_file(dir_ / "stderr")};
  }
  // Runs generate over `lines`; returns the results by id.
  std::map<std::string, Json> generate(const std::vector<Json>& lines, const std::string& extra = "") {
    std::string in;
    for (const Json& l : lines) in += l.dump() + "\n";
    write_file(dir_ / "in.jsonl", in);
    fs::remove(dir_ / "out.jsonl");
    Run r = run("generate " + quote(model_) + " --input " + quote(dir_ / "in.jsonl") + " --output " +
                quote(dir_ / "out.jsonl") + " --threads 2 --no-progress " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, Json> out;
    std::istringstream s(read_file(dir_ / "out.jsonl"));
    for (std::string l; std::getline(s, l);) {
      Json j = Json::parse(l);
      out[j["id"].get<std::string>()] = j;
    }
    return out;
  }
  std::vector<int32_t> tokenize(const std::string& text) {
    write_file(dir_ / "tok_in.jsonl", Json{{"text", text}}.dump() + "\n");
    Run r = run("tokenize --tokenizer " + quote(model_) + " --input " + quote(dir_ / "tok_in.jsonl") + " --output " +
                quote(dir_ / "tok_out.jsonl") + " --special-tokens text");  // as the server encodes text prompts
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Json::parse(read_file(dir_ / "tok_out.jsonl"))["ids"].get<std::vector<int32_t>>();
  }

  TempDir dir_{"cli-generate"};
  const std::string model_ = fixture_dir("tiny-v4-b");
};

const char* kText = "The quick brown fox jumps over the lazy dog. Hello, world!";

Json sampled(Json line) {
  line["max_tokens"] = 12;
  line["temperature"] = 0.8;
  line["top_p"] = 0.9;
  line["seed"] = 11;
  if (line.contains("messages")) {  // the chat API's logprobs shape
    line["logprobs"] = true;
    line["top_logprobs"] = 3;
  } else {
    line["logprobs"] = 3;
  }
  line["ignore_eos"] = true;
  return line;
}

TEST_F(CliGenerate, TextPromptEqualsTheSamePromptAsTokenIds) {
  ASSERT_TRUE(fs::exists(model_ + "/tokenizer.json"));
  const std::vector<int32_t> ids = tokenize(kText);
  ASSERT_GT(ids.size(), 5u);
  auto out = generate({sampled({{"id", "text"}, {"prompt", kText}}), sampled({{"id", "ids"}, {"prompt_tokens", ids}})});
  ASSERT_EQ(out.size(), 2u);
  const Json &text = out["text"], &tok = out["ids"];
  ASSERT_TRUE(text["tokens"].is_array());
  EXPECT_EQ(text["tokens"].size(), 12u);
  ASSERT_TRUE(text["text"].is_string());
  EXPECT_FALSE(text["text"].get<std::string>().empty());
  EXPECT_EQ(text["finish_reason"], "length");
  EXPECT_EQ(text["usage"]["prompt_tokens"], ids.size());
  EXPECT_EQ(text["tokens"], tok["tokens"]);
  EXPECT_EQ(text["text"], tok["text"]);
  ASSERT_TRUE(text.contains("logprobs"));
  EXPECT_EQ(text["logprobs"], tok["logprobs"]);
}

// prompt_logprobs on a generate line equal `deepinfer score` of the same tokens (one forward over
// the whole prompt; the engine runs it in chunks of --max-batch-tokens): the same float bits.
TEST_F(CliGenerate, PromptLogprobsEqualScore) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 70; ++i) ids.push_back(2 + (i * 37) % 1000);
  auto out = generate({{{"id", "p"}, {"prompt_tokens", ids}, {"prompt_logprobs", 2}, {"max_tokens", 2}}}, "--max-batch-tokens 16");
  ASSERT_EQ(out.size(), 1u);
  const Json& pl = out["p"]["prompt_logprobs"];
  ASSERT_EQ(pl.size(), ids.size());
  write_file(dir_ / "score_in.jsonl", Json{{"id", "p"}, {"tokens", ids}}.dump() + "\n");
  Run r = run("score " + quote(model_) + " --input " + quote(dir_ / "score_in.jsonl") + " --output " +
              quote(dir_ / "score_out.jsonl") + " --top-logprobs 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json score = Json::parse(read_file(dir_ / "score_out.jsonl"));
  EXPECT_TRUE(pl[0].is_null());
  for (size_t t = 1; t < ids.size(); ++t) {
    const Json& entry = pl[t];
    const std::string key = std::to_string(ids[t]);
    ASSERT_TRUE(entry.contains(key)) << t;
    EXPECT_EQ(entry[key]["logprob"].get<double>(), score["token_logprobs"][t].get<double>()) << t;
    for (const Json& alt : score["top_logprobs"][t]) {  // [id, logprob]
      const std::string k = std::to_string(alt[0].get<int>());
      ASSERT_TRUE(entry.contains(k)) << t;
      EXPECT_EQ(entry[k]["logprob"].get<double>(), alt[1].get<double>()) << t;
    }
  }
}

TEST_F(CliGenerate, ChatMessagesGiveTokensAndText) {
  const Json messages = Json::array({{{"role", "system"}, {"content", "You are terse."}},
                                     {{"role", "user"}, {"content", kText}}});
  auto out = generate({
      {{"id", "chat"}, {"messages", messages}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}},
      sampled({{"id", "chat-sampled"}, {"messages", messages}}),
      {{"id", "plain"}, {"prompt", "Hi"}, {"max_tokens", 4}},
  });
  ASSERT_EQ(out.size(), 3u);
  const Json& c = out["chat"];
  ASSERT_TRUE(c["tokens"].is_array());
  EXPECT_EQ(c["tokens"].size(), 8u);
  EXPECT_EQ(c["finish_reason"], "length");
  ASSERT_TRUE(c["text"].is_string()) << c.dump();
  EXPECT_FALSE(c["text"].get<std::string>().empty());
  // The chat template wraps the messages: more prompt tokens than the user text alone.
  EXPECT_GT(c["usage"]["prompt_tokens"].get<size_t>(), tokenize(kText).size());
  EXPECT_EQ(c["usage"]["completion_tokens"], 8);
  EXPECT_EQ(out["chat-sampled"]["tokens"].size(), 12u);
  // Greedy chat is reproducible run to run.
  auto again = generate({{{"id", "chat"}, {"messages", messages}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}}});
  EXPECT_EQ(again["chat"]["tokens"], c["tokens"]);
  EXPECT_EQ(again["chat"].value("text", Json()), c.value("text", Json()));
}

TEST_F(CliGenerate, TargetStepMsIsValidatedAndChangesNoResult) {
  const std::vector<Json> lines = {sampled({{"id", "a"}, {"prompt", kText}}), sampled({{"id", "b"}, {"prompt", "Hi"}})};
  auto plain = generate(lines);
  auto targeted = generate(lines, "--target-step-ms 0.001");  // chunks cut to one block per step
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain["a"]["tokens"], targeted["a"]["tokens"]);
  EXPECT_EQ(plain["a"]["logprobs"], targeted["a"]["logprobs"]);
  EXPECT_EQ(plain["b"]["tokens"], targeted["b"]["tokens"]);

  fs::remove(dir_ / "out.jsonl");
  Run r = run("generate " + quote(model_) + " --input " + quote(dir_ / "in.jsonl") + " --output " +
              quote(dir_ / "out.jsonl") + " --target-step-ms -5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << r.err;
  EXPECT_NE(r.err.find("--target-step-ms must be >= 0"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out.jsonl"));

  r = run("serve " + quote(model_) + " --port 0 --target-step-ms -1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--target-step-ms must be >= 0"), std::string::npos) << r.err;
}

// serve's structured-output budgets are validated before anything loads.
TEST_F(CliGenerate, ServeGrammarBudgetsAreValidated) {
  Run r = run("serve " + quote(model_) + " --port 0 --grammar-max-steps 0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("grammar budgets"), std::string::npos) << r.err;
  r = run("serve " + quote(model_) + " --port 0 --grammar-max-states -3");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("grammar budgets"), std::string::npos) << r.err;
  r = run("serve " + quote(model_) + " --port 0 --grammar-cache-mib 0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--grammar-cache-mib must be in"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace deepinfer
