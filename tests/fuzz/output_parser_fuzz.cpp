// libFuzzer target: the streaming output parser (tokenizer/output_parser.h).
// Input: byte 0 = options (format V4/V4.1, starts in reasoning), bytes 1-4 = chunking seed, then a
// program: a byte < 0x80 is that ASCII character, a byte >= 0x80 picks a fragment of the V4/V4.1
// output grammar (markers, cut markers, quotes, JSON, non-ASCII text), so the fuzzer reaches the
// DSML states quickly. Checks: for a random chunking (cut on UTF-8 boundaries), the streaming parse
// fails exactly when the one-shot parse fails, and otherwise its message() and its concatenated
// deltas equal the one-shot result; a delta never carries a marker into content.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/output_parser.h"

using namespace deepinfer::tokenizer;

namespace {

const char* const kFragments[] = {
    "</think>", "<think>", "<｜end▁of▁sentence｜>", "\n\n<｜DSML｜tool_calls>\n", "\n\n<｜DSML｜ calls>\n",
    "<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>", "<｜DSML｜ calls>", "</｜DSML｜ calls>",
    "<｜DSML｜invoke name=\"", "<｜DSML｜ invoke name=\"", "</｜DSML｜invoke>", "</｜DSML｜ invoke>",
    "<｜DSML｜parameter name=\"", "<｜DSML｜ parameter name=\"", "</｜DSML｜parameter>", "</｜DSML｜ parameter>",
    "\" string=\"true\">", "\" string=\"false\">", "\">", "\"", ">", "<", "</", "｜DSML｜", "<｜DSML", "<｜",
    "｜", "\n", "\n\n", "get_weather", "city", "{\"a\": [1, 2]}", "42", "true", "null", "\\", "\"q\"",
    "中文", "é", "🦀", "\t", " ", "<｜User｜>", "<｜Assistant｜>", "</th", "</｜DSML｜", "<｜end▁of",
};
constexpr size_t kNumFragments = sizeof(kFragments) / sizeof(kFragments[0]);

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "output_parser_fuzz: check failed: %s\n", what);
    std::abort();
  }
}

struct Collected {
  std::string reasoning, content;
  std::vector<ParsedToolCall> calls;
  void add(const OutputDelta& d) {
    reasoning += d.reasoning_content;
    content += d.content;
    for (const auto& c : d.tool_calls) {
      check(c.index >= 0 && static_cast<size_t>(c.index) <= calls.size(), "tool call index in order");
      if (static_cast<size_t>(c.index) == calls.size()) calls.push_back({c.name, ""});
      else check(c.name.empty(), "a call's name only in its first delta");
      calls[c.index].arguments += c.arguments;
    }
  }
};

bool same(const ParsedMessage& a, const ParsedMessage& b) {
  if (a.reasoning_content != b.reasoning_content || a.content != b.content) return false;
  if (a.tool_calls.size() != b.tool_calls.size()) return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i)
    if (a.tool_calls[i].name != b.tool_calls[i].name || a.tool_calls[i].arguments != b.tool_calls[i].arguments)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  OutputParserOptions opts;
  opts.format = (data[0] & 1) ? ChatFormat::kV41 : ChatFormat::kV4;
  opts.starts_in_reasoning = (data[0] & 2) != 0;
  const uint32_t seed = data[1] | data[2] << 8 | data[3] << 16 | static_cast<uint32_t>(data[4]) << 24;
  std::string text;
  for (size_t i = 5; i < size; ++i) {
    if (data[i] < 0x80) text += static_cast<char>(data[i]);
    else text += kFragments[(data[i] - 0x80) % kNumFragments];
  }

  auto one_shot = parse_completion(text, opts);

  std::mt19937 rng(seed);
  OutputParser p(opts);
  Collected got;
  size_t i = 0;
  const uint32_t max_chunk = 1 + (seed >> 28);  // 1..16 bytes, sometimes 1-byte chunks throughout
  while (i < text.size()) {
    size_t n = 1 + rng() % max_chunk;
    size_t j = std::min(text.size(), i + n);
    while (j < text.size() && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80) ++j;  // UTF-8 boundary
    OutputDelta d = p.push(std::string_view(text).substr(i, j - i));
    got.add(d);
    i = j;
  }
  auto fin = p.finish();
  check(fin.is_ok() == one_shot.is_ok(), "streaming fails exactly when one-shot fails");
  if (!fin.is_ok()) return 0;
  got.add(*fin);
  check(same(p.message(), *one_shot), "streaming message() == one-shot result");
  ParsedMessage from_deltas{got.reasoning, got.content, got.calls};
  check(same(from_deltas, *one_shot), "concatenated deltas == one-shot result");
  check(got.content.find("｜DSML｜") == std::string::npos || one_shot->content.find("｜DSML｜") != std::string::npos,
        "no DSML marker leaks into content");
  return 0;
}
