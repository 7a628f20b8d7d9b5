// Checkpoint::open on model folders: single file and sharded (model.safetensors.index.json).
// A fixture split into shards gives bitwise the fixture's logits; an index that disagrees with
// its shards, and every other broken folder, is an error naming the files and the tensor.
#include <gtest/gtest.h>

#include <filesystem>

#include "loader/checkpoint.h"
#include "tests/util/checkpoint_writer.h"
#include "tests/util/v4_logits.h"

namespace deepinfer {
namespace {

using namespace deepinfer::testing;

std::string msg_of(const Result<Checkpoint>& r) { return std::string(r.status().message()); }

#define EXPECT_HAS(msg, needle) EXPECT_NE((msg).find(needle), std::string::npos) << "'" << (needle) << "' not in: " << (msg)

class ShardedTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ShardedTest, ShardsGiveBitwiseTheSingleFileLogits) {
  const std::string src = fixture_dir(GetParam());
  ModelFolder f = read_model_dir(src);
  ASSERT_FALSE(f.tensors.empty());
  const auto tokens = test_tokens(f.config["vocab_size"].get<int64_t>());
  auto ref = v4_logits(src, tokens);
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  for (int n : {2, 3}) {
    TempDir dir("sharded");
    write_sharded_model_dir(dir.path, f.config, split_round_robin(f.tensors, n));
    ASSERT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
    auto ck = Checkpoint::open(dir.path);
    ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
    EXPECT_EQ(ck->files().size(), static_cast<size_t>(n));
    EXPECT_EQ(ck->tensors().size(), f.tensors.size());
    auto got = v4_logits(dir.path, tokens);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_TRUE(bitwise_equal(*ref, *got)) << n << " shards, max diff " << max_abs_diff(*ref, *got);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ShardedTest, ::testing::Values("tiny-v4-a", "tiny-v4-b"));

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = {{"model_type", "deepseek_v4"}};
    shards_.resize(2);
    shards_[0]["a.weight"] = f32_tensor({2}, {1, 2});
    shards_[0]["b.weight"] = f32_tensor({1}, {3});
    shards_[1]["c.weight"] = f32_tensor({3}, {4, 5, 6});
  }
  std::string index_path() const { return dir_ / "model.safetensors.index.json"; }
  std::string shard(int i) const { return dir_ / shard_file_name(i, 2); }
  nlohmann::json write() { return write_sharded_model_dir(dir_.path, config_, shards_); }

  TempDir dir_{"checkpoint"};
  nlohmann::json config_;
  std::vector<TensorMap> shards_;
};

TEST_F(CheckpointTest, ShardedOpens) {
  write();
  auto ck = Checkpoint::open(dir_.path);
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->tensors().size(), 3u);
  EXPECT_EQ(ck->config()["model_type"], "deepseek_v4");
  for (const auto& t : ck->tensors()) {
    const bool first = t.info->name != "c.weight";
    EXPECT_EQ(t.file->path(), shard(first ? 0 : 1)) << t.info->name;
  }
}

TEST_F(CheckpointTest, IndexListsATensorAbsentFromItsShard) {
  nlohmann::json index = write();
  index["weight_map"]["ghost.weight"] = shard_file_name(1, 2);
  write_json_file(index_path(), index);
  auto ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  const std::string m = msg_of(ck);
  EXPECT_HAS(m, shard(1));
  EXPECT_HAS(m, "'ghost.weight'");
  EXPECT_HAS(m, "model.safetensors.index.json");
  EXPECT_HAS(m, "absent");
}

TEST_F(CheckpointTest, IndexPointsATensorAtTheWrongShard) {
  nlohmann::json index = write();
  index["weight_map"]["c.weight"] = shard_file_name(0, 2);  // it lives in shard 2
  write_json_file(index_path(), index);
  auto ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  const std::string m = msg_of(ck);
  EXPECT_HAS(m, "'c.weight'");
  EXPECT_HAS(m, "model.safetensors.index.json");
}

