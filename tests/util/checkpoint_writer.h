// Test utilities: write safetensors files and model folders, and copy a fixture checkpoint with
// edits (drop, add, rename, re-encode tensors, patch config.json), so tests can build every
// kind of malformed or re-formatted checkpoint from the committed fixtures.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <unistd.h>

#include "loader/safetensors.h"

namespace deepinfer::testing {

struct RawTensor {
  std::string dtype;  // safetensors spelling
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

using TensorMap = std::map<std::string, RawTensor>;

inline RawTensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  RawTensor t{"F32", std::move(shape), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

inline std::vector<float> as_f32(const RawTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

/// Writes a safetensors file; returns the header length written.
inline void write_safetensors(const std::string& path, const TensorMap& tensors) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  h["__metadata__"] = {{"format", "pt"}};
  std::string hs = h.dump();
  while (hs.size() % 8) hs += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = hs.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(hs.data(), static_cast<std::streamsize>(hs.size()));
  for (const auto& [name, t] : tensors) out.write(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
}

/// Reads every tensor of a safetensors file into memory.
inline TensorMap read_safetensors(const std::string& path) {
  auto f = SafetensorsFile::open(path);
  TensorMap m;
  if (!f.is_ok()) return m;
  for (const auto& info : (*f)->tensors()) {
    Tensor t = (*f)->tensor(info);
    const auto* p = static_cast<const uint8_t*>(t.data());
    m[info.name] = RawTensor{std::string(dtype_name(info.dtype)), info.shape, std::vector<uint8_t>(p, p + t.nbytes())};
  }
  return m;
}

inline nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

inline void write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2);
}

/// A fresh, empty folder under the system temp dir.
inline std::string temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("deepinfer-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

/// Writes `dir` as a model folder: config.json and model.safetensors.
inline void write_model_dir(const std::string& dir, const nlohmann::json& config, const TensorMap& tensors) {
  std::filesystem::create_directories(dir);
  write_json_file(dir + "/config.json", config);
  write_safetensors(dir + "/model.safetensors", tensors);
}

}  // namespace deepinfer::testing
