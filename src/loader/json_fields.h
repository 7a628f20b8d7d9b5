// JsonFields: typed reads of one config.json object with errors that name the file and the field
// ("config.json: field 'head_dim' must be an integer"). Null counts as absent. Shared by every
// model family's config parser.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace deepinfer {

class JsonFields {
 public:
  JsonFields(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {}
  Status error(const std::string& msg) const { return Status::invalid_argument(where_ + ": " + msg); }
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  const nlohmann::json& json() const { return j_; }

  Result<int64_t> integer(const char* key, std::optional<int64_t> def = std::nullopt) const {
    if (!has(key)) return def ? Result<int64_t>(*def) : Result<int64_t>(missing(key));
    if (!j_[key].is_number_integer()) return error(std::string("field '") + key + "' must be an integer");
    return j_[key].get<int64_t>();
  }
  Result<double> number(const char* key, std::optional<double> def = std::nullopt) const {
    if (!has(key)) return def ? Result<double>(*def) : Result<double>(missing(key));
    if (!j_[key].is_number()) return error(std::string("field '") + key + "' must be a number");
    return j_[key].get<double>();
  }
  Result<bool> boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!j_[key].is_boolean()) return error(std::string("field '") + key + "' must be true or false");
    return j_[key].get<bool>();
  }
  Result<std::string> string(const char* key, std::optional<std::string> def = std::nullopt) const {
    if (!has(key)) return def ? Result<std::string>(*def) : Result<std::string>(missing(key));
    if (!j_[key].is_string()) return error(std::string("field '") + key + "' must be a string");
    return j_[key].get<std::string>();
  }
  /// An array of integers; absent is an error when `required`, else empty.
  Result<std::vector<int64_t>> ints(const char* key, bool required) const {
    std::vector<int64_t> out;
    if (!has(key)) {
      if (required) return missing(key);
      return out;
    }
    if (!j_[key].is_array()) return error(std::string("field '") + key + "' must be an array of integers");
    for (const auto& v : j_[key]) {
      if (!v.is_number_integer()) return error(std::string("field '") + key + "' must be an array of integers");
      out.push_back(v.get<int64_t>());
    }
    return out;
  }

 private:
  Status missing(const char* key) const { return error(std::string("missing field '") + key + "'"); }
  const nlohmann::json& j_;
  std::string where_;
};

}  // namespace deepinfer
