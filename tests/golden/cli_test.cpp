// The CLI as scripts call it: `deepinfer score` on the fixtures reproduces transformers'
// log-probabilities; `generate` reproduces its greedy continuation; `inspect` reports the
// inventory and state sizes.
#include <gtest/gtest.h>
#include <cstdio>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loader/safetensors.h"
#include "tests/util/checkpoint_writer.h"

namespace deepinfer {
namespace {

// Runs a shell command, its stdout + stderr captured in a file of this process (ctest runs the
// tests of this binary as parallel processes: a shared path would mix their outputs).
int run(const std::string& cmd, std::string* out = nullptr) {
  const std::string path = "/tmp/deepinfer-cli-out-" + std::to_string(::getpid()) + ".txt";
  const std::string full = cmd + " > " + path + " 2>&1";
  const int rc = std::system(full.c_str());
  if (out) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
  }
  std::remove(path.c_str());
  return WEXITSTATUS(rc);
}

template <class T>
std::vector<T> ref_tensor(const std::string& dir, const char* name, Shape* shape = nullptr) {
  auto f = SafetensorsFile::open(dir + "/reference.safetensors");
  const TensorInfo* info = (*f)->find(name);
  if (shape) *shape = info->shape;
  auto s = (*f)->tensor(*info).span<T>();
  return {s.begin(), s.end()};
}

class CliFixture : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return std::string(DI_TEST_DATA_DIR) + "/" + GetParam(); }
};

TEST_P(CliFixture, ScoreMatchesReferenceLogprobs) {
  Shape shape;
  const auto ids = ref_tensor<int32_t>(dir(), "input_ids", &shape);
  const auto lp = ref_tensor<float>(dir(), "logprobs");
  const int64_t B = shape[0], T = shape[1], V = 1024;
  const std::string tmp = testing::temp_dir("cli-score-" + GetParam());
  {
    std::ofstream in(tmp + "/in.jsonl");
    for (int64_t b = 0; b < B; ++b)
      in << nlohmann::json{{"id", "seq" + std::to_string(b)},
                           {"tokens", std::vector<int32_t>(ids.begin() + b * T, ids.begin() + (b + 1) * T)}}
                .dump()
         << "\n";
  }
  std::string log;
  ASSERT_EQ(run(std::string(DI_CLI_PATH) + " score " + dir() + " --input " + tmp + "/in.jsonl --output " + tmp +
                    "/out.jsonl --top-logprobs 5",
                &log),
            0)
      << log;
  std::ifstream out(tmp + "/out.jsonl");
  std::string line;
  int64_t b = 0;
  float worst = 0;
  while (std::getline(out, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["id"], "seq" + std::to_string(b));
    ASSERT_EQ(static_cast<int64_t>(j["token_logprobs"].size()), T);
    ASSERT_EQ(static_cast<int64_t>(j["top_logprobs"].size()), T);
    EXPECT_TRUE(j["token_logprobs"][0].is_null());
    EXPECT_TRUE(j["top_logprobs"][0].is_null());
    for (int64_t t = 1; t < T; ++t) {
      const float* ref = lp.data() + (b * T + t - 1) * V;
      worst = std::max(worst, std::fabs(j["token_logprobs"][t].get<float>() - ref[ids[b * T + t]]));
      const auto& top = j["top_logprobs"][t];
      ASSERT_EQ(top.size(), 5u);
      for (const auto& alt : top) worst = std::max(worst, std::fabs(alt[1].get<float>() - ref[alt[0].get<int>()]));
      // The first alternative is the reference's argmax.
      EXPECT_EQ(top[0][0].get<int64_t>(), std::max_element(ref, ref + V) - ref);
    }
    ++b;
  }
  EXPECT_EQ(b, B);
  EXPECT_LE(worst, 1e-3);
  std::filesystem::remove_all(tmp);
}

