// `deepinfer tokenize` and `deepinfer detokenize`: JSON-lines in, JSON-lines out.
//   tokenize:   {"text": "..."}  ->  {"ids": [...]}     (--special-tokens parse|text)
//   detokenize: {"ids": [...]}   ->  {"text": "..."}    (--skip-special-tokens)
// Output line N answers input line N. A line that is blank, not valid UTF-8, not JSON, or lacks
// the field stops the run with exit code 1 and a message naming the file, line (and byte offset);
// nothing is guessed, replaced or skipped (a skipped line would shift every later answer).
// --tokenizer takes a tokenizer.json file or a directory holding one.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "core/result.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::cli {
namespace {

using tokenizer::Tokenizer;
using tokenizer::TokenId;

struct TokenizeArgs {
  std::string tokenizer_path;
  std::string special_tokens = "text";
  std::string input = "-";
  std::string output = "-";
  bool skip_special = false;
};

// Opens `path` ("-" = the standard stream) for the duration of a command.
class Streams {
 public:
  Status open(const std::string& in, const std::string& out) {
    if (in != "-") {
      in_file_ = std::make_unique<std::ifstream>(in, std::ios::binary);
      if (!*in_file_) return Status::not_found("cannot open input " + in);
    }
    if (out != "-") {
      out_file_ = std::make_unique<std::ofstream>(out, std::ios::binary | std::ios::trunc);
      if (!*out_file_) return Status::not_found("cannot open output " + out);
    }
    return Status::ok();
  }
  std::istream& in() { return in_file_ ? *in_file_ : std::cin; }
  std::ostream& out() { return out_file_ ? *out_file_ : std::cout; }

 private:
  std::unique_ptr<std::ifstream> in_file_;
  std::unique_ptr<std::ofstream> out_file_;
};

// Parses one JSON line after checking it is UTF-8, so that the error names the byte.
Result<nlohmann::json> parse_line(const std::string& line) {
  DI_TRY(tokenizer::validate_utf8(line));
  try {
    return nlohmann::json::parse(line);
  } catch (const std::exception& e) {
    return Status::invalid_argument(std::string("not JSON: ") + e.what());
  }
}

// Runs `fn(json) -> Result<json>` over every line, one output line per input line.
template <class Fn>
Status for_each_line(const TokenizeArgs& a, Fn fn) {
  Streams s;
  DI_TRY(s.open(a.input, a.output));
  std::string line;
  std::string out;
  for (size_t lineno = 1; std::getline(s.in(), line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto where = a.input + ":" + std::to_string(lineno);
    if (line.find_first_not_of(" \t") == std::string::npos) {
      return Status::invalid_argument(
                 "blank line: every input line must be one JSON object (output line N answers input line N; "
                 "use {\"text\": \"\"} for empty text)")
          .with_context(where);
    }
    auto j = parse_line(line);
    if (!j.is_ok()) return j.status().with_context(where);
    auto r = fn(*j);
    if (!r.is_ok()) return r.status().with_context(where);
    out = r->dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    out.push_back('\n');
    s.out().write(out.data(), static_cast<std::streamsize>(out.size()));
  }
  s.out().flush();
  if (!s.out()) return Status::data_loss("write failed: " + a.output);
  return Status::ok();
}

int report(const Status& st) {
  if (st.is_ok()) return 0;
  std::fprintf(stderr, "deepinfer: %s\n", st.to_string().c_str());
  return 1;
}

Result<std::unique_ptr<Tokenizer>> load(const TokenizeArgs& a) { return Tokenizer::from_path(a.tokenizer_path); }

int run_tokenize(const TokenizeArgs& a) {
  auto mode = tokenizer::parse_special_token_mode(a.special_tokens);
  if (!mode.is_ok()) return report(mode.status());
  auto tok = load(a);
  if (!tok.is_ok()) return report(tok.status());
  return report(for_each_line(a, [&](const nlohmann::json& j) -> Result<nlohmann::json> {
    auto it = j.find("text");
    if (!j.is_object() || it == j.end() || !it->is_string()) {
      return Status::invalid_argument("expected {\"text\": string}");
    }
    DI_ASSIGN_OR_RETURN(std::vector<TokenId> ids, (*tok)->encode(it->get_ref<const std::string&>(), *mode));
    return nlohmann::json{{"ids", std::move(ids)}};
  }));
}

int run_detokenize(const TokenizeArgs& a) {
  auto tok = load(a);
  if (!tok.is_ok()) return report(tok.status());
  tokenizer::DecodeOptions opts;
  opts.skip_special_tokens = a.skip_special;
  return report(for_each_line(a, [&](const nlohmann::json& j) -> Result<nlohmann::json> {
    auto it = j.find("ids");
    if (!j.is_object() || it == j.end() || !it->is_array()) {
      return Status::invalid_argument("expected {\"ids\": [int, ...]}");
    }
    std::vector<TokenId> ids;
    for (const auto& v : *it) {
      if (!v.is_number_integer()) return Status::invalid_argument("ids must be integers");
      ids.push_back(v.get<TokenId>());
    }
    DI_ASSIGN_OR_RETURN(std::string text, (*tok)->decode(ids, opts));
    return nlohmann::json{{"text", std::move(text)}};
  }));
}

void add_common(CLI::App* sub, TokenizeArgs& a) {
  sub->add_option("--tokenizer", a.tokenizer_path, "tokenizer.json or a model directory")->required();
  sub->add_option("--input", a.input, "JSON-lines input file ('-' = stdin)");
  sub->add_option("--output", a.output, "JSON-lines output file ('-' = stdout)");
}

}  // namespace

void register_tokenizer_commands(CLI::App& app, Registry& reg) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* tok = app.add_subcommand("tokenize", "text -> token ids ({\"text\"} lines -> {\"ids\"} lines)");
  add_common(tok, *args);
  tok->add_option("--special-tokens", args->special_tokens,
                  "parse: added-token spellings become control tokens; text: everything is plain text")
      ->check(CLI::IsMember({"parse", "text"}))
      ->required();
  reg.add(tok, [args] { return run_tokenize(*args); });

  auto dargs = std::make_shared<TokenizeArgs>();
  CLI::App* detok = app.add_subcommand("detokenize", "token ids -> text ({\"ids\"} lines -> {\"text\"} lines)");
  add_common(detok, *dargs);
  detok->add_flag("--skip-special-tokens", dargs->skip_special, "drop BOS/EOS/pad and other special tokens");
  reg.add(detok, [dargs] { return run_detokenize(*dargs); });
}

}  // namespace deepinfer::cli
