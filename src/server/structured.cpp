#include "server/structured.h"

#include <optional>

#include "grammar/dsml_grammar.h"
#include "grammar/ebnf_parser.h"
#include "grammar/json_schema_converter.h"
#include "grammar/regex_converter.h"

namespace deepinfer::server {

namespace {
using Kind = StructuredOutput::Kind;

Status set_once(StructuredOutput& out, Kind kind, std::string spec, const std::string& param, ParseError* err) {
  if (out.any()) {
    if (err) err->param = param;
    return Status::invalid_argument("'" + param + "': only one structured-output constraint per request");
  }
  out.kind = kind;
  out.spec = std::move(spec);
  return Status::ok();
}

Status read_constraint(const Json& obj, const std::string& prefix, ParseError* err, StructuredOutput& out) {
  struct Field {
    const char* name;
    Kind kind;
  };
  for (const Field f : {Field{"guided_json", Kind::kJsonSchema}, Field{"json", Kind::kJsonSchema},
                        Field{"guided_regex", Kind::kRegex}, Field{"regex", Kind::kRegex},
                        Field{"guided_grammar", Kind::kEbnf}, Field{"grammar", Kind::kEbnf}}) {
    auto it = obj.find(f.name);
    if (it == obj.end() || it->is_null()) continue;
    const std::string param = prefix + f.name;
    if (f.kind == Kind::kJsonSchema) {
      if (it->is_object() || it->is_boolean()) DI_TRY(set_once(out, f.kind, it->dump(), param, err));
      else if (it->is_string()) DI_TRY(set_once(out, f.kind, it->get<std::string>(), param, err));
      else {
        if (err) err->param = param;
        return Status::invalid_argument("'" + param + "' must be a JSON Schema (an object or its JSON text)");
      }
    } else {
      if (!it->is_string()) {
        if (err) err->param = param;
        return Status::invalid_argument("'" + param + "' must be a string");
      }
      DI_TRY(set_once(out, f.kind, it->get<std::string>(), param, err));
    }
  }
  return Status::ok();
}

// The JSON options of structured_outputs: whitespace ("flexible" | "compact" | "spaced"),
// vLLM's disable_any_whitespace (true = "compact"), key_order ("schema" | "any").
Status read_json_options(const Json& so, ParseError* err, StructuredOutput& out) {
  auto bad = [&](const std::string& param, const std::string& msg) {
    if (err) err->param = param;
    return Status::invalid_argument(msg);
  };
  std::optional<StructuredOutput::Whitespace> ws;
  if (auto it = so.find("whitespace"); it != so.end() && !it->is_null()) {
    const std::string v = it->is_string() ? it->get<std::string>() : "";
    if (v == "flexible") ws = StructuredOutput::Whitespace::kFlexible;
    else if (v == "compact") ws = StructuredOutput::Whitespace::kCompact;
    else if (v == "spaced") ws = StructuredOutput::Whitespace::kSpaced;
    else return bad("structured_outputs.whitespace", "'structured_outputs.whitespace' must be \"flexible\", \"compact\" or \"spaced\"");
  }
  if (auto it = so.find("disable_any_whitespace"); it != so.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("structured_outputs.disable_any_whitespace", "'structured_outputs.disable_any_whitespace' must be a boolean");
    if (it->get<bool>()) {
      if (ws && *ws != StructuredOutput::Whitespace::kCompact) {
        return bad("structured_outputs.disable_any_whitespace",
                   "'structured_outputs.disable_any_whitespace' contradicts 'structured_outputs.whitespace'");
      }
      ws = StructuredOutput::Whitespace::kCompact;
    } else if (!ws) {
      ws = StructuredOutput::Whitespace::kFlexible;
    }
  }
  if (ws) {
    out.whitespace = *ws;
    out.json_options_set = true;
  }
  if (auto it = so.find("key_order"); it != so.end() && !it->is_null()) {
    const std::string v = it->is_string() ? it->get<std::string>() : "";
    if (v == "schema") out.key_order = StructuredOutput::KeyOrder::kSchema;
    else if (v == "any") out.key_order = StructuredOutput::KeyOrder::kAny;
    else return bad("structured_outputs.key_order", "'structured_outputs.key_order' must be \"schema\" or \"any\"");
    out.json_options_set = true;
  }
  return Status::ok();
}
}  // namespace

Status parse_structured_fields(const Json& body, ParseError* err, StructuredOutput& out) {
  DI_TRY(read_constraint(body, "", err, out));
  auto so = body.find("structured_outputs");
  if (so != body.end() && !so->is_null()) {
    if (!so->is_object()) {
      if (err) err->param = "structured_outputs";
      return Status::invalid_argument("'structured_outputs' must be an object");
    }
    DI_TRY(read_constraint(*so, "structured_outputs.", err, out));
    DI_TRY(read_json_options(*so, err, out));
  }
  return Status::ok();
}

Status structured_from_response_format(const Json& rf, ParseError* err, StructuredOutput& out) {
  if (rf.is_null()) return Status::ok();
  const std::string type = rf.value("type", "");
  if (type == "json_object") return set_once(out, Kind::kJsonObject, "", "response_format", err);
  if (type != "json_schema") return Status::ok();
  auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object() || !js->contains("schema")) {
    if (err) err->param = "response_format.json_schema";
    return Status::invalid_argument("'response_format.json_schema' must be an object with a 'schema'");
  }
  // OpenAI's strict (default false): true = additionalProperties absent means false (OpenAI's
  // strict mode); false / absent = JSON Schema's meaning (absent = any extra key). Either way
  // the output is constrained to the schema, as vLLM does.
  bool strict = false;
  if (auto st = js->find("strict"); st != js->end() && !st->is_null()) {
    if (!st->is_boolean()) {
      if (err) err->param = "response_format.json_schema.strict";
      return Status::invalid_argument("'response_format.json_schema.strict' must be a boolean");
    }
    strict = st->get<bool>();
  }
  DI_TRY(set_once(out, Kind::kJsonSchema, (*js)["schema"].dump(), "response_format", err));
  out.strict = strict;
  return Status::ok();
}

