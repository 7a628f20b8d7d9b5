// grammar_bench: compile time per JSON schema and per-token mask time (p50/p99/max) at DeepSeek's
// 129k vocabulary, measured along random walks (a realistic mix of positions: inside strings,
// numbers, between keys). Prints one JSON document with one section per whitespace mode:
// "flexible" (any JSON whitespace between tokens, at most 16 in a row: what the server uses by
// default) and "compact" (none; structured_outputs.whitespace = "compact").
//
//   grammar_bench TOKENIZER_JSON SCHEMAS_JSON [--walks N] [--tokens N] [--threads N]
//                 [--whitespace flexible|compact|spaced|all] [--key-order schema|any]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/compiler.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace deepinfer;
using namespace deepinfer::grammar;

namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: grammar_bench TOKENIZER_JSON SCHEMAS_JSON [--walks N] [--tokens N] [--threads N] "
                         "[--whitespace flexible|compact|spaced|all] [--key-order schema|any]\n");
    return 2;
  }
  int walks = 4, max_tokens = 64, threads = 2;
  std::string whitespace = "all", key_order = "schema";
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--walks") walks = std::atoi(argv[i + 1]);
    else if (a == "--tokens") max_tokens = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--whitespace") whitespace = argv[i + 1];
    else if (a == "--key-order") key_order = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<std::pair<std::string, JsonWhitespace>> modes;
  for (const auto& [name, ws] : std::vector<std::pair<std::string, JsonWhitespace>>{
           {"flexible", JsonWhitespace::kFlexible}, {"compact", JsonWhitespace::kCompact}, {"spaced", JsonWhitespace::kSpaced}}) {
    if (whitespace == name || (whitespace == "all" && name != "spaced")) modes.push_back({name, ws});
  }
  if (modes.empty() || (key_order != "schema" && key_order != "any")) {
    std::fprintf(stderr, "bad --whitespace or --key-order\n");
    return 2;
  }
  auto tok = tokenizer::Tokenizer::from_path(argv[1]);
  if (!tok.is_ok()) {
    std::fprintf(stderr, "%s\n", tok.status().to_string().c_str());
    return 1;
  }
  double t0 = now_us();
  auto info = TokenizerInfo::from_tokenizer(**tok).value();
  double trie_ms = (now_us() - t0) / 1000;
  std::ifstream in(argv[2]);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::ordered_json schemas;
  try {
    schemas = nlohmann::ordered_json::parse(ss.str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  CompilerOptions copts;
  copts.num_threads = threads;
  nlohmann::ordered_json out;
  out["vocab_size"] = info->vocab_size();
  out["tokenizer_info_ms"] = trie_ms;
  out["compile_threads"] = threads;
  std::vector<uint32_t> mask(static_cast<size_t>(info->bitmask_words()));
  auto run_mode = [&](JsonWhitespace mode_ws, nlohmann::ordered_json& sec) -> bool {
    std::vector<double> all_mask_us;
    for (const auto& e : schemas) {
      std::string name = e["name"];
      GrammarCompiler compiler(info, copts);  // fresh cache: measure a cold compile
      JsonSchemaOptions jopts;
      jopts.whitespace = mode_ws;
      jopts.key_order = key_order == "any" ? JsonKeyOrder::kAny : JsonKeyOrder::kSchema;
      double c0 = now_us();
      auto g = compiler.compile_json_schema(e["schema"].dump(), jopts);
      double compile_ms = (now_us() - c0) / 1000;
      if (!g.is_ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), g.status().to_string().c_str());
        return false;
      }
      double h0 = now_us();
      auto again = compiler.compile_json_schema(e["schema"].dump(), jopts);
      double cached_us = now_us() - h0;
      std::vector<double> mask_us;
      std::mt19937_64 rng(7);
      for (int w = 0; w < walks; ++w) {
        Matcher m(*g);
        for (int t = 0; t < max_tokens && !m.is_terminated(); ++t) {
          double m0 = now_us();
          m.fill_next_token_bitmask(mask);
          mask_us.push_back(now_us() - m0);
          std::vector<int32_t> allowed;
          for (int32_t id = 0; id < info->vocab_size(); ++id) {
            if ((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u) allowed.push_back(id);
          }
          if (allowed.empty()) break;
          // Prefer the jump-forward/short tokens half the time so walks finish and visit all states.
          int32_t pick = allowed[rng() % allowed.size()];
          if (m.can_terminate() && rng() % 3 == 0) pick = info->stop_ids()[0];
          m.accept_token(pick);
        }
      }
      all_mask_us.insert(all_mask_us.end(), mask_us.begin(), mask_us.end());
      const CompileStats& st = (*g)->stats();
      sec["schemas"].push_back({{"name", name},
                                {"compile_ms", compile_ms},
                                {"cached_compile_us", cached_us},
                                {"states", st.num_states},
                                {"cached_states", st.num_cached_states},
                                {"classified_states", st.num_classified_states},
                                {"max_uncertain_tokens", st.max_uncertain},
                                {"cache_mib", static_cast<double>(st.cache_bytes) / (1 << 20)},
                                {"classify_steps", st.classify_steps},
                                {"mask_samples", mask_us.size()},
                                {"mask_p50_us", percentile(mask_us, 0.5)},
                                {"mask_p99_us", percentile(mask_us, 0.99)},
                                {"mask_max_us", percentile(mask_us, 1.0)}});
    }
    sec["all"] = {{"mask_samples", all_mask_us.size()},
                  {"mask_p50_us", percentile(all_mask_us, 0.5)},
                  {"mask_p99_us", percentile(all_mask_us, 0.99)},
                  {"mask_max_us", percentile(all_mask_us, 1.0)}};
    return true;
  };
  out["key_order"] = key_order;
  for (const auto& [name, ws] : modes) {
    nlohmann::ordered_json sec;
    if (!run_mode(ws, sec)) return 1;
    out[name] = std::move(sec);
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
