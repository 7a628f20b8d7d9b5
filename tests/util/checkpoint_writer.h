// Test utilities: write safetensors files and model folders, and copy a fixture checkpoint with
// edits (drop, add, rename, re-encode tensors, patch config.json), so tests can build every
// kind of malformed or re-formatted checkpoint from the committed fixtures.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
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


// ---- Raw files, for malformed safetensors.

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// The bytes of a safetensors file with an explicit header text and data section; the 8-byte
/// length prefix is header.size() unless `header_len` overrides it (to forge a bad length).
inline std::string safetensors_blob(const std::string& header, const std::string& data,
                                    int64_t header_len = -1) {
  const uint64_t n = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

// ---- Sharded model folders.

inline std::string shard_file_name(int i, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
  return buf;
}

/// Writes `dir` as a sharded model folder: config.json, one file per entry of `shards`
/// (named by shard_file_name) and model.safetensors.index.json listing every tensor where it
/// was written. Returns the index written, so tests can edit and rewrite it.
inline nlohmann::json write_sharded_model_dir(const std::string& dir, const nlohmann::json& config,
                                              const std::vector<TensorMap>& shards) {
  std::filesystem::create_directories(dir);
  write_json_file(dir + "/config.json", config);
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  uint64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_file_name(static_cast<int>(i), static_cast<int>(shards.size()));
    write_safetensors(dir + "/" + name, shards[i]);
    for (const auto& [tname, t] : shards[i]) {
      index["weight_map"][tname] = name;
      total += t.bytes.size();
    }
  }
  index["metadata"]["total_size"] = total;
  write_json_file(dir + "/model.safetensors.index.json", index);
  return index;
}

/// Splits `tensors` into `n` shards round-robin in name order (so every shard holds a mix of
/// layers and kinds).
inline std::vector<TensorMap> split_round_robin(const TensorMap& tensors, int n) {
  std::vector<TensorMap> out(static_cast<size_t>(n));
  size_t i = 0;
  for (const auto& [name, t] : tensors) out[i++ % static_cast<size_t>(n)][name] = t;
  return out;
}

// ---- Fixtures.

#ifdef DI_TEST_DATA_DIR
inline std::string fixture_dir(const std::string& name) { return std::string(DI_TEST_DATA_DIR) + "/" + name; }
#endif

/// A model folder held in memory: config.json and every tensor.
struct ModelFolder {
  nlohmann::json config;
  TensorMap tensors;
  void write(const std::string& dir) const { write_model_dir(dir, config, tensors); }
};

inline ModelFolder read_model_dir(const std::string& dir) {
  return {read_json_file(dir + "/config.json"), read_safetensors(dir + "/model.safetensors")};
}

/// Removes a temp folder when it goes out of scope.
struct TempDir {
  explicit TempDir(const std::string& name) : path(temp_dir(name + "-" + std::to_string(next_id()))) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& rel) const { return path + "/" + rel; }
  std::string path;

 private:
  static int next_id() {
    static int id = 0;
    return id++;
  }
};

// ---- Raw tensors of other dtypes.

inline RawTensor raw_tensor(std::string dtype, std::vector<int64_t> shape, const void* data, size_t nbytes) {
  RawTensor t{std::move(dtype), std::move(shape), std::vector<uint8_t>(nbytes)};
  if (nbytes) std::memcpy(t.bytes.data(), data, nbytes);
  return t;
}

inline RawTensor i64_tensor(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  return raw_tensor("I64", std::move(shape), v.data(), v.size() * 8);
}

inline std::vector<int64_t> as_i64(const RawTensor& t) {
  std::vector<int64_t> v(t.bytes.size() / 8);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

}  // namespace deepinfer::testing
