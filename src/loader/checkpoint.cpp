#include "loader/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

namespace deepinfer {

namespace fs = std::filesystem;

Result<nlohmann::json> Checkpoint::read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    return Status::invalid_argument(path + ": invalid JSON: " + e.what());
  }
}

bool Checkpoint::has_file(const std::string& name) const {
  std::error_code ec;
  return fs::exists(fs::path(dir_) / name, ec);
}

Result<Checkpoint> Checkpoint::open(const std::string& dir, bool require_weights) {
  Checkpoint ck;
  ck.dir_ = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::not_found(dir + ": not a model folder");
  DI_ASSIGN_OR_RETURN(ck.config_, read_json((fs::path(dir) / "config.json").string()));
  if (!ck.config_.is_object()) return Status::invalid_argument(dir + "/config.json: not a JSON object");

  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  if (fs::exists(index_path, ec)) {
    DI_ASSIGN_OR_RETURN(nlohmann::json index, read_json(index_path.string()));
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      return Status::invalid_argument(index_path.string() + ": missing object 'weight_map'");
    std::map<std::string, std::vector<std::string>> by_shard;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        return Status::invalid_argument(index_path.string() + ": weight_map['" + it.key() + "'] is not a file name");
      const std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos || shard == "..")
        return Status::invalid_argument(index_path.string() + ": shard name '" + shard + "' is not a plain file name");
      by_shard[shard].push_back(it.key());
    }
    if (by_shard.empty()) return Status::invalid_argument(index_path.string() + ": 'weight_map' lists no tensors");
    if (!require_weights && !fs::exists(fs::path(dir) / by_shard.begin()->first, ec)) return ck;
    for (const auto& [shard, names] : by_shard) {
      auto opened = SafetensorsFile::open((fs::path(dir) / shard).string());
      if (!opened.is_ok()) {
        // Name the index and a tensor it places there: a shard that is missing or unreadable is
        // found through the index, and the tensor says which part of the model is lost.
        const std::string more = names.size() > 1 ? " and " + std::to_string(names.size() - 1) + " more" : "";
        return Status(opened.status().code(),
                      std::string(opened.status().message()) + " (" + index_path.string() + " lists tensor '" +
                          names.front() + "'" + more + " in shard '" + shard + "')");
      }
      auto file = std::move(opened).value();
      for (const auto& name : names)
        if (!file->find(name))
          return Status::data_loss(file->path() + ": tensor '" + name + "' is listed in " +
                                   index_path.filename().string() + " but absent from the shard");
      std::unordered_map<std::string, bool> listed;
      for (const auto& name : names) listed[name] = true;
      for (const auto& t : file->tensors())
        if (!listed.count(t.name))
          return Status::data_loss(file->path() + ": tensor '" + t.name + "' is not listed for this shard in " +
                                   index_path.filename().string());
      ck.files_.push_back(std::move(file));
    }
  } else if (fs::exists(single_path, ec)) {
    DI_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(single_path.string()));
    ck.files_.push_back(std::move(file));
  } else if (require_weights) {
    return Status::not_found(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const auto& f : ck.files_)
    for (const auto& t : f->tensors()) ck.tensors_.push_back({f.get(), &t});
  return ck;
}

}  // namespace deepinfer
