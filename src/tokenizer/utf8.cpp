#include "tokenizer/utf8.h"

#include <cstdio>

namespace deepinfer::tokenizer {
namespace {

// Returns the length of the valid character at s[0] (1..4), or -(n) where n >= 1 is the length of
// the maximal subpart that is a prefix of some valid sequence (truncated or followed by a bad
// byte). Follows the table "Well-Formed UTF-8 Byte Sequences" of the Unicode standard (3.9).
int classify(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  unsigned char b = p[0];
  if (b < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k <= need; ++k) {
    if (static_cast<size_t>(k) >= n) return -k;
    unsigned char c = p[k];
    unsigned char klo = k == 1 ? lo : 0x80, khi = k == 1 ? hi : 0xBF;
    if (c < klo || c > khi) return -k;
  }
  return need + 1;
}

}  // namespace

Status validate_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int len = classify(s.substr(i));
    if (len < 0) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "invalid UTF-8 at byte %zu (0x%02X)", i,
                    static_cast<unsigned>(static_cast<unsigned char>(s[i])));
      return Status::invalid_argument(buf);
    }
    i += static_cast<size_t>(len);
  }
  return Status::ok();
}

size_t invalid_sequence_length(std::string_view s) {
  if (s.empty()) return 0;
  int len = classify(s);
  return len > 0 ? 0 : static_cast<size_t>(-len);
}

void append_utf8_lossy(std::string_view bytes, std::string& out) {
  size_t i = 0, run = 0;  // [run, i) is valid and not yet copied
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    int len = classify(bytes.substr(i));
    if (len > 0) {
      i += static_cast<size_t>(len);
      continue;
    }
    out.append(bytes.data() + run, i - run);
    out.append("\xEF\xBF\xBD");
    i += static_cast<size_t>(-len);
    run = i;
  }
  out.append(bytes.data() + run, i - run);
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_utf8_lossy(bytes, out);
  return out;
}

size_t incomplete_utf8_tail(std::string_view s) {
  // A pending tail starts at one of the last 3 bytes with a lead byte and is a valid truncation.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char b = static_cast<unsigned char>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation: keep looking for the lead
    if (b < 0xC0) return 0;            // ASCII ends the search
    int len = classify(s.substr(n - back));
    return (len < 0 && static_cast<size_t>(-len) == back) ? back : 0;
  }
  return 0;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace deepinfer::tokenizer