TEST_P(CliFixture, GenerateMatchesReferenceGreedy) {
  Shape ps;
  const auto prompt = ref_tensor<int32_t>(dir(), "greedy_prompt", &ps);
  const auto full = ref_tensor<int32_t>(dir(), "greedy_output");
  const std::string tmp = testing::temp_dir("cli-gen-" + GetParam());
  const int64_t n_new = static_cast<int64_t>(full.size() - prompt.size());
  {
    std::ofstream in(tmp + "/in.jsonl");
    in << nlohmann::json{{"id", 7}, {"prompt_tokens", prompt}, {"max_tokens", n_new}, {"temperature", 0}}.dump()
       << "\n";
  }
  std::string log;
  ASSERT_EQ(run(std::string(DI_CLI_PATH) + " generate " + dir() + " --input " + tmp + "/in.jsonl --output " + tmp +
                    "/out.jsonl",
                &log),
            0)
      << log;
  std::ifstream out(tmp + "/out.jsonl");
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["id"], 7);
  const auto toks = j["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(toks, std::vector<int32_t>(full.begin() + prompt.size(), full.end()));
  EXPECT_EQ(j["finish_reason"], toks.size() == static_cast<size_t>(n_new) ? "length" : "stop");
  std::filesystem::remove_all(tmp);
}

TEST_P(CliFixture, InspectReportsInventoryAndState) {
  std::string out;
  ASSERT_EQ(run(std::string(DI_CLI_PATH) + " inspect " + dir() + " --json", &out), 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["config"]["model_type"], "deepseek_v4");
  EXPECT_GT(j["tensors"]["count"].get<int64_t>(), 100);
  EXPECT_EQ(j["tensors"]["by_dtype"]["I64"]["tensors"].get<int64_t>(),
            j["config"]["hash_moe_layers"].get<int64_t>());
  EXPECT_GT(j["state"]["bytes_per_token"].get<double>(), 0.0);
  EXPECT_GT(j["state"]["bytes_per_sequence"].get<int64_t>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CliFixture, ::testing::Values("tiny-v4-a", "tiny-v4-b"));

// `score --reference-rounding` on V4.1 gives the NumPy reference's kv_quant log-probabilities
// (log-softmax of tiny-v41-b's logits_kv_quant); without the flag, the exact ones.
TEST(Cli, ScoreWithReferenceRoundingMatchesKvQuantReference) {
  const std::string dir = std::string(DI_TEST_DATA_DIR) + "/tiny-v41-b";
  Shape shape;
  const auto ids = ref_tensor<int32_t>(dir, "input_ids", &shape);
  const auto q = ref_tensor<float>(dir, "logits_kv_quant");
  const auto exact = ref_tensor<float>(dir, "logprobs");
  const int64_t T = shape[1], V = 1024;
  const std::string tmp = testing::temp_dir("cli-score-rr");
  std::ofstream(tmp + "/in.jsonl") << nlohmann::json{{"id", 0}, {"tokens", std::vector<int32_t>(ids.begin(), ids.begin() + T)}}.dump()
                                   << "\n";
  for (const bool rr : {true, false}) {
    std::string log;
    ASSERT_EQ(run(std::string(DI_CLI_PATH) + " score " + dir + " --input " + tmp + "/in.jsonl --output " + tmp +
                      "/out.jsonl" + (rr ? " --reference-rounding --kv-rounding-only" : ""),
                  &log),
              0)
        << log;
    std::ifstream out(tmp + "/out.jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(out, line));
    const auto j = nlohmann::json::parse(line);
    float worst = 0;
    for (int64_t t = 1; t < T; ++t) {
      double want;
      if (rr) {
        const float* l = q.data() + (t - 1) * V;
        const float mx = *std::max_element(l, l + V);
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(l[v] - mx));
        want = l[ids[t]] - mx - std::log(sum);
      } else {
        want = exact[(t - 1) * V + ids[t]];
      }
      worst = std::max(worst, static_cast<float>(std::fabs(j["token_logprobs"][t].get<double>() - want)));
    }
    EXPECT_LE(worst, 1e-3) << (rr ? "with" : "without") << " --reference-rounding";
  }
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace deepinfer
