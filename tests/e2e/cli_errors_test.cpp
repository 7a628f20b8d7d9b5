// `deepinfer score` (and `generate`, `inspect`) on bad inputs, through the built binary: each
// failure exits non-zero with a message on stderr naming the problem, and leaves no output file
// (nor its temporary) behind. One well-formed run first, so a binary that always fails can't pass.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
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

// Rewrites a safetensors file's header through `edit`, keeping its data section byte for byte.
void edit_header(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  edit(h);
  write_file(path, safetensors_blob(h.dump(), bytes.substr(8 + n)));
}

// The same bytes under another shape: the file is self-consistent, only the architecture (from
// config.json) can tell. Linear weights, plain tensors and the hash table each go through it.
TEST_F(CliErrors, WrongShape) {
  const std::pair<const char*, std::vector<int64_t>> cases[] = {
      {"model.layers.1.attn.wq_b.weight", {32, 128}},   // linear [128, 32]
      {"model.layers.1.ffn_norm.weight", {8, 8}},        // norm [64]
      {"model.layers.0.ffn.gate.tid2eid", {2048, 1}},    // I64 [1024, 2]
      {"model.embed_tokens.weight", {512, 128}},         // embedding [1024, 64]
  };
  for (const auto& [name, shape] : cases) {
    const std::string m = model_copy([&, name = name, shape = shape](ModelFolder& f) {
      ASSERT_TRUE(f.tensors.count(name)) << name;
      f.tensors[name].shape = shape;
    });
    expect_failure(score(m, "{\"tokens\": [1, 2]}\n"),
                   {m + "/model.safetensors", std::string("tensor '") + name + "'", "shape", "expected"});
  }
}

// Another dtype of the same byte size (so the header stays self-consistent), and a dtype the
// format does not know.
TEST_F(CliErrors, WrongDtype) {
  const std::pair<const char*, const char*> cases[] = {
      {"model.layers.1.attn.wq_a.weight", "I32"},  // linear weight
      {"model.layers.1.attn.attn_sink", "I32"},    // plain tensor
      {"model.norm.weight", "U32"},
      {"model.layers.0.ffn.gate.tid2eid", "F64"},  // I64 -> a dtype safetensors doesn't define here
  };
  for (const auto& [name, dtype] : cases) {
    const std::string m = model_copy([](ModelFolder&) {});
    edit_header(m + "/model.safetensors", [&, name = name, dtype = dtype](nlohmann::json& h) {
      ASSERT_TRUE(h.contains(name)) << name;
      h[name]["dtype"] = dtype;
    });
    expect_failure(score(m, "{\"tokens\": [1, 2]}\n"),
                   {m + "/model.safetensors", std::string("tensor '") + name + "'", dtype});
  }
}

