// UTF-8 helpers for the tokenizer: strict validation (the API-boundary policy: invalid input is
// rejected with the byte offset, never tokenized), lossy decoding that replaces invalid
// sequences exactly like Rust's String::from_utf8_lossy (what HF tokenizers' decode returns),
// and the "complete prefix" query the incremental detokenizer needs. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::tokenizer {

/// Ok when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF);
/// otherwise kInvalidArgument naming the first bad byte offset and value.
Status validate_utf8(std::string_view s);

/// Length in bytes of the first maximal invalid subsequence at `s[0]`, or 0 when `s` starts with a
/// complete valid character. A truncated but so far valid sequence counts as invalid here.
size_t invalid_sequence_length(std::string_view s);

/// Appends `bytes` to `out`, each maximal invalid subsequence replaced by U+FFFD (Unicode's
/// "substitution of maximal subparts", the rule of Rust's from_utf8_lossy).
void append_utf8_lossy(std::string_view bytes, std::string& out);
std::string utf8_lossy(std::string_view bytes);

/// Bytes at the end of `s` that form a valid but still incomplete character (0..3): the part an
/// incremental decoder must hold back because more bytes may complete it.
size_t incomplete_utf8_tail(std::string_view s);

/// Appends the UTF-8 encoding of `cp` (must be a Unicode scalar value).
void append_utf8(char32_t cp, std::string& out);

/// Decodes the character at `s[i]` of already validated UTF-8; advances `i`.
inline char32_t decode_utf8_at(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  unsigned char b = p[0];
  if (b < 0x80) { i += 1; return b; }
  if (b < 0xE0) { i += 2; return (char32_t(b & 0x1F) << 6) | (p[1] & 0x3F); }
  if (b < 0xF0) {
    i += 3;
    return (char32_t(b & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  i += 4;
  return (char32_t(b & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) |
         (p[3] & 0x3F);
}

}  // namespace deepinfer::tokenizer
