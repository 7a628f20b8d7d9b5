// Structured outputs at the API edge: which constraint a request asks for (response_format
// json_object / json_schema, or vLLM's guided_json / guided_regex / guided_grammar, the
// structured_outputs object, and the short json / regex / grammar fields), and its compilation
// against the served tokenizer (cached by the grammar compiler). An invalid schema, regex or
// grammar is kInvalidArgument with the compiler's reason (HTTP 400).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "grammar/compiler.h"
#include "server/openai_types.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

/// Reads the vLLM-style fields; at most one constraint per request.
Status parse_structured_fields(const Json& body, ParseError* err, StructuredOutput& out);
/// Folds an OpenAI response_format object into `out` (error if another constraint was given).
Status structured_from_response_format(const Json& response_format, ParseError* err, StructuredOutput& out);

/// Which tool calls a request forces (tool_choice "required" or a named function).
struct ToolCallConstraint {
  Json tools;                // the request's OpenAI tools
  std::string named;         // "" = any tool (required)
  bool parallel = true;      // parallel_tool_calls: one or more calls, else exactly one
  bool v41 = false;          // V4.1 DSML tag names
  bool after_reasoning = false;  // the grammar starts in the reasoning (no added </think> token)
};

class ConstraintCompiler {
 public:
  ConstraintCompiler(const tokenizer::Tokenizer& tok, int32_t eos_token_id, grammar::CompilerOptions options = {});
  Result<std::shared_ptr<const grammar::CompiledGrammar>> compile(const StructuredOutput& s);
  /// The DSML tool-call grammar (grammar/dsml_grammar.h) of `c`: the output is one or more DSML
  /// invokes whose parameters follow each tool's JSON Schema; kInvalidArgument names the tool and
  /// parameter whose schema is unsupported.
  Result<std::shared_ptr<const grammar::CompiledGrammar>> compile_tool_calls(const ToolCallConstraint& c);

 private:
  Status init();

  const tokenizer::Tokenizer& tok_;
  int32_t eos_;
  grammar::CompilerOptions options_;
  std::once_flag init_;
  Status init_status_;
  std::unique_ptr<grammar::GrammarCompiler> compiler_;
};

}  // namespace deepinfer::server