TEST_F(CliErrors, HeaderDataOffsetsOutOfRange) {
  const std::string t = "model.layers.1.attn.wq_a.weight";
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&, uint64_t data_size)> edit;
    std::vector<std::string> needles;
  };
  const Case cases[] = {
      {"end past the data", [&](nlohmann::json& h, uint64_t n) { h[t]["data_offsets"][1] = n + 4; },
       {"'" + t + "'", "past the end"}},
      {"begin and end far past the data",
       [&](nlohmann::json& h, uint64_t n) { h[t]["data_offsets"] = {n * 4, n * 4 + 32 * 64 * 4}; },
       {"'" + t + "'", "past the end"}},
      {"begin > end",
       [&](nlohmann::json& h, uint64_t) {
         auto& o = h[t]["data_offsets"];
         o = {o[1].get<uint64_t>(), o[0].get<uint64_t>()};
       },
       {"'" + t + "'", "begin > end"}},
      {"negative", [&](nlohmann::json& h, uint64_t) { h[t]["data_offsets"][0] = -8; }, {"'" + t + "'", "data_offsets"}},
      {"shifted onto the next tensor",
       [&](nlohmann::json& h, uint64_t) {
         auto& o = h[t]["data_offsets"];
         o = {o[0].get<uint64_t>() + 4, o[1].get<uint64_t>() + 4};
       },
       {"'" + t + "'", "overlap"}},
      {"size not matching the shape",
       [&](nlohmann::json& h, uint64_t) { h[t]["data_offsets"][1] = h[t]["data_offsets"][1].get<uint64_t>() - 4; },
       {"'" + t + "'", "byte size"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string m = model_copy([](ModelFolder&) {});
    const std::string path = m + "/model.safetensors";
    const std::string bytes = read_file(path);
    uint64_t hn = 0;
    std::memcpy(&hn, bytes.data(), 8);
    const uint64_t data_size = bytes.size() - 8 - hn;
    edit_header(path, [&](nlohmann::json& h) { c.edit(h, data_size); });
    std::vector<std::string> needles = c.needles;
    needles.push_back(path);
    const CliRun r = score(m, "{\"tokens\": [1, 2]}\n");
    expect_failure(r, {});
    for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "'" << n << "' not in: " << r.err;
  }
}

// config.json describes another architecture than the tensors hold: the first tensor whose
// shape or presence disagrees is named, with its file.
TEST_F(CliErrors, ConfigContradictsTheTensors) {
  struct Case {
    const char* key;
    nlohmann::json value;
    std::string tensor, what;
  };
  const Case cases[] = {
      {"hidden_size", 48, "model.embed_tokens.weight", "expected [1024, 48]"},
      {"vocab_size", 1000, "model.embed_tokens.weight", "expected [1000, 64]"},
      {"n_routed_experts", 6, "model.layers.0.ffn.gate.weight", "expected [6, 64]"},
      {"moe_intermediate_size", 16, "model.layers.0.ffn.experts.0.w1.weight", "expected [16, 64]"},
      {"hc_mult", 2, "model.hc_head.hc_fn", "expected [2, 128]"},
      {"q_lora_rank", 16, "model.layers.0.attn.wq_a.weight", "expected [16, 64]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    const std::string m = model_copy([&](ModelFolder& f) { f.config[c.key] = c.value; });
    expect_failure(score(m, "{\"tokens\": [1, 2]}\n"),
                   {m + "/model.safetensors", "tensor '" + c.tensor + "'", "shape", c.what});
  }
  // Fewer layers than the checkpoint holds: the first tensor of the dropped layer is unexpected.
  const std::string fewer = model_copy([](ModelFolder& f) {
    f.config["num_hidden_layers"] = 3;
    for (const char* k : {"layer_types", "mlp_layer_types"}) f.config[k].erase(3);
  });
  expect_failure(score(fewer, "{\"tokens\": [1, 2]}\n"),
                 {fewer + "/model.safetensors", "model.layers.3.", "unexpected"});
  // More layers than it holds: a tensor of layer 4 is missing.
  const std::string more = model_copy([](ModelFolder& f) {
    f.config["num_hidden_layers"] = 5;
    f.config["layer_types"].push_back("sliding_attention");
    f.config["mlp_layer_types"].push_back("moe");
  });
  expect_failure(score(more, "{\"tokens\": [1, 2]}\n"), {"missing tensor", "layers.4."});
}

// Sharded folders: the index points at a shard that is not there, or places a tensor in a shard
// that does not hold it. The message names the shard file and the tensor.
TEST_F(CliErrors, ShardedIndexDisagreesWithTheShards) {
  const ModelFolder f = read_model_dir(fixture_);
  auto sharded = [&](const std::function<void(const std::string&, nlohmann::json&)>& edit) {
    const std::string d = dir_ / ("sharded" + std::to_string(models_++));
    nlohmann::json index = write_sharded_model_dir(d, f.config, split_round_robin(f.tensors, 3));
    edit(d, index);
    write_json_file(d + "/model.safetensors.index.json", index);
    return d;
  };
  // Control: the untouched sharded copy scores.
  {
    const std::string ok = sharded([](const std::string&, nlohmann::json&) {});
    CliRun r = score(ok, "{\"tokens\": [1, 2]}\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    fs::remove(output());
  }
  const std::string moved = "model.layers.2.attn.wo_a.weight";
  // The index names a shard file that does not exist (a name that sorts first, so it is the
  // first problem met).
  const std::string ghost = sharded([&](const std::string&, nlohmann::json& index) {
    index["weight_map"][moved] = "model-00000-of-00003.safetensors";
  });
  expect_failure(score(ghost, "{\"tokens\": [1, 2]}\n"),
                 {ghost + "/model-00000-of-00003.safetensors", "'" + moved + "'", "model.safetensors.index.json"});
  // A shard the index lists has been deleted.
  std::vector<std::string> lost;
  const std::string deleted = sharded([&](const std::string& d, nlohmann::json& index) {
    fs::remove(d + "/" + shard_file_name(1, 3));
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it)
      if (it.value() == shard_file_name(1, 3)) lost.push_back(it.key());
  });
  ASSERT_FALSE(lost.empty());
  const CliRun rd = score(deleted, "{\"tokens\": [1, 2]}\n");
  expect_failure(rd, {deleted + "/" + shard_file_name(1, 3), "model.safetensors.index.json"});
  EXPECT_TRUE(std::any_of(lost.begin(), lost.end(),
                          [&](const std::string& t) { return rd.err.find("'" + t + "'") != std::string::npos; }))
      << "no tensor of the lost shard named: " << rd.err;
  // The index places a tensor in the wrong shard (the file holding it does not list it, the file
  // listed does not hold it).
  std::string from, to;
  const std::string wrong = sharded([&](const std::string&, nlohmann::json& index) {
    from = index["weight_map"][moved].get<std::string>();
    to = from == shard_file_name(0, 3) ? shard_file_name(1, 3) : shard_file_name(0, 3);
    index["weight_map"][moved] = to;
  });
  const CliRun r = score(wrong, "{\"tokens\": [1, 2]}\n");
  expect_failure(r, {"'" + moved + "'", "model.safetensors.index.json"});
  EXPECT_TRUE(r.err.find(wrong + "/" + from) != std::string::npos || r.err.find(wrong + "/" + to) != std::string::npos)
      << r.err;
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

TEST_F(CliErrors, RouteRefusesBadReplicasAndPolicies) {
  expect_failure(run("route --port 0"), {"--replica"});
  expect_failure(run("route --port 0 --replica 10.0.0.1:80"), {"10.0.0.1:80", "http://HOST:PORT"});
  expect_failure(run("route --port 0 --replica http://h:1 --policy random"), {"random", "cache_aware"});
  expect_failure(run("route --port 0 --replica http://h:1 --cache-threshold 2"), {"threshold"});
  expect_failure(run("route --port 0 --replica http://h:1 --health-interval-ms 0"), {"health interval"});
}

// --state-memory-mib / --gpu-memory-utilization (state_memory_flags.h), shared by serve and generate.
TEST_F(CliErrors, ServeAndGenerateRefuseBadStateMemoryFlags) {
  expect_failure(run("serve " + quote(fixture_) + " --port 0 --gpu-memory-utilization 1.5"), {"--gpu-memory-utilization"});
  expect_failure(run("serve " + quote(fixture_) + " --port 0 --gpu-memory-utilization -0.1"), {"--gpu-memory-utilization"});
  expect_failure(run("serve " + quote(fixture_) + " --port 0 --state-memory-mib 0"), {"--state-memory-mib"});
  write_file(input(), "{\"id\": 1, \"prompt_tokens\": [3, 4], \"max_tokens\": 2}\n");
  const std::string gen = "generate " + quote(fixture_) + " --input " + quote(input()) + " --output " + quote(output());
  expect_failure(run(gen + " --gpu-memory-utilization 2"), {"--gpu-memory-utilization"});
  // on the CPU the share has no device to apply to: the run keeps --state-memory-mib and succeeds
  const CliRun ok = run(gen + " --threads 1 --no-progress --state-memory-mib 64 --gpu-memory-utilization 0.9");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.err.find("state capacity stays 64 MiB"), std::string::npos) << ok.err;
  EXPECT_TRUE(fs::exists(output()));
}

}  // namespace
}  // namespace deepinfer
