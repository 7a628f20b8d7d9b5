// Shared helpers of the tokenizer tests: paths under tests/data/tokenizer, the loaded tokenizer
// (once per test binary) and the corpus with its HF reference ids.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer::testing {

std::string data_path(const std::string& name);  // tests/data/tokenizer/<name>
std::string read_file(const std::string& path);
/// Reads a .gz file (zlib).
std::string read_gzip_file(const std::string& path);

/// The DeepSeek tokenizer of tests/data/tokenizer/tokenizer.json; aborts the test binary if it
/// cannot be loaded.
const Tokenizer& deepseek_tokenizer();

struct CorpusDoc {
  std::string src;
  std::string text;
  std::vector<TokenId> ids;       // HF encode(text, add_special_tokens=False)
  std::vector<TokenId> ids_text;  // the same with no added vocabulary
};
/// corpus-shared.jsonl joined with reference-ids.jsonl.gz (loaded once).
const std::vector<CorpusDoc>& corpus();

}  // namespace deepinfer::tokenizer::testing
