// libFuzzer target: the structured-output front ends a request reaches (EBNF, regex, JSON Schema,
// DSML tool calls) and the compiler and matcher behind them, over a small vocabulary (the 256
// single bytes, some multi-byte JSON pieces, an end token), so that each input compiles quickly.
// Input: byte 0 picks the front end (and the JSON options), the rest is the grammar text.
// Checks:
//  - no crash, no sanitizer report, no slow input (libFuzzer -timeout), no unbounded memory
//    (-rss_limit_mb): user text must fail with an error, never bring the server down;
//  - a front end's error carries a message;
//  - for a compiled grammar, a walk of up to 48 tokens: every token the mask allows is accepted
//    (accept_token true), every token it refuses is refused, the end token is allowed exactly
//    when can_terminate(), and rollback(1) restores the mask.
// Built by scripts/fuzz.sh (CMake option DI_FUZZ, clang).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/dsml_grammar.h"
#include "grammar/ebnf_parser.h"
#include "grammar/json_schema_converter.h"
#include "grammar/matcher.h"
#include "grammar/regex_converter.h"
#include "grammar/tokenizer_info.h"

using namespace deepinfer::grammar;
using deepinfer::Result;

namespace {

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "grammar_fuzz: property failed: %s\n", what);
  std::abort();
}

constexpr int32_t kEos = 0;  // id 0: the end token; ids 1..256: single bytes; then pieces

std::shared_ptr<const TokenizerInfo> vocab() {
  static const std::shared_ptr<const TokenizerInfo> info = [] {
    std::vector<std::string> t{"</s>"};
    for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
    for (const char* p : {"{\"", "\":", "\": ", "\",", ", \"", "\"}", "true", "false", "null", "12", "-0", ".5",
                          "e+", "  ", "\n", "\\u00", "\\\"", "ab", "abc", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                          "<｜DSML｜", "｜DSML｜>", "invoke", "parameter", "name=\"", "</think>"})
      t.emplace_back(p);
    auto r = TokenizerInfo::from_vocab(std::move(t), {kEos});
    if (!r.is_ok()) {
      std::fprintf(stderr, "grammar_fuzz: %s\n", r.status().to_string().c_str());
      std::abort();
    }
    return *r;
  }();
  return info;
}

GrammarCompiler& compiler() {
  static GrammarCompiler c(vocab(), CompilerOptions{.num_threads = 1, .max_states = 1 << 16, .max_cache_entries = 1});
  return c;
}

template <typename T>
bool usable(const Result<T>& r) {
  if (!r.is_ok()) check(!r.status().message().empty(), "a front-end error without a message");
  return r.is_ok();
}

bool allowed(std::span<const uint32_t> mask, int32_t id) { return (mask[size_t(id) / 32] >> (id % 32)) & 1u; }

// The walk: at each step, every id's mask bit must agree with accept_token (tried on a rolled-back
// copy of the state), then one allowed id, picked by the input's bytes, is taken.
void walk(const std::shared_ptr<const CompiledGrammar>& g, std::string_view choices) {
  Matcher m(g);
  const int32_t V = g->tokenizer().vocab_size();
  std::vector<uint32_t> mask(size_t(g->tokenizer().bitmask_words())), again(mask.size());
  for (size_t step = 0; step < 48 && !m.is_terminated(); ++step) {
    m.fill_next_token_bitmask(mask);
    check(allowed(mask, kEos) == m.can_terminate(), "the end token allowed exactly when the output can end");
    std::vector<int32_t> ok;
    for (int32_t id = 0; id < V; ++id) {
      if (id == kEos) continue;
      const bool accepted = m.accept_token(id);
      check(accepted == allowed(mask, id), "the mask agrees with accept_token");
      if (accepted) {
        check(m.rollback(1), "rollback after an accepted token");
        ok.push_back(id);
      }
    }
    m.fill_next_token_bitmask(again);
    check(again == mask, "rollback restores the mask");
    if (ok.empty()) break;  // only the end (or nothing: an empty language) is left
    const unsigned pick = choices.empty() ? step : static_cast<unsigned char>(choices[step % choices.size()]);
    check(m.accept_token(ok[pick % ok.size()]), "an allowed token is accepted");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  JsonSchemaOptions opts;
  opts.whitespace = (mode >> 3) % 3 == 0 ? JsonWhitespace::kCompact
                    : (mode >> 3) % 3 == 1 ? JsonWhitespace::kSpaced
                                           : JsonWhitespace::kFlexible;
  opts.max_whitespace = 2;
  opts.strict = (mode >> 5) & 1;
  opts.key_order = (mode >> 6) & 1 ? JsonKeyOrder::kAny : JsonKeyOrder::kSchema;
  Result<Grammar> g = Grammar{};
  switch (mode % 4) {
    case 0:
      g = parse_ebnf(text);
      break;
    case 1:
      g = regex_to_grammar(text);
      break;
    case 2:
      g = json_schema_to_grammar(text, opts);
      break;
    default: {  // the text as the OpenAI tools array of a tool-call constraint
      DsmlGrammarOptions t;
      t.v41 = (mode >> 2) & 1;
      t.after_reasoning = (mode >> 7) & 1;
      t.max_calls = (mode >> 3) & 1 ? 1 : kUnbounded;
      g = dsml_tool_calls_grammar(text, t);
      break;
    }
  }
  if (!usable(g)) return 0;
  auto compiled = compiler().compile(*g);
  if (!usable(compiled)) return 0;
  walk(*compiled, text);
  return 0;
}
