// Engram's compressed token map derived from a byte-level BPE tokenizer.json, as DeepSeek's
// `build_compressed_token_map` (inference/engram.py) and our tools/reference/tokenizer_compress.py
// do: every token id is decoded alone, its text normalised with the normalizer sequence
//   NFKC, NFD, StripAccents, Lowercase, Replace([ \t\r\n]+ -> " "), Replace(^ $ -> U+E000),
//   Strip, Replace(U+E000 -> " ")
// and the distinct keys are numbered in id order. Unicode data comes from libutf8proc; where it
// can differ from Python's unicodedata / str methods is listed in docs/v41.md section 3 point 7.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace deepinfer::v41 {

struct CompressedTokenMap {
  std::vector<int32_t> token_map;  // compressed id of every token id 0..n-1
  int64_t compressed_vocab = 0;    // number of distinct keys
};

/// The normalizer sequence above on valid UTF-8 `text` (Python semantics: str.lower() with the
/// final-sigma rule and U+0130's full mapping, str.strip()'s whitespace set).
std::string engram_normalize(std::string_view text);

/// The map from a parsed tokenizer.json (model.vocab and added_tokens; ids 0..max id must all be
/// present). A token whose decoded bytes are not valid UTF-8 or contain U+FFFD is keyed by its raw
/// token string; an empty normalisation falls back to the decoded text.
Result<CompressedTokenMap> derive_compressed_token_map(const nlohmann::json& tokenizer);

/// The same from a tokenizer.json file.
Result<CompressedTokenMap> derive_compressed_token_map_file(const std::string& path);

/// Ok when `got` equals `want` entry by entry; otherwise an error naming the first differing token
/// id and both values (or the sizes). `what` prefixes the message.
Status compare_token_maps(const std::vector<int32_t>& want, const std::vector<int32_t>& got, const std::string& what);

}  // namespace deepinfer::v41
