// libFuzzer target: encode / decode of the DeepSeek tokenizer (tests/data/tokenizer/tokenizer.json).
// Input: byte 0 picks the checks, the rest is the text. Checks, in both modes (parse, text):
//  - no crash, no sanitizer report, no slow input (libFuzzer -timeout);
//  - encode succeeds exactly when the text is valid UTF-8 (an independent strict validator);
//  - for valid UTF-8: decode(encode(x)) == x, and the incremental decoder's output equals it;
//  - the input bytes read as a stream of ids (any id < vocab_size): decode never fails and the
//    incremental decoder's concatenated output equals the one-shot (lossy) decode.
// Built by scripts/fuzz.sh (CMake option DI_FUZZ, clang).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

using namespace deepinfer::tokenizer;

namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer* tok = [] {
    const char* env = std::getenv("DI_FUZZ_TOKENIZER");
    auto r = Tokenizer::from_path(env && *env ? env : DI_FUZZ_TOKENIZER_JSON);
    if (!r.is_ok()) {
      std::fprintf(stderr, "tokenizer_fuzz: %s\n", r.status().to_string().c_str());
      std::abort();
    }
    return r->release();
  }();
  return *tok;
}

// RFC 3629, written independently of src/tokenizer/utf8.cpp.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp, min;
    if (b < 0x80) { ++i; continue; }
    if ((b & 0xE0) == 0xC0) { n = 2; cp = b & 0x1F; min = 0x80; }
    else if ((b & 0xF0) == 0xE0) { n = 3; cp = b & 0x0F; min = 0x800; }
    else if ((b & 0xF8) == 0xF0) { n = 4; cp = b & 0x07; min = 0x10000; }
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer_fuzz: check failed: %s\n", what);
    std::abort();
  }
}

std::string incremental(const Tokenizer& tok, const std::vector<TokenId>& ids, DecodeOptions opts) {
  IncrementalDecoder dec(tok, opts);
  std::string out;
  for (TokenId id : ids) {
    auto r = dec.push(id);
    check(r.is_ok(), "IncrementalDecoder::push of a known id");
    out += *r;
  }
  out += dec.flush();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Tokenizer& tok = tokenizer();
  const uint8_t selector = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  if (selector & 0x80) {
    // Id stream: 3 bytes per id, mod vocab_size (every id below vocab_size is known).
    std::vector<TokenId> ids;
    for (size_t i = 0; i + 3 <= text.size(); i += 3) {
      uint32_t v = static_cast<uint8_t>(text[i]) | static_cast<uint8_t>(text[i + 1]) << 8 |
                   static_cast<uint32_t>(static_cast<uint8_t>(text[i + 2])) << 16;
      const TokenId id = static_cast<TokenId>(v % static_cast<uint32_t>(tok.vocab_size()));
      if (tok.is_known(id)) ids.push_back(id);
    }
    const DecodeOptions opts{.skip_special_tokens = (selector & 1) != 0};
    auto one_shot = tok.decode(ids, opts);
    check(one_shot.is_ok(), "decode of known ids");
    check(valid_utf8(*one_shot), "decode output is valid UTF-8");
    check(incremental(tok, ids, opts) == *one_shot, "incremental decode == one-shot decode");
    return 0;
  }

  const bool valid = valid_utf8(text);
  for (SpecialTokenMode mode : {SpecialTokenMode::kParse, SpecialTokenMode::kText}) {
    auto ids = tok.encode(text, mode);
    check(ids.is_ok() == valid, "encode succeeds exactly on valid UTF-8");
    if (!valid) continue;
    auto back = tok.decode(*ids);
    check(back.is_ok(), "decode of encode");
    check(*back == text, "decode(encode(x)) == x");
    check(incremental(tok, *ids, {}) == text, "incremental decode of encode(x) == x");
  }
  return 0;
}
