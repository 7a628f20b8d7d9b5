// tokenizer_bench: single-thread throughput of the DeepSeek tokenizer on a JSON-lines corpus.
//   tokenizer_bench TOKENIZER_JSON CORPUS_JSONL [repeats [IDS_OUT_JSONL]]
// Prints one JSON object: load time, encode MB/s and M tokens/s (parse and text modes, cold =
// first pass with an empty piece cache, warm = best later pass), decode M tokens/s (one-shot and
// incremental), and the 1 MB-without-spaces worst case. IDS_OUT_JSONL, if given, receives one line
// {"ids": [...], "ids_text": [...]} per document (bench/tokenizer_vs_hf.sh compares them with HF's).
// Not a test.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

using namespace deepinfer::tokenizer;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON CORPUS_JSONL [repeats [IDS_OUT_JSONL]]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  auto t0 = Clock::now();
  auto tok_r = Tokenizer::from_path(argv[1]);
  if (!tok_r.is_ok()) {
    std::fprintf(stderr, "%s\n", tok_r.status().to_string().c_str());
    return 1;
  }
  const double load_s = seconds_since(t0);
  const Tokenizer& tok = **tok_r;
  std::vector<std::string> docs;
  size_t bytes = 0;
  {
    std::ifstream in(argv[2]);
    for (std::string line; std::getline(in, line);) {
      docs.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
      bytes += docs.back().size();
    }
  }
  nlohmann::ordered_json out;
  out["tokenizer"] = argv[1];
  out["corpus"] = argv[2];
  out["docs"] = docs.size();
  out["bytes"] = bytes;
  out["load_s"] = load_s;
  std::vector<std::vector<TokenId>> ids(docs.size()), ids_parse;
  for (auto [name, mode] : {std::pair{"parse", SpecialTokenMode::kParse}, std::pair{"text", SpecialTokenMode::kText}}) {
    double cold = 0, warm = 1e30;
    size_t num_tokens = 0;
    for (int r = 0; r <= repeats; ++r) {
      num_tokens = 0;
      auto t = Clock::now();
      for (size_t i = 0; i < docs.size(); ++i) {
        ids[i] = tok.encode(docs[i], mode).value();
        num_tokens += ids[i].size();
      }
      double s = seconds_since(t);
      if (r == 0) cold = s; else warm = std::min(warm, s);
    }
    out["encode_" + std::string(name)] = {{"tokens", num_tokens},
                                          {"cold_MBps", bytes / cold / 1e6}, {"cold_Mtokps", num_tokens / cold / 1e6},
                                          {"warm_MBps", bytes / warm / 1e6}, {"warm_Mtokps", num_tokens / warm / 1e6}};
    if (mode == SpecialTokenMode::kParse) ids_parse = ids;
  }
  if (argc > 4) {
    std::ofstream ids_out(argv[4]);
    for (size_t i = 0; i < docs.size(); ++i)
      ids_out << nlohmann::json{{"ids", ids_parse[i]}, {"ids_text", ids[i]}}.dump() << "\n";
  }
  size_t num_tokens = 0;
  for (const auto& v : ids) num_tokens += v.size();
  double best = 1e30, best_inc = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto t = Clock::now();
    size_t sink = 0;
    for (const auto& v : ids) sink += tok.decode(v).value().size();
    best = std::min(best, seconds_since(t));
    t = Clock::now();
    for (const auto& v : ids) {
      IncrementalDecoder dec(tok);
      for (TokenId id : v) sink += dec.push(id).value().size();
      sink += dec.flush().size();
    }
    best_inc = std::min(best_inc, seconds_since(t));
    if (sink == 0) std::fprintf(stderr, "?");
  }
  out["decode_Mtokps"] = num_tokens / best / 1e6;
  out["incremental_decode_Mtokps"] = num_tokens / best_inc / 1e6;
  std::string no_spaces(1 << 20, 'Z');
  for (size_t i = 0; i < no_spaces.size(); i += 7) no_spaces[i] = 'q';
  auto t = Clock::now();
  size_t n = tok.encode(no_spaces, SpecialTokenMode::kText).value().size();
  out["one_MB_without_spaces"] = {{"seconds", seconds_since(t)}, {"tokens", n}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
