#include "tokenizer/python_json.h"

namespace deepinfer::tokenizer {

void append_python_json(const nlohmann::ordered_json& value, std::string& out) {
  if (value.is_object()) {
    out.push_back('{');
    bool first = true;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      out += nlohmann::ordered_json(it.key()).dump();
      out += ": ";
      append_python_json(it.value(), out);
    }
    out.push_back('}');
  } else if (value.is_array()) {
    out.push_back('[');
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += ", ";
      append_python_json(value[i], out);
    }
    out.push_back(']');
  } else if (value.is_number_float()) {
    double d = value.get<double>();
    if (d != d) {
      out += "NaN";
    } else if (d == std::numeric_limits<double>::infinity()) {
      out += "Infinity";
    } else if (d == -std::numeric_limits<double>::infinity()) {
      out += "-Infinity";
    } else {
      out += value.dump();  // shortest round-trip digits, like Python's float repr
    }
  } else {
    // Strings: nlohmann escapes exactly ", \, and U+0000-001F (\b \f \n \r \t, else \u00xx).
    out += value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
}

std::string python_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  append_python_json(value, out);
  return out;
}

}  // namespace deepinfer::tokenizer
