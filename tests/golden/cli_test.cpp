// The CLI as scripts call it: `deepinfer score` on the fixtures reproduces transformers'
// log-probabilities; `generate` reproduces its greedy continuation; `inspect` reports the
// inventory and state sizes.
#include <gtest/gtest.h>
#include <cstdio>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
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

// Every figure `inspect --json` reports, computed here from the files themselves: the tensor
// inventory from the safetensors header read as raw JSON, the state sizes from config.json by
// V4-MODEL.md section 4 (in f32, the engine's state dtype).
TEST_P(CliFixture, InspectReportsInventoryAndState) {
  std::string out;
  ASSERT_EQ(run(std::string(DI_CLI_PATH) + " inspect " + dir() + " --json", &out), 0) << out;
  auto j = nlohmann::json::parse(out);

  // Inventory: parse the header ourselves (8-byte little-endian length, then JSON).
  const std::string st = testing::read_file(dir() + "/model.safetensors");
  ASSERT_GE(st.size(), 8u);
  uint64_t header_len = 0;
  std::memcpy(&header_len, st.data(), 8);
  const auto header = nlohmann::json::parse(st.substr(8, header_len));
  struct Inv {
    int64_t tensors = 0;
    uint64_t bytes = 0, params = 0;
  };
  std::map<std::string, Inv> by_dtype;
  Inv total;
  bool has_mtp = false;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string dtype = it.value()["dtype"];
    // These fixtures hold unpacked F32 weights and I64 hash tables only: one parameter per element.
    ASSERT_TRUE(dtype == "F32" || dtype == "I64") << it.key() << " " << dtype;
    uint64_t numel = 1;
    for (const auto& d : it.value()["shape"]) numel *= d.get<uint64_t>();
    const uint64_t bytes = it.value()["data_offsets"][1].get<uint64_t>() - it.value()["data_offsets"][0].get<uint64_t>();
    EXPECT_EQ(bytes, numel * (dtype == "F32" ? 4 : 8)) << it.key();
    for (Inv* e : {&by_dtype[dtype], &total}) {
      e->tensors++;
      e->bytes += bytes;
      e->params += numel;
    }
    has_mtp |= it.key().find("mtp.") != std::string::npos;
  }
  EXPECT_EQ(total.bytes, st.size() - 8 - header_len);  // the tensors tile the data section
  if (GetParam() == "tiny-v4-a") {
    // Pinned, so a change in both the files and the counting can't go unnoticed.
    EXPECT_EQ(total.tensors, 210);
    EXPECT_EQ(by_dtype["I64"].tensors, 1);
    EXPECT_EQ(by_dtype["I64"].params, 2048u);  // tid2eid [1024, 2]
  }
  EXPECT_EQ(j["tensors"]["count"].get<int64_t>(), total.tensors);
  EXPECT_EQ(j["tensors"]["bytes"].get<uint64_t>(), total.bytes);
  EXPECT_EQ(j["tensors"]["parameters"].get<uint64_t>(), total.params);
  ASSERT_EQ(j["tensors"]["by_dtype"].size(), by_dtype.size()) << j["tensors"]["by_dtype"].dump();
  for (const auto& [dt, e] : by_dtype) {
    SCOPED_TRACE(dt);
    const auto& r = j["tensors"]["by_dtype"][dt];
    EXPECT_EQ(r["tensors"].get<int64_t>(), e.tensors);
    EXPECT_EQ(r["bytes"].get<uint64_t>(), e.bytes);
    EXPECT_EQ(r["parameters"].get<uint64_t>(), e.params);
  }

  // Config summary and state, from config.json (transformers spelling, as in the fixtures).
  const auto cfg = testing::read_json_file(dir() + "/config.json");
  const int64_t L = cfg["num_hidden_layers"], hd = cfg["head_dim"], ihd = cfg["index_head_dim"];
  const int64_t window = cfg["sliding_window"];
  const int64_t r_csa = cfg["compress_rates"]["compressed_sparse_attention"];
  const int64_t r_hca = cfg["compress_rates"]["heavily_compressed_attention"];
  int64_t n_swa = 0, n_csa = 0, n_hca = 0, n_hash = 0;
  for (const auto& t : cfg["layer_types"]) {
    n_swa += t == "sliding_attention";
    n_csa += t == "compressed_sparse_attention";
    n_hca += t == "heavily_compressed_attention";
  }
  for (const auto& t : cfg["mlp_layer_types"]) n_hash += t == "hash_moe";
  ASSERT_EQ(n_swa + n_csa + n_hca, L);
  EXPECT_EQ(j["config"]["model_type"], "deepseek_v4");
  EXPECT_EQ(j["config"]["layers"].get<int64_t>(), L);
  EXPECT_EQ(j["config"]["sliding_layers"].get<int64_t>(), n_swa);
  EXPECT_EQ(j["config"]["csa_layers"].get<int64_t>(), n_csa);
  EXPECT_EQ(j["config"]["hca_layers"].get<int64_t>(), n_hca);
  EXPECT_EQ(j["config"]["hash_moe_layers"].get<int64_t>(), n_hash);
  EXPECT_EQ(j["tensors"]["by_dtype"]["I64"]["tensors"].get<int64_t>(), n_hash);  // one tid2eid per hash layer
  EXPECT_EQ(j["config"]["mtp_head"].get<bool>(), has_mtp);
  ASSERT_FALSE(has_mtp);  // the formulas below have no MTP ring

  // V4-MODEL.md section 4, f32 (4 bytes) rows:
  //  per token: each CSA layer stores one compressed K=V entry (head_dim) and one indexer key
  //    (index_head_dim) per r_csa tokens; each HCA layer one entry per r_hca tokens; SWA nothing.
  //  per sequence: every layer's window ring (window x head_dim), plus each compressor's partial
  //    window state, kv and gate/score: HCA r x head_dim each; CSA the open window r x 2 x width
  //    (both overlap halves) plus the previous window's overlap half r x width (the reference
  //    keeps 2r x 2 x width; the other half of the previous window is never read again), for the
  //    main compressor (width head_dim) and the indexer's (width index_head_dim).
  const double per_token = n_csa * 4.0 * static_cast<double>(hd + ihd) / static_cast<double>(r_csa) +
                           n_hca * 4.0 * static_cast<double>(hd) / static_cast<double>(r_hca);
  auto csa_partial = [&](int64_t width) { return 2 * (r_csa * 2 * width + r_csa * width) * 4; };
  const int64_t per_seq = L * window * hd * 4 + n_csa * (csa_partial(hd) + csa_partial(ihd)) +
                          n_hca * 2 * r_hca * hd * 4;
  if (GetParam() == "tiny-v4-a") {
    EXPECT_DOUBLE_EQ(per_token, 104.0);  // 2 CSA x (32 + 16) x 4 / 4 + 1 HCA x 32 x 4 / 16
    EXPECT_EQ(per_seq, 17408);           // 4096 rings + 2 x (3072 + 1536) CSA + 4096 HCA
  }
  EXPECT_DOUBLE_EQ(j["state"]["bytes_per_token"].get<double>(), per_token);
  EXPECT_EQ(j["state"]["bytes_per_sequence"].get<int64_t>(), per_seq);
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