ConstraintCompiler::ConstraintCompiler(const tokenizer::Tokenizer& tok, int32_t eos, grammar::CompilerOptions options)
    : tok_(tok), eos_(eos), options_(options) {}

Status ConstraintCompiler::init() {
  std::call_once(init_, [&] {
    auto info = grammar::TokenizerInfo::from_tokenizer(tok_, {eos_});
    if (!info.is_ok()) {
      init_status_ = info.status();
      return;
    }
    compiler_ = std::make_unique<grammar::GrammarCompiler>(std::move(info).value(), options_);
  });
  return init_status_;
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> ConstraintCompiler::compile_tool_calls(const ToolCallConstraint& c) {
  DI_TRY(init());
  grammar::DsmlGrammarOptions o;
  o.v41 = c.v41;
  o.after_reasoning = c.after_reasoning;
  if (!c.named.empty()) o.only = {c.named};
  o.max_calls = c.parallel ? grammar::kUnbounded : 1;
  auto g = grammar::dsml_tool_calls_grammar(c.tools.dump(), o);
  if (!g.is_ok()) return Status::invalid_argument("tools: cannot constrain the tool call: " + std::string(g.status().message()));
  auto cg = compiler_->compile(*g);
  if (!cg.is_ok()) return Status::invalid_argument("tools: cannot constrain the tool call: " + std::string(cg.status().message()));
  return cg;
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> ConstraintCompiler::compile(const StructuredOutput& s) {
  DI_TRY(init());
  grammar::JsonSchemaOptions jo;
  jo.whitespace = s.whitespace == StructuredOutput::Whitespace::kCompact  ? grammar::JsonWhitespace::kCompact
                  : s.whitespace == StructuredOutput::Whitespace::kSpaced ? grammar::JsonWhitespace::kSpaced
                                                                          : grammar::JsonWhitespace::kFlexible;
  jo.key_order = s.key_order == StructuredOutput::KeyOrder::kAny ? grammar::JsonKeyOrder::kAny : grammar::JsonKeyOrder::kSchema;
  jo.strict = s.strict;
  if (s.json_options_set && (s.kind == Kind::kRegex || s.kind == Kind::kEbnf)) {
    return Status::invalid_argument(
        "structured_outputs.whitespace / key_order / disable_any_whitespace apply to JSON constraints only, not to a regex or grammar");
  }
  Result<grammar::Grammar> g = Status::invalid_argument("no constraint");
  switch (s.kind) {
    case Kind::kNone: return Status::invalid_argument("no constraint");
    case Kind::kJsonObject: g = grammar::parse_ebnf(grammar::builtin_json_ebnf(/*object_only=*/true, jo), "root"); break;
    case Kind::kJsonSchema: g = grammar::json_schema_to_grammar(s.spec, jo); break;
    case Kind::kRegex: g = grammar::regex_to_grammar(s.spec); break;
    case Kind::kEbnf: g = grammar::parse_ebnf(s.spec, "root"); break;
  }
  // Thinking mode without an added </think> token: free reasoning, then the constraint.
  if (g.is_ok() && s.after_reasoning) g = grammar::after_reasoning_grammar(*g);
  if (!g.is_ok()) return Status::invalid_argument("invalid structured-output constraint: " + std::string(g.status().message()));
  auto cg = compiler_->compile(*g);
  if (!cg.is_ok()) return Status::invalid_argument("invalid structured-output constraint: " + std::string(cg.status().message()));
  return cg;
}

}  // namespace deepinfer::server
