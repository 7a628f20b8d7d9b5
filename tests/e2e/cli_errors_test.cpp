// `deepinfer score` (and `generate`, `inspect`) on bad inputs, through the built binary: each
// failure exits non-zero with a message on stderr naming the problem, and leaves no output file
// (nor its temporary) behind. One well-formed run first, so a binary that always fails can't pass.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <functional>

#include "tests/util/checkpoint_writer.h"

namespace deepinfer {
namespace {

using namespace deepinfer::testing;
namespace fs = std::filesystem;

struct CliRun {
  int exit_code;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class CliErrors : public ::testing::Test {
 protected:
  CliRun run(const std::string& args) {
    const std::string cmd = quote(DI_CLI_PATH) + " " + args + " > " + quote(dir_ / "stdout") + " 2> " +
                            quote(dir_ / "stderr");
    const int st = std::system(cmd.c_str());
    return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), read_file(dir_ / "stdout"), read_file(dir_ / "stderr")};
  }
  CliRun score(const std::string& model, const std::string& input_text, bool write_input = true) {
    if (write_input) write_file(input(), input_text);
    return run("score " + quote(model) + " --input " + quote(input()) + " --output " + quote(output()) +
               " --threads 1");
  }
  std::string input() const { return dir_ / "in.jsonl"; }
  std::string output() const { return dir_ / "out.jsonl"; }
  void expect_failure(const CliRun& r, std::initializer_list<std::string> needles) {
    EXPECT_NE(r.exit_code, 0) << "stderr: " << r.err;
    EXPECT_LT(r.exit_code, 128) << "killed by a signal (crash?): " << r.err;
    EXPECT_FALSE(r.err.empty());
    for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "'" << n << "' not in stderr: " << r.err;
    EXPECT_FALSE(fs::exists(output())) << "output file left behind";
    EXPECT_FALSE(fs::exists(output() + ".tmp")) << "temporary output left behind";
  }
  std::string model_copy(const std::function<void(ModelFolder&)>& edit) {
    ModelFolder f = read_model_dir(fixture_dir("tiny-v4-a"));
    edit(f);
    const std::string d = dir_ / ("model" + std::to_string(models_++));
    f.write(d);
    return d;
  }

