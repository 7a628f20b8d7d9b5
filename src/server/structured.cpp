#include "server/structured.h"

#include "grammar/dsml_grammar.h"

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
  // strict: false still constrains (to the schema), as vLLM does; the flag is accepted.
  return set_once(out, Kind::kJsonSchema, (*js)["schema"].dump(), "response_format", err);
}

ConstraintCompiler::ConstraintCompiler(const tokenizer::Tokenizer& tok, int32_t eos) : tok_(tok), eos_(eos) {}

Status ConstraintCompiler::init() {
  std::call_once(init_, [&] {
    auto info = grammar::TokenizerInfo::from_tokenizer(tok_, {eos_});
    if (!info.is_ok()) {
      init_status_ = info.status();
      return;
    }
    compiler_ = std::make_unique<grammar::GrammarCompiler>(std::move(info).value());
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
  Result<std::shared_ptr<const grammar::CompiledGrammar>> g = Status::invalid_argument("no constraint");
  switch (s.kind) {
    case Kind::kNone: return Status::invalid_argument("no constraint");
    case Kind::kJsonObject: g = compiler_->compile_builtin_json(/*object_only=*/true); break;
    case Kind::kJsonSchema: g = compiler_->compile_json_schema(s.spec); break;
    case Kind::kRegex: g = compiler_->compile_regex(s.spec); break;
    case Kind::kEbnf: g = compiler_->compile_ebnf(s.spec); break;
  }
  if (!g.is_ok()) return Status::invalid_argument("invalid structured-output constraint: " + std::string(g.status().message()));
  return g;
}

}  // namespace deepinfer::server