TEST_F(CheckpointTest, ShardHoldsAnUnlistedTensor) {
  nlohmann::json index = write();
  index["weight_map"].erase("b.weight");
  write_json_file(index_path(), index);
  auto ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  const std::string m = msg_of(ck);
  EXPECT_HAS(m, shard(0));
  EXPECT_HAS(m, "'b.weight'");
  EXPECT_HAS(m, "not listed");
  EXPECT_HAS(m, "model.safetensors.index.json");
}

TEST_F(CheckpointTest, SameTensorInTwoShards) {
  shards_[1]["a.weight"] = f32_tensor({2}, {1, 2});
  nlohmann::json index = write();  // the index keeps the last shard for a.weight
  auto ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), "'a.weight'");
}

TEST_F(CheckpointTest, IndexNamesAMissingShard) {
  write();
  std::filesystem::remove(shard(1));
  auto ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), shard(1));
}

TEST_F(CheckpointTest, BrokenShardIsNamed) {
  write();
  std::string bytes = read_file(shard(0));
  write_file(shard(0), bytes.substr(0, bytes.size() - 3));
  auto ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), shard(0));
  EXPECT_HAS(msg_of(ck), "'b.weight'");
}

TEST_F(CheckpointTest, MalformedIndex) {
  write();
  write_file(index_path(), "{\"weight_map\": ");
  auto ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), index_path());
  EXPECT_HAS(msg_of(ck), "invalid JSON");

  write_json_file(index_path(), {{"metadata", {}}});
  ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), "weight_map");

  write_json_file(index_path(), {{"weight_map", {{"a.weight", 3}}}});
  ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), "'a.weight'");

  write_json_file(index_path(), {{"weight_map", {{"a.weight", "../outside.safetensors"}}}});
  ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), "not a plain file name");

  write_json_file(index_path(), {{"weight_map", {{"a.weight", ".."}}}});
  ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
}

TEST_F(CheckpointTest, EmptyWeightMapIsAnError) {
  write();
  write_json_file(index_path(), {{"weight_map", nlohmann::json::object()}});
  for (bool require : {false, true}) {
    auto ck = Checkpoint::open(dir_.path, require);
    ASSERT_FALSE(ck.is_ok());
    EXPECT_HAS(msg_of(ck), index_path());
    EXPECT_HAS(msg_of(ck), "lists no tensors");
  }
}

TEST_F(CheckpointTest, ConfigProblems) {
  auto ck = Checkpoint::open(dir_ / "nowhere");
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), "nowhere");

  write_model_dir(dir_.path, config_, shards_[0]);
  std::filesystem::remove(dir_ / "config.json");
  ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), "config.json");

  write_file(dir_ / "config.json", "{\"model_type\": \"deepseek_v4\",");
  ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), dir_ / "config.json");
  EXPECT_HAS(msg_of(ck), "invalid JSON");

  write_file(dir_ / "config.json", "[1]");
  ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), "config.json");
}

TEST_F(CheckpointTest, NoWeights) {
  write_json_file(dir_ / "config.json", config_);
  auto ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), "model.safetensors");
  auto cfg_only = Checkpoint::open(dir_.path, /*require_weights=*/false);
  ASSERT_TRUE(cfg_only.is_ok()) << cfg_only.status().to_string();
  EXPECT_TRUE(cfg_only->tensors().empty());
  EXPECT_TRUE(cfg_only->has_file("config.json"));
  EXPECT_FALSE(cfg_only->has_file("model.safetensors"));
}

TEST_F(CheckpointTest, SingleFileMalformedIsNamed) {
  write_json_file(dir_ / "config.json", config_);
  write_file(dir_ / "model.safetensors", "tiny");
  auto ck = Checkpoint::open(dir_.path);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_HAS(msg_of(ck), dir_ / "model.safetensors");
}

}  // namespace
}  // namespace deepinfer
