// DSML tool-call grammar: the grammar of one or more DeepSeek-V4 tool calls, built from OpenAI
// function tools, for tool_choice "required" / a named function (issue 7 / F).
//
// The output it accepts is exactly what the V4 encoder renders for an assistant turn's
// tool_calls (chat_encoding.cpp render_tool_calls) and what tokenizer/output_parser.h parses:
//
//   \n\n<｜DSML｜tool_calls>\n
//   <｜DSML｜invoke name="NAME">\n
//   <｜DSML｜parameter name="KEY" string="true">RAW TEXT</｜DSML｜parameter>\n
//   <｜DSML｜parameter name="KEY" string="false">JSON</｜DSML｜parameter>\n
//   </｜DSML｜invoke>\n
//   <｜DSML｜invoke name="NAME2">\n ... </｜DSML｜invoke>\n
//   </｜DSML｜tool_calls>
//
// (V4.1: `｜DSML｜ calls`, `｜DSML｜ invoke`, `｜DSML｜ parameter`.) `｜DSML｜` is a special-token
// terminal (`<"｜DSML｜">`): matched by id where the tokenizer has it as an added token (the tiny
// fixtures), else as text (the 129k V4 vocabulary spells it as text).
//
// Parameters come in schema order; required ones always, optional ones may be skipped; keys not
// in `properties` are never produced (additionalProperties is not used: fewer keys still
// validate). A parameter whose schema is a plain string (`type: "string"`, optionally enum /
// const) is raw text, string="true" (the encoder's form for strings), which never contains
// `</｜DSML｜parameter` (the parser ends the value at its first occurrence); every other schema
// (numbers, booleans, objects, arrays, anyOf, strings with pattern / format / length bounds) is
// string="false" with a JSON value following the schema (json_schema_converter.h), spaced as
// the encoder's json.dumps by default. A tool without parameters renders
// `">\n</｜DSML｜invoke>`, the form the output parser accepts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_converter.h"

namespace deepinfer::grammar {

struct DsmlGrammarOptions {
  /// V4.1 tag names (leading space; the block is `calls`).
  bool v41 = false;
  /// Only these tools may be called (a named tool_choice); empty = any of `tools`.
  std::vector<std::string> only;
  /// Number of invokes in the block: at least `min_calls`, at most `max_calls` (kUnbounded = no
  /// limit; parallel_tool_calls=false is 1).
  int32_t min_calls = 1;
  int32_t max_calls = kUnbounded;
  /// The output starts inside the reasoning (thinking mode where `</think>` is no added token,
  /// so the engine cannot start the grammar at that token): free text without `</think>`, then
  /// `</think>` (a special-token terminal), then the calls.
  bool after_reasoning = false;
  /// Whitespace of string="false" JSON values (kSpaced: Python json.dumps, what the encoder writes).
  JsonSchemaOptions json = {JsonWhitespace::kSpaced, true, 16};
};

/// `tools_json`: a JSON array of OpenAI tools ({"type": "function", "function": {"name",
/// "parameters"}}) or of bare function objects. Errors name the tool and parameter (an
/// unsupported schema keyword, a missing name, no tool left after `only`).
Result<Grammar> dsml_tool_calls_grammar(std::string_view tools_json, const DsmlGrammarOptions& opts = {});

/// `g` preceded by a reasoning section: free text that never contains `</think>`, then `</think>`
/// (a special-token terminal: the added token where the tokenizer has one, else the text). For
/// thinking mode when `</think>` is no added token, so the engine cannot start the grammar at
/// that token (EngineRequest::grammar_start_token): the tool-call grammar (`after_reasoning`) and
/// every structured-output constraint (server/structured.h) are wrapped in it.
Result<Grammar> after_reasoning_grammar(const Grammar& g);

/// The DSML special token's content.
inline constexpr const char* kDsmlToken = "｜DSML｜";

}  // namespace deepinfer::grammar
