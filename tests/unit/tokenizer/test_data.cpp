#include "test_data.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace deepinfer::tokenizer::testing {

std::string data_path(const std::string& name) { return std::string(DI_TEST_DATA_DIR) + "/tokenizer/" + name; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    std::abort();
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string read_gzip_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    std::abort();
  }
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

const Tokenizer& deepseek_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    auto t = Tokenizer::from_path(data_path("tokenizer.json"));
    if (!t.is_ok()) {
      std::fprintf(stderr, "%s\n", t.status().to_string().c_str());
      std::abort();
    }
    return std::move(t).value();
  }();
  return *tok;
}

const std::vector<CorpusDoc>& corpus() {
  static const std::vector<CorpusDoc> docs = [] {
    std::vector<CorpusDoc> out;
    std::istringstream texts(read_file(data_path("corpus-shared.jsonl")));
    std::istringstream refs(read_gzip_file(data_path("reference-ids.jsonl.gz")));
    std::string tl, rl;
    while (std::getline(texts, tl) && std::getline(refs, rl)) {
      auto t = nlohmann::json::parse(tl);
      auto r = nlohmann::json::parse(rl);
      out.push_back(CorpusDoc{t["src"], t["text"], r["ids"].get<std::vector<TokenId>>(),
                              r["ids_text"].get<std::vector<TokenId>>()});
    }
    return out;
  }();
  return docs;
}

}  // namespace deepinfer::tokenizer::testing
