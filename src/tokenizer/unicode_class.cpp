#include "tokenizer/unicode_class.h"

#include <utf8proc.h>

#include <memory>

namespace deepinfer::tokenizer {
namespace {

constexpr char32_t kNumCodePoints = 0x110000;

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
  // The ranges spelled in the second Split regex of DeepSeek's tokenizer.json.
  if ((cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF)) c |= kClassCjk;
  return c;
}

const uint8_t* build_table() {
  static std::unique_ptr<uint8_t[]> table = [] {
    auto t = std::make_unique<uint8_t[]>(kNumCodePoints);
    for (char32_t cp = 0; cp < kNumCodePoints; ++cp) t[cp] = class_of(cp);
    return t;
  }();
  return table.get();
}

}  // namespace

const uint8_t* char_class_table() {
  static const uint8_t* table = build_table();
  return table;
}

const char* char_class_unicode_version() { return utf8proc_unicode_version(); }

}  // namespace deepinfer::tokenizer
