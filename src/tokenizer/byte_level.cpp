#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

bool is_self_mapped(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Alphabet {
  std::array<char32_t, 256> char_of{};  // byte -> code point
  Alphabet() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) char_of[b] = is_self_mapped(b) ? char32_t(b) : next++;
  }
  // code point -> byte, or -1
  int byte_of(char32_t cp) const {
    if (cp < 256) return is_self_mapped(static_cast<int>(cp)) ? static_cast<int>(cp) : -1;
    if (cp >= 256 + 68) return -1;
    for (int b = 0; b < 256; ++b) {
      if (char_of[b] == cp) return b;
    }
    return -1;
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) append_utf8(alphabet().char_of[b], out);
  return out;
}

std::string byte_level_decode(std::string_view token) {
  if (!validate_utf8(token).is_ok()) return std::string(token);
  std::string out;
  for (size_t i = 0; i < token.size();) {
    int b = alphabet().byte_of(decode_utf8_at(token, i));
    if (b < 0) return std::string(token);
    out.push_back(static_cast<char>(b));
  }
  return out;
}

}  // namespace deepinfer::tokenizer
