// Seeded generator of adversarial tokenizer inputs: random mixes of scripts, digits of many
// systems, whitespace runs of every White_Space kind (and near-misses such as U+180E, U+200B,
// U+FEFF), emoji sequences (ZWJ, skin tones, flags, keycaps), combining marks, code, added-token
// spellings (whole, cut, glued together), and random code points over all planes, astral ones
// included. Always valid UTF-8 (no surrogates). Used by the live HF comparison and the fuzzers.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace deepinfer::tokenizer::testing {

inline void append_utf8(std::string& s, char32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class TextGenerator {
 public:
  /// `specials`: spellings of added tokens to splice in (may be empty).
  TextGenerator(uint64_t seed, std::vector<std::string> specials) : rng_(seed), specials_(std::move(specials)) {}

  /// One document of roughly `max_units` pieces.
  std::string next(int max_units = 60) {
    std::string s;
    int units = 1 + static_cast<int>(below(static_cast<uint32_t>(max_units)));
    for (int u = 0; u < units; ++u) piece(s);
    return s;
  }

 private:
  uint32_t below(uint32_t n) { return n == 0 ? 0 : static_cast<uint32_t>(rng_() % n); }
  char32_t in(char32_t lo, char32_t hi) { return lo + below(hi - lo + 1); }
  template <size_t N>
  char32_t pick(const char32_t (&a)[N]) { return a[below(N)]; }

  char32_t random_scalar() {
    for (;;) {
      char32_t cp;
      switch (below(6)) {
        case 0: cp = below(0x80); break;
        case 1: cp = below(0x10000); break;
        case 2: cp = in(0x10000, 0x1FFFF); break;   // SMP: scripts, emoji, math
        case 3: cp = in(0x20000, 0x3FFFF); break;   // SIP/TIP: CJK extensions (B..J)
        case 4: cp = in(0xE0000, 0xE01FF); break;   // tags, variation selectors supplement
        default: cp = below(0x110000); break;
      }
      if (cp < 0xD800 || cp > 0xDFFF) return cp;
    }
  }

  void word(std::string& s, char32_t lo, char32_t hi, int max_len) {
    int n = 1 + static_cast<int>(below(static_cast<uint32_t>(max_len)));
    for (int i = 0; i < n; ++i) append_utf8(s, in(lo, hi));
  }

  void piece(std::string& s) {
    static constexpr char32_t kSpaces[] = {' ', ' ', ' ', '\t', '\n', '\n', '\r', 0x0B, 0x0C, 0x85, 0xA0, 0x1680,
                                           0x180E, 0x2000, 0x2003, 0x2009, 0x200A, 0x200B, 0x2028, 0x2029,
                                           0x202F, 0x205F, 0x3000, 0xFEFF, 0x1C, 0x1F};
    static constexpr char32_t kDigits0[] = {'0', 0x660, 0x6F0, 0x966, 0x9E6, 0xE50, 0xFF10, 0x1D7CE, 0x1E950};
    static constexpr char32_t kNumbers[] = {0xBD, 0xB2, 0x2167, 0x216B, 0x2460, 0x2473, 0x3007, 0x3021, 0x10107, 0x1F10B};
    static constexpr char32_t kMarks[] = {0x300, 0x301, 0x308, 0x323, 0x35C, 0x64B, 0x93F, 0x94D, 0xE31, 0x20DD,
                                          0x20E3, 0xFE0F, 0xFE0E, 0x1F3FB, 0x1F3FF, 0x200D, 0x200C, 0xE0020};
    static constexpr char32_t kPunct[] = {'.', ',', '!', '?', ';', ':', '"', '\'', '(', ')', '[', ']', '{', '}', '<',
                                          '>', '/', '\\', '_', '-', '+', '=', '*', '&', '^', '%', '$', '#', '@', '~',
                                          '`', '|', 0x3001, 0x3002, 0xFF01, 0xFF1F, 0x2014, 0x2026, 0x201C, 0xAB,
                                          0x20AC, 0xA9, 0x2192, 0x221E, 0xFF5C, 0x2581};
    static constexpr char32_t kEmoji[] = {0x1F600, 0x1F980, 0x1F44D, 0x2764, 0x1F468, 0x1F469, 0x1F467, 0x1F3F3,
                                          0x1F308, 0x2B50, 0x1F1FA, 0x1F1F8, 0x1F1EF, 0x1F1F5, 0x1FAE0, 0x1F9D1};
    static const char* const kCode[] = {"def f(x):\n    return x", "int main() {", "    ", "\t\t", "//", "#include",
                                        "self._init", ".net", "x+=1;", "a_b_c", "0x1F", "==", "->", "::", "</div>",
                                        "\"\"\"", "<think>", "</think>", "<tool_call>", "\n\n", "\r\n", "Hello",
                                        " world", "don't", "I'm", "12345", "3.14159", "ĠÑĤÐ²"};
    switch (below(22)) {
      case 0: case 1: word(s, 'a', 'z', 8); break;
      case 2: word(s, 'A', 'Z', 4); break;
      case 3: word(s, 0xC0, 0x24F, 6); break;                       // Latin-1/Extended
      case 4: word(s, 0x400, 0x4FF, 8); break;                      // Cyrillic
      case 5: if (below(2)) word(s, 0x4E00, 0x9FFF, 6); else word(s, 0x9F90, 0x9FB0, 6); break;  // CJK, edge of 9FA5
      case 6: word(s, 0x3040, 0x30FF, 5); break;                    // kana
      case 7: word(s, 0xAC00, 0xD7A3, 4); break;                    // Hangul
      case 8: if (below(2)) word(s, 0x600, 0x6FF, 6); else word(s, 0x900, 0x97F, 6); break;  // Arabic / Devanagari
      case 9: word(s, 0xE00, 0xE7F, 6); break;                      // Thai
      case 10: case 11: {                                           // whitespace run
        int n = 1 + static_cast<int>(below(below(4) == 0 ? 40 : 5));
        for (int i = 0; i < n; ++i) append_utf8(s, pick(kSpaces));
        break;
      }
      case 12: {                                                    // digits
        char32_t zero = pick(kDigits0);
        int n = 1 + static_cast<int>(below(12));
        for (int i = 0; i < n; ++i) append_utf8(s, zero + below(10));
        if (below(3) == 0) append_utf8(s, pick(kNumbers));
        break;
      }
      case 13: append_utf8(s, pick(kMarks)); break;
      case 14: { int n = 1 + static_cast<int>(below(4)); for (int i = 0; i < n; ++i) append_utf8(s, pick(kPunct)); break; }
      case 15: {                                                    // emoji, with modifiers and joiners
        int n = 1 + static_cast<int>(below(4));
        for (int i = 0; i < n; ++i) {
          append_utf8(s, pick(kEmoji));
          if (below(3) == 0) append_utf8(s, pick(kMarks));
          if (below(3) == 0) append_utf8(s, 0x200D);
        }
        break;
      }
      case 16: s += kCode[below(sizeof(kCode) / sizeof(kCode[0]))]; break;
      case 17: case 18: {                                           // added-token spellings
        if (specials_.empty()) break;
        const std::string& t = specials_[below(static_cast<uint32_t>(specials_.size()))];
        switch (below(4)) {
          case 0: {                                                 // a cut copy (on a char boundary)
            size_t cut = below(static_cast<uint32_t>(t.size()));
            while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) --cut;
            s.append(t, 0, cut);
            break;
          }
          case 1: s += t; s += t; break;
          default: s += t; break;
        }
        break;
      }
      default: {                                                    // random scalars
        int n = 1 + static_cast<int>(below(6));
        for (int i = 0; i < n; ++i) append_utf8(s, random_scalar());
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  std::vector<std::string> specials_;
};

}  // namespace deepinfer::tokenizer::testing
