// JSON Schema -> grammar (EBNF text, then parse_ebnf). Supported keywords:
//   type (string or array of types), nullable (OpenAPI), enum, const, anyOf, oneOf (as anyOf:
//   exclusivity is not enforced), allOf (merged: properties/required united, other keywords must
//   agree), $ref / $defs / definitions (JSON pointers into the document, recursion allowed),
//   properties, required, additionalProperties (false / true / schema; absent = false when
//   `strict`, else true: JSON Schema's own meaning), prefixItems, items (schema or false),
//   minItems, maxItems,
//   string: pattern (matched as a whole, ^ and $ optional), format (date, time, date-time, email,
//   uuid, ipv4, hostname, uri), minLength, maxLength (code points);
//   number / integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (integer ranges exact;
//   non-integer bounds of numbers are rounded inwards to integers, i.e. conservative).
// Annotations are ignored: title, description, default, examples, $schema, $id, $comment,
// deprecated, readOnly, writeOnly. Any other keyword is an error naming it.
// enum / const values are emitted literally, filtered by the keywords beside them (type, bounds,
// lengths, pattern (ECMAScript search, as JSON Schema), items, properties, required, anyOf...);
// none left is an error naming the keyword that rejected them ('format' beside them is an error).
// Without `type` the type is inferred from the keywords present (properties/required/
// additionalProperties: object; items/prefixItems/minItems/maxItems: array; pattern/format/
// lengths: string; bounds: number), a narrowing that only produces valid documents.
// Objects emit properties in schema order (optional ones may be skipped), or in any order
// (JsonKeyOrder::kAny, each property at most once, objects of up to kMaxAnyOrderProperties).
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

enum class JsonWhitespace {
  kCompact,   // {"a":1,"b":[1,2]}
  kSpaced,    // {"a": 1, "b": [1, 2]}
  kFlexible,  // any JSON whitespace between tokens
};

enum class JsonKeyOrder {
  kSchema,  // properties in the order of `properties` (optional ones may be skipped)
  kAny,     // the properties present in any order (each at most once; required ones always)
};

/// kAny builds one rule per subset of an object's properties: objects with more are an error.
inline constexpr int32_t kMaxAnyOrderProperties = 8;

struct JsonSchemaOptions {
  JsonWhitespace whitespace = JsonWhitespace::kFlexible;
  /// additionalProperties absent means false (as OpenAI strict mode and XGrammar's default);
  /// false: absent means any extra key (JSON Schema semantics).
  bool strict = true;
  /// Flexible mode: longest run of whitespace between two tokens (-1: unbounded).
  int32_t max_whitespace = 16;
  JsonKeyOrder key_order = JsonKeyOrder::kSchema;
};

/// The EBNF grammar (root rule "root") of the documents the schema accepts.
Result<std::string> json_schema_to_ebnf(std::string_view schema, const JsonSchemaOptions& opts = {});
Result<Grammar> json_schema_to_grammar(std::string_view schema, const JsonSchemaOptions& opts = {});
/// Any JSON value, or any JSON object when `object_only`.
std::string builtin_json_ebnf(bool object_only, const JsonSchemaOptions& opts = {});

}  // namespace deepinfer::grammar
