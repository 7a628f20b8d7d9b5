// GPT-2 byte-level alphabet used by tokenizer.json: each byte is spelled as one code point
// (printable Latin-1 bytes as themselves, the other 68 bytes as U+0100.. in byte order). The
// mapping is computed by the algorithm of bytes_to_unicode(), not stored.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::tokenizer {

/// Spells raw bytes in the byte-level alphabet (UTF-8 of the mapped code points).
std::string byte_level_encode(std::string_view bytes);

/// The ByteLevel decoder's rule for one token string: map every char back to its byte; when a
/// char is outside the alphabet (e.g. `<｜User｜>`), the token's own UTF-8 is used unchanged.
std::string byte_level_decode(std::string_view token);

}  // namespace deepinfer::tokenizer
