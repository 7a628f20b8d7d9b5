// Checkpoint: a Hugging Face model folder as published: config.json plus either one
// model.safetensors or shards listed in model.safetensors.index.json. Every shard is mapped and
// validated; the index must agree with the shards (a tensor listed but absent, or present but not
// listed, is an error naming both). Immutable after open().
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "loader/safetensors.h"

namespace deepinfer {

struct CheckpointTensor {
  const SafetensorsFile* file;
  const TensorInfo* info;
};

class Checkpoint {
 public:
  /// Opens `dir`. With `require_weights` false, a folder holding only config.json is accepted
  /// (used by `inspect` on configs alone).
  static Result<Checkpoint> open(const std::string& dir, bool require_weights = true);
  /// Reads and parses a JSON file; errors name the file.
  static Result<nlohmann::json> read_json(const std::string& path);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  const std::vector<CheckpointTensor>& tensors() const { return tensors_; }
  const std::vector<std::shared_ptr<const SafetensorsFile>>& files() const { return files_; }
  bool has_file(const std::string& name) const;

 private:
  std::string dir_;
  nlohmann::json config_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::vector<CheckpointTensor> tensors_;
};

}  // namespace deepinfer
