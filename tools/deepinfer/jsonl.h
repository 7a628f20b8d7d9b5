// JSONL reading for the CLI: every line parsed and validated up front, so a bad line fails the
// run before any work (and names its line number), and nothing half-written is left behind.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"

namespace deepinfer::cli {

struct JsonLine {
  int64_t line_no;
  nlohmann::json value;
};

inline Result<std::vector<JsonLine>> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found(path + ": cannot open");
  std::vector<JsonLine> out;
  std::string line;
  int64_t no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.push_back({no, nlohmann::json::parse(line)});
    } catch (const std::exception& e) {
      return Status::invalid_argument(path + ":" + std::to_string(no) + ": invalid JSON: " + e.what());
    }
    if (!out.back().value.is_object())
      return Status::invalid_argument(path + ":" + std::to_string(no) + ": expected a JSON object");
  }
  if (out.empty()) return Status::invalid_argument(path + ": no input lines");
  return out;
}

/// Reads `key` as a non-empty array of integer token ids.
inline Result<std::vector<int32_t>> token_array(const JsonLine& l, const char* key, const std::string& path) {
  const std::string where = path + ":" + std::to_string(l.line_no) + ": ";
  if (!l.value.contains(key) || !l.value[key].is_array())
    return Status::invalid_argument(where + "'" + key + "' must be an array of token ids");
  std::vector<int32_t> ids;
  for (const auto& v : l.value[key]) {
    if (!v.is_number_integer()) return Status::invalid_argument(where + "'" + key + "' has a non-integer entry");
    const int64_t x = v.get<int64_t>();
    if (x < 0 || x > INT32_MAX) return Status::invalid_argument(where + "token id " + std::to_string(x) + " out of range");
    ids.push_back(static_cast<int32_t>(x));
  }
  if (ids.empty()) return Status::invalid_argument(where + "'" + key + "' is empty");
  return ids;
}

/// Writes to `path.tmp` and renames on success, so a failed run never leaves a partial file.
class AtomicWriter {
 public:
  explicit AtomicWriter(std::string path) : path_(std::move(path)), out_(path_ + ".tmp") {}
  bool ok() const { return static_cast<bool>(out_); }
  void line(const nlohmann::json& j) { out_ << j.dump() << '\n'; }
  Status commit() {
    out_.close();
    if (!out_) return Status::internal(path_ + ": write failed");
    if (std::rename((path_ + ".tmp").c_str(), path_.c_str()) != 0) return Status::internal(path_ + ": rename failed");
    return Status::ok();
  }
  ~AtomicWriter() {
    if (out_.is_open()) {
      out_.close();
      std::remove((path_ + ".tmp").c_str());
    }
  }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace deepinfer::cli
