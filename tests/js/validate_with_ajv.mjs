// Independent validation of grammar-constrained outputs with ajv (JSON Schema 2020-12) and
// ajv-formats ("full" format mode). Usage:
//   node tests/js/validate_with_ajv.mjs SCHEMAS.json OUTPUTS.jsonl
// SCHEMAS.json: [{"name", "schema"}]; OUTPUTS.jsonl: one {"name", "output"} per line, where
// "output" is the generated text. Exits 0 when every output parses as JSON and validates; prints
// each failure and exits 1 otherwise; exits 2 when ajv is not installed (npm ci --prefix tests/js).
import { readFileSync } from "node:fs";

let Ajv2020, addFormats;
try {
  Ajv2020 = (await import("ajv/dist/2020.js")).default;
  addFormats = (await import("ajv-formats")).default;
} catch (e) {
  console.error("ajv is not installed: run `npm ci --prefix tests/js` (" + e.message + ")");
  process.exit(2);
}

const [schemasPath, outputsPath] = process.argv.slice(2);
if (!schemasPath || !outputsPath) {
  console.error("usage: validate_with_ajv.mjs SCHEMAS.json OUTPUTS.jsonl");
  process.exit(2);
}
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
const validators = new Map();
for (const { name, schema } of JSON.parse(readFileSync(schemasPath, "utf8"))) {
  validators.set(name, ajv.compile(schema));
}
let total = 0, failed = 0;
for (const line of readFileSync(outputsPath, "utf8").split("\n")) {
  if (!line.trim()) continue;
  const { name, output } = JSON.parse(line);
  total++;
  const validate = validators.get(name);
  if (!validate) {
    console.error(`unknown schema '${name}'`);
    failed++;
    continue;
  }
  let value;
  try {
    value = JSON.parse(output);
  } catch (e) {
    console.error(`${name}: not JSON (${e.message}): ${output}`);
    failed++;
    continue;
  }
  if (!validate(value)) {
    console.error(`${name}: invalid: ${JSON.stringify(validate.errors)}: ${output}`);
    failed++;
  }
}
console.log(`ajv: ${total - failed}/${total} outputs valid`);
process.exit(failed === 0 && total > 0 ? 0 : 1);
