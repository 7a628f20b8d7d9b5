// Pieces of the JSON Schema converter (internal to di_grammar): regular expressions for number
// ranges and string formats, written in the regex dialect of regex_converter.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deepinfer::grammar::json_parts {

/// Integers in [lo, hi] (either side open when absent), canonical JSON spelling. Exact.
std::string integer_range_regex(std::optional<int64_t> lo, std::optional<int64_t> hi);

/// Decimal numbers (no exponent) in the range with integer bounds; `*_exclusive` makes that bound
/// strict. Exact for integer bounds.
std::string number_range_regex(std::optional<int64_t> lo, bool lo_exclusive, std::optional<int64_t> hi,
                               bool hi_exclusive);

/// The regex of a string format (date, time, date-time, email, uuid, ipv4, hostname, uri), or
/// nullopt when unknown. Each is a subset of what ajv-formats accepts in "full" mode.
std::optional<std::string> format_regex(std::string_view format);

}  // namespace deepinfer::grammar::json_parts
