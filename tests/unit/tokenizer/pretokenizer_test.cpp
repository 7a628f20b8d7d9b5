// Pre-tokenizer pieces on the hard cases of TOKENIZER.md, and the UTF-8 policy.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include "tokenizer/unicode_class.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

std::vector<std::string> pieces(const std::string& text) {
  PreTokenizer p;
  std::vector<Piece> out;
  p.split(text, out);
  std::vector<std::string> s;
  for (const Piece& x : out) s.push_back(text.substr(x.begin, x.end - x.begin));
  return s;
}

using V = std::vector<std::string>;

TEST(PreTokenizerTest, NumbersAreCutInRunsOfThree) {
  EXPECT_EQ(pieces("12345 678"), (V{"123", "45", " ", "678"}));
  EXPECT_EQ(pieces("x½Ⅻ①٣"), (V{"x", "½Ⅻ①", "٣"}));
}

TEST(PreTokenizerTest, CjkRunsAreIsolated) {
  EXPECT_EQ(pieces(" 中文abc"), (V{" ", "中文", "abc"}));
  // Split 3 still runs inside the CJK piece: ・ (Po) is punctuation, ー (Lm) a letter.
  EXPECT_EQ(pieces("カタカナ・ー한국어"), (V{"カタカナ", "・", "ー", "한국어"}));
}

TEST(PreTokenizerTest, WordsPunctuationAndWhitespace) {
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  // ' ' + '_' is " ?[\p{P}\p{S}]+", not the [ASCII punct][A-Za-z]+ alternative.
  EXPECT_EQ(pieces(".net _init"), (V{".net", " _", "init"}));
  EXPECT_EQ(pieces("x  y . "), (V{"x", " ", " y", " .", " "}));
  EXPECT_EQ(pieces("a \n\n b"), (V{"a", " \n\n", " b"}));
  EXPECT_EQ(pieces("\tfoo\u3000bar"), (V{"\tfoo", "\u3000bar"}));
  EXPECT_EQ(pieces("hi!!\n\nok"), (V{"hi", "!!\n\n", "ok"}));
  EXPECT_EQ(pieces("   "), (V{"   "}));
}

TEST(PreTokenizerTest, UnmatchedCharactersStayAsGapPieces) {
  // ZWJ (U+200D) is Cf: alone no alternative matches it; before a letter it leads the word.
  EXPECT_EQ(pieces("\u200D\u200D"), (V{"\u200D\u200D"}));
  EXPECT_EQ(pieces("a\u200Db"), (V{"a", "\u200Db"}));
}

TEST(PreTokenizerTest, LongRunsAreLinear) {
  std::string z(131072, 'Z');
  EXPECT_EQ(pieces(z).size(), 1u);
  std::string spaces(50000, ' ');
  EXPECT_EQ(pieces(spaces + "x"), (V{std::string(49999, ' '), " x"}));
}

// Spot checks of the built class table: one code point per regex class, the \s set (White_Space,
// not U+180E/U+200B/U+FEFF/U+001C) and both ends of the CJK range. The whole table is checked against
// the Unicode 16.0 data in unicode_table_test.cpp.
TEST(UnicodeClassTest, SpotChecksOfClassesWhitespaceAndCjkRange) {
  EXPECT_NE(std::string(char_class_unicode_version()), "");
  EXPECT_TRUE(char_class(U'a') & kClassL);
  EXPECT_TRUE(char_class(0x0301) & kClassM);
  EXPECT_TRUE(char_class(U'½') & kClassN);
  EXPECT_TRUE(char_class(U'!') & kClassP);
  EXPECT_TRUE(char_class(0x1F600) & kClassS);
  for (char32_t ws : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2028, 0x2029, 0x202F, 0x3000}) {
    EXPECT_TRUE(char_class(ws) & kClassSpace) << static_cast<uint32_t>(ws);
  }
  for (char32_t not_ws : {0x180E, 0x200B, 0xFEFF, 0x1C}) EXPECT_FALSE(char_class(not_ws) & kClassSpace) << static_cast<uint32_t>(not_ws);
  EXPECT_TRUE(char_class(0x9FA5) & kClassCjk);
  EXPECT_FALSE(char_class(0x9FA6) & kClassCjk);
}

TEST(Utf8Test, ValidationNamesTheOffendingByte) {
  EXPECT_TRUE(validate_utf8("héllo 🦀").is_ok());
  EXPECT_EQ(validate_utf8("ab\xC0\xAF").message(), "invalid UTF-8 at byte 2 (0xC0)");  // overlong
  EXPECT_FALSE(validate_utf8("\xED\xA0\x80").is_ok());                                // surrogate
  EXPECT_FALSE(validate_utf8("\xF4\x90\x80\x80").is_ok());                            // > U+10FFFF
  EXPECT_FALSE(validate_utf8("\xE2\x82").is_ok());                                    // truncated
}

TEST(Utf8Test, LossyReplacesMaximalSubpartsLikeRust) {
  EXPECT_EQ(utf8_lossy("a\xF0\x9F\x98" "b"), "a\uFFFDb");          // one truncated sequence
  EXPECT_EQ(utf8_lossy("\x80\x80"), "\uFFFD\uFFFD");               // lone continuations
  EXPECT_EQ(utf8_lossy("\xE0\x80"), "\uFFFD\uFFFD");               // bad second byte
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");     // surrogate
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xE2\x82\xAC"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("ab\x80"), 0u);
}

}  // namespace
}  // namespace deepinfer::tokenizer
