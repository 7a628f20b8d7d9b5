#include "grammar/json_schema_parts.h"

#include <vector>

namespace deepinfer::grammar::json_parts {
namespace {

std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.empty()) return "[]";  // matches nothing
  if (alts.size() == 1) return alts[0];
  std::string out = "(?:";
  for (size_t i = 0; i < alts.size(); ++i) {
    if (i) out += '|';
    out += alts[i];
  }
  return out + ")";
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string(1, lo);
  if (lo == '0' && hi == '9') return "[0-9]";
  return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

// Equal-length digit strings lo <= hi (inner positions may have leading zeros).
std::string same_length_range(const std::string& lo, const std::string& hi) {
  size_t n = lo.size();
  if (n == 0) return "";
  if (lo == hi) return lo;
  if (n == 1) return digit_class(lo[0], hi[0]);
  std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) return std::string(1, lo[0]) + same_length_range(lo_rest, hi_rest);
  bool lo_zeros = lo_rest.find_first_not_of('0') == std::string::npos;
  bool hi_nines = hi_rest.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alts;
  char first_full = lo[0], last_full = hi[0];
  if (!lo_zeros) {
    alts.push_back(std::string(1, lo[0]) + same_length_range(lo_rest, std::string(n - 1, '9')));
    first_full = static_cast<char>(lo[0] + 1);
  }
  if (!hi_nines) last_full = static_cast<char>(hi[0] - 1);
  if (first_full <= last_full) alts.push_back(digit_class(first_full, last_full) + any_digits(n - 1));
  if (!hi_nines) alts.push_back(std::string(1, hi[0]) + same_length_range(std::string(n - 1, '0'), hi_rest));
  return join_alts(alts);
}

// Non-negative integers in [a, b].
std::string uint_range(uint64_t a, uint64_t b) {
  if (a > b) return "[]";
  std::string sa = std::to_string(a), sb = std::to_string(b);
  std::vector<std::string> alts;
  for (size_t len = sa.size(); len <= sb.size(); ++len) {
    std::string lo = len == sa.size() ? sa : "1" + std::string(len - 1, '0');
    std::string hi = len == sb.size() ? sb : std::string(len, '9');
    alts.push_back(same_length_range(lo, hi));
  }
  return join_alts(alts);
}

// Non-negative integers >= a.
std::string uint_at_least(uint64_t a) {
  std::string sa = std::to_string(a);
  std::vector<std::string> alts;
  alts.push_back(same_length_range(sa, std::string(sa.size(), '9')));
  alts.push_back("[1-9][0-9]{" + std::to_string(sa.size()) + ",}");
  return join_alts(alts);
}

// Non-negative x in [a, b] (b absent = unbounded) with a decimal fraction allowed.
std::string nonneg_decimal(int64_t a, bool a_ex, std::optional<int64_t> b, bool b_ex) {
  std::vector<std::string> alts;
  const std::string frac = "(?:\\.[0-9]+)?";
  auto ua = static_cast<uint64_t>(a);
  uint64_t int_start = a_ex ? ua + 1 : ua;
  if (!b) {
    alts.push_back(uint_at_least(int_start) + frac);
  } else if (*b >= 1 && int_start <= static_cast<uint64_t>(*b) - 1) {
    alts.push_back(uint_range(int_start, static_cast<uint64_t>(*b) - 1) + frac);
  }
  if (a_ex && (!b || a < *b)) alts.push_back(uint_range(ua, ua) + "\\.[0-9]*[1-9]");
  if (b && !b_ex && (*b > a || !a_ex)) alts.push_back(uint_range(static_cast<uint64_t>(*b), static_cast<uint64_t>(*b)) + "(?:\\.0+)?");
  return join_alts(alts);
}

}  // namespace

std::string integer_range_regex(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  // Non-negative part.
  if (!hi || *hi >= 0) {
    uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    alts.push_back(hi ? uint_range(a, static_cast<uint64_t>(*hi)) : uint_at_least(a));
  }
  // Negative part: -x with x in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    uint64_t xa = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    if (lo) {
      uint64_t xb = static_cast<uint64_t>(-(*lo + 1)) + 1;
      if (xa <= xb) alts.push_back("-" + uint_range(xa, xb));
    } else {
      alts.push_back("-" + uint_at_least(xa));
    }
  }
  return join_alts(alts);
}

std::string number_range_regex(std::optional<int64_t> lo, bool lo_ex, std::optional<int64_t> hi, bool hi_ex) {
  std::vector<std::string> alts;
  // v >= 0 side.
  if (!hi || *hi > 0 || (*hi == 0 && !hi_ex)) {
    int64_t a = 0;
    bool a_ex = false;
    if (lo && (*lo > 0 || (*lo == 0 && lo_ex))) {
      a = *lo;
      a_ex = lo_ex;
    }
    alts.push_back(nonneg_decimal(a, a_ex, hi, hi_ex));
  }
  // v < 0 side: v = -x, x > 0.
  if (!lo || *lo < 0) {
    int64_t a = 0;
    bool a_ex = true;
    if (hi && *hi < 0) {
      a = -*hi;
      a_ex = hi_ex;
    }
    std::optional<int64_t> b;
    if (lo) b = -*lo;
    std::string x = nonneg_decimal(a, a_ex, b, lo_ex);
    if (x != "[]") alts.push_back("-" + x);
  }
  return join_alts(alts);
}

std::optional<std::string> format_regex(std::string_view format) {
  static const std::string kDate =
      "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
      "02-(?:0[1-9]|1[0-9]|2[0-8]))";
  static const std::string kTime =
      "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
  static const std::string kLabel = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?";
  if (format == "date") return kDate;
  if (format == "time") return kTime;
  if (format == "date-time") return kDate + "T" + kTime;
  if (format == "uuid") {
    return std::string("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");
  }
  if (format == "email") return "[a-zA-Z0-9_+-]{1,32}(?:\\.[a-zA-Z0-9_+-]{1,32}){0,3}@(?:" + kLabel + "\\.){1,3}[a-zA-Z]{2,8}";
  if (format == "ipv4") {
    std::string octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    return "(?:" + octet + "\\.){3}" + octet;
  }
  if (format == "hostname") return kLabel + "(?:\\." + kLabel + "){0,3}";
  if (format == "uri") return "https?://" + kLabel + "(?:\\." + kLabel + "){0,3}(?:/[a-zA-Z0-9._~-]{0,32}){0,8}";
  return std::nullopt;
}

}  // namespace deepinfer::grammar::json_parts
