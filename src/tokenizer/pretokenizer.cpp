#include "tokenizer/pretokenizer.h"

#include "tokenizer/unicode_class.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

constexpr uint8_t kLM = kClassL | kClassM;
constexpr uint8_t kPS = kClassP | kClassS;

inline bool is_ascii_letter(char32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
inline bool is_ascii_punct(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}
inline bool is_crlf(char32_t c) { return c == '\r' || c == '\n'; }

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<Piece>& pieces) {
  pieces.clear();
  cps_.clear();
  cls_.clear();
  offsets_.clear();
  const uint8_t* table = char_class_table();
  size_t i = 0;
  while (i < text.size()) {
    offsets_.push_back(static_cast<uint32_t>(i));
    char32_t cp = decode_utf8_at(text, i);
    cps_.push_back(cp);
    cls_.push_back(table[cp]);
  }
  offsets_.push_back(static_cast<uint32_t>(text.size()));
  split_numbers(0, static_cast<uint32_t>(cps_.size()), pieces);
}

void PreTokenizer::emit(uint32_t b, uint32_t e, std::vector<Piece>& out) const {
  out.push_back(Piece{offsets_[b], offsets_[e]});
}

// Split 1: \p{N}{1,3}. Code point indices [b, e).
void PreTokenizer::split_numbers(uint32_t b, uint32_t e, std::vector<Piece>& out) {
  uint32_t i = b;
  while (i < e) {
    uint32_t j = i;
    if (cls_[i] & kClassN) {
      while (j < e && j - i < 3 && (cls_[j] & kClassN)) ++j;
      split_cjk(i, j, out);
    } else {
      while (j < e && !(cls_[j] & kClassN)) ++j;
      split_cjk(i, j, out);
    }
    i = j;
  }
}

// Split 2: [一-龥぀-ゟ゠-ヿ]+ ; matches and gaps both go on to split 3.
void PreTokenizer::split_cjk(uint32_t b, uint32_t e, std::vector<Piece>& out) {
  uint32_t i = b;
  while (i < e) {
    const bool cjk = cls_[i] & kClassCjk;
    uint32_t j = i + 1;
    while (j < e && static_cast<bool>(cls_[j] & kClassCjk) == cjk) ++j;
    split_words(i, j, out);
    i = j;
  }
}

// Split 3 on the piece [b, e): leftmost matches, gaps between them kept as pieces.
void PreTokenizer::split_words(uint32_t b, uint32_t e, std::vector<Piece>& out) {
  uint32_t i = b, gap = b;
  while (i < e) {
    uint32_t m = match_word_at(i, e);
    if (m > i) {
      if (gap < i) emit(gap, i, out);
      emit(i, m, out);
      i = m;
      gap = m;
    } else {
      ++i;
    }
  }
  if (gap < e) emit(gap, e, out);
}

// The end of the match of the third regex starting at i, or i when no alternative matches.
uint32_t PreTokenizer::match_word_at(uint32_t i, uint32_t e) const {
  const char32_t c = cps_[i];
  const uint8_t k = cls_[i];
  // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
  if (is_ascii_punct(c) && i + 1 < e && is_ascii_letter(cps_[i + 1])) {
    uint32_t j = i + 2;
    while (j < e && is_ascii_letter(cps_[j])) ++j;
    return j;
  }
  // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+  (a leading mark is absorbed by the run either way)
  {
    uint32_t j = i;
    if (!(k & kLM) && !is_crlf(c) && !(k & kPS)) ++j;
    if (j < e && (cls_[j] & kLM)) {
      while (j < e && (cls_[j] & kLM)) ++j;
      return j;
    }
  }
  //  ?[\p{P}\p{S}]+[\r\n]*
  {
    uint32_t j = i;
    if (c == ' ' && j + 1 < e && (cls_[j + 1] & kPS)) ++j;
    if (cls_[j] & kPS) {
      while (j < e && (cls_[j] & kPS)) ++j;
      while (j < e && is_crlf(cps_[j])) ++j;
      return j;
    }
  }
  if (!(k & kClassSpace)) return i;
  uint32_t w = i;  // the whitespace run [i, w)
  uint32_t last_newline = e;
  while (w < e && (cls_[w] & kClassSpace)) {
    if (is_crlf(cps_[w])) last_newline = w;
    ++w;
  }
  // \s*[\r\n]+ : up to and including the last newline of the run.
  if (last_newline != e) return last_newline + 1;
  // \s+(?!\S) : the run minus its last char, or all of it at the piece end.
  if (w == e) return w;
  if (w - i >= 2) return w - 1;
  // \s+
  return w;
}

}  // namespace deepinfer::tokenizer