  TempDir dir_{"cli-errors"};
  int models_ = 0;
  const std::string fixture_ = fixture_dir("tiny-v4-a");
};

TEST_F(CliErrors, WellFormedRunSucceeds) {
  CliRun r = score(fixture_, "{\"id\": \"x\", \"tokens\": [0, 5, 17, 3]}\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(output()));
  auto j = nlohmann::json::parse(read_file(output()));
  EXPECT_EQ(j["id"], "x");
  EXPECT_EQ(j["token_logprobs"].size(), 4u);
  EXPECT_TRUE(j["token_logprobs"][0].is_null());
  EXPECT_FALSE(fs::exists(output() + ".tmp"));
}

TEST_F(CliErrors, MalformedCheckpoint) {
  const std::string m = model_copy([](ModelFolder&) {});
  const std::string st = read_file(m + "/model.safetensors");
  write_file(m + "/model.safetensors", st.substr(0, st.size() / 2));
  expect_failure(score(m, "{\"tokens\": [1, 2]}\n"), {"model.safetensors", "truncated"});
  write_file(m + "/model.safetensors", "abc");
  expect_failure(score(m, "{\"tokens\": [1, 2]}\n"), {"model.safetensors", "too short"});
  write_file(m + "/model.safetensors", safetensors_blob("{nope", ""));
  expect_failure(score(m, "{\"tokens\": [1, 2]}\n"), {"model.safetensors", "JSON"});
}

TEST_F(CliErrors, MissingAndExtraTensors) {
  const std::string missing = model_copy([](ModelFolder& f) { f.tensors.erase("model.layers.2.attn.wo_a.weight"); });
  expect_failure(score(missing, "{\"tokens\": [1, 2]}\n"), {"missing tensor", "layers.2.attn.wo_a.weight"});
  const std::string extra = model_copy([](ModelFolder& f) { f.tensors["model.layers.0.stray"] = f32_tensor({1}, {0}); });
  expect_failure(score(extra, "{\"tokens\": [1, 2]}\n"), {"model.layers.0.stray", "unexpected"});
}

TEST_F(CliErrors, UnknownModelType) {
  const std::string m = model_copy([](ModelFolder& f) { f.config["model_type"] = "llama"; });
  expect_failure(score(m, "{\"tokens\": [1, 2]}\n"), {"config.json", "model_type 'llama'"});
  expect_failure(run("inspect " + quote(m)), {"model_type 'llama'"});
}

TEST_F(CliErrors, MissingModelFolder) {
  expect_failure(score(dir_ / "no-such-model", "{\"tokens\": [1, 2]}\n"), {"no-such-model"});
}

TEST_F(CliErrors, TokenIdAtOrBeyondVocab) {
  expect_failure(score(fixture_, "{\"tokens\": [1, 2]}\n{\"tokens\": [3, 1024, 4]}\n"),
                 {"in.jsonl:2", "token id 1024", "vocab"});
  expect_failure(score(fixture_, "{\"tokens\": [5000000000]}\n"), {"in.jsonl:1", "5000000000"});
  expect_failure(score(fixture_, "{\"tokens\": [-1]}\n"), {"in.jsonl:1", "-1"});
}

TEST_F(CliErrors, EmptyTokenList) {
  expect_failure(score(fixture_, "{\"id\": 1, \"tokens\": []}\n"), {"in.jsonl:1", "'tokens'", "empty"});
}

TEST_F(CliErrors, EmptyInputFile) {
  expect_failure(score(fixture_, ""), {"in.jsonl", "no input"});
  expect_failure(score(fixture_, "\n  \n"), {"in.jsonl", "no input"});
}

TEST_F(CliErrors, InvalidJsonLine) {
  expect_failure(score(fixture_, "{\"tokens\": [1, 2]}\n{\"tokens\": [1, 2\n"), {"in.jsonl:2", "invalid JSON"});
  expect_failure(score(fixture_, "[1, 2, 3]\n"), {"in.jsonl:1", "JSON object"});
  expect_failure(score(fixture_, "{\"tokens\": \"1 2\"}\n"), {"in.jsonl:1", "'tokens'"});
  expect_failure(score(fixture_, "{\"tokens\": [1, 2.5]}\n"), {"in.jsonl:1", "non-integer"});
  expect_failure(score(fixture_, "{\"id\": 3}\n"), {"in.jsonl:1", "'tokens'"});
}

TEST_F(CliErrors, MissingInputFile) {
  fs::remove(input());
  expect_failure(score(fixture_, "", /*write_input=*/false), {"in.jsonl", "cannot open"});
}

TEST_F(CliErrors, UnwritableOutput) {
  write_file(input(), "{\"tokens\": [1, 2]}\n");
  CliRun r = run("score " + quote(fixture_) + " --input " + quote(input()) + " --output " +
              quote(dir_ / "no-such-dir/out.jsonl"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no-such-dir/out.jsonl"), std::string::npos) << r.err;
}

TEST_F(CliErrors, GenerateSharesTheChecks) {
  write_file(input(), "{\"id\": 1, \"prompt_tokens\": [], \"max_tokens\": 2}\n");
  expect_failure(run("generate " + quote(fixture_) + " --input " + quote(input()) + " --output " + quote(output())),
                 {"in.jsonl:1", "empty"});
  write_file(input(), "{\"id\": 1, \"prompt_tokens\": [2000], \"max_tokens\": 2}\n");
  expect_failure(run("generate " + quote(fixture_) + " --input " + quote(input()) + " --output " + quote(output())),
                 {"2000"});
  const std::string m = model_copy([](ModelFolder& f) { f.config["model_type"] = "qwen2"; });
  write_file(input(), "{\"id\": 1, \"prompt_tokens\": [3], \"max_tokens\": 2}\n");
  expect_failure(run("generate " + quote(m) + " --input " + quote(input()) + " --output " + quote(output())),
                 {"model_type 'qwen2'"});
}

}  // namespace
}  // namespace deepinfer
