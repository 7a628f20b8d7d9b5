// Live HF tokenizers reference for the tokenizer tests and the bench.
// @anush008/tokenizers is a napi binding of the Rust `tokenizers` crate (0.6.0 embeds 0.22.2).
//
//   node tests/js/hf_tokenize.mjs ids   TOKENIZER_JSON IN.jsonl OUT.jsonl
//     lines {"text": ...} -> {"ids": [...], "ids_text": [...]}
//     ids:      Tokenizer.fromString(tokenizer.json as is).encode(text, addSpecialTokens=false)
//     ids_text: the same tokenizer with "added_tokens": [] (every added token is plain text)
//   node tests/js/hf_tokenize.mjs bench TOKENIZER_JSON CORPUS.jsonl REPEATS [OURS_IDS.jsonl [OURS_BENCH.json]]
//     single-thread HF timing (RAYON_NUM_THREADS=1, one encode() per document, best of REPEATS):
//     MB/s, tokens/s, decode; with our ids (tokenizer_bench's IDS_OUT) the identical-ids check
//     (exit 1 if any document differs), with our bench JSON the ratios. bench/tokenizer_vs_hf.sh.
//   node tests/js/hf_tokenize.mjs pieces TOKENIZER_JSON IN.jsonl OUT.jsonl
//     lines {"text": ...} -> {"pieces": [UTF-8 byte length of each piece, in order]}: HF's own
//     pre-tokenizer (tokenizer.json's Sequence with its ByteLevel step removed, i.e. the three
//     Split regexes run by HF's Oniguruma), getPreTokenizer().preTokenizeString(text). No added-token
//     matching. tokenizer_hf_live_test compares these with our PreTokenizer::split.
//
// Exits non-zero with a message if the package cannot be loaded: callers must never skip.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

process.env.RAYON_NUM_THREADS = '1';
const require = createRequire(import.meta.url);
let Tokenizer;
let hfVersion = 'unknown';
try {
  ({ Tokenizer } = require('@anush008/tokenizers'));
  hfVersion = require('@anush008/tokenizers/package.json').version;
} catch (e) {
  console.error(`hf_tokenize: cannot load @anush008/tokenizers (${e.message}); run: npm ci --prefix tests/js`);
  process.exit(3);
}

const [mode, tokPath, inPath, arg4] = process.argv.slice(2);
if (!mode || !tokPath || !inPath) {
  console.error('usage: hf_tokenize.mjs ids|pieces TOKENIZER_JSON IN.jsonl OUT.jsonl | bench TOKENIZER_JSON CORPUS.jsonl [repeats]');
  process.exit(2);
}
const json = readFileSync(tokPath, 'utf8');
const readTexts = () => readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l).text);
if (mode === 'pieces') {
  const t = JSON.parse(json);
  const seq = t.pre_tokenizer;
  if (seq?.type !== 'Sequence' || seq.pretokenizers?.at(-1)?.type !== 'ByteLevel') {
    console.error('hf_tokenize pieces: expected a pre_tokenizer Sequence ending in ByteLevel');
    process.exit(2);
  }
  seq.pretokenizers = seq.pretokenizers.slice(0, -1);
  const pre = Tokenizer.fromString(JSON.stringify(t)).getPreTokenizer();
  const lines = readTexts().map((text) =>
    JSON.stringify({ pieces: pre.preTokenizeString(text).map(([piece]) => Buffer.byteLength(piece, 'utf8')) }));
  writeFileSync(arg4, lines.join('\n') + '\n');
  process.exit(0);
}
const parseTok = Tokenizer.fromString(json);
const plain = JSON.parse(json);
plain.added_tokens = [];
const textTok = Tokenizer.fromString(JSON.stringify(plain));
const texts = readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l).text);
const opts = { addSpecialTokens: false };

async function encodeAll(tok) {
  const out = new Array(texts.length);
  for (let i = 0; i < texts.length; ++i) out[i] = (await tok.encode(texts[i], null, opts)).getIds();
  return out;
}

if (mode === 'ids') {
  const ids = await encodeAll(parseTok);
  const idsText = await encodeAll(textTok);
  const lines = texts.map((_, i) => JSON.stringify({ ids: ids[i], ids_text: idsText[i] }));
  writeFileSync(arg4, lines.join('\n') + '\n');
} else if (mode === 'bench') {
  // bench TOKENIZER_JSON CORPUS.jsonl REPEATS [OURS_IDS.jsonl [OURS_BENCH.json]]
  const [repeatsArg, oursIdsPath, oursBenchPath] = process.argv.slice(5);
  const repeats = Number(repeatsArg ?? 2);
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, 'utf8'), 0);
  const hf = { package: `@anush008/tokenizers ${hfVersion} (HF tokenizers Rust 0.22.2, napi)`,
    call: 'await tokenizer.encode(doc, null, {addSpecialTokens: false}) per document, best of repeats',
    threads: 1, repeats, docs: texts.length, bytes };
  const hfIds = {};
  for (const [name, tok] of [['parse', parseTok], ['text', textTok]]) {
    let best = Infinity;
    let ids;
    for (let r = 0; r < repeats; ++r) {
      const t0 = process.hrtime.bigint();
      ids = await encodeAll(tok);
      best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
    }
    const tokens = ids.reduce((n, v) => n + v.length, 0);
    hfIds[name] = ids;
    hf[`encode_${name}`] = { tokens, seconds: best, MBps: bytes / best / 1e6, Mtokps: tokens / best / 1e6 };
  }
  {
    // encodeBatch on one rayon thread: the per-call overhead of the binding paid once.
    let best = Infinity;
    let tokens = 0;
    for (let r = 0; r < repeats; ++r) {
      const t0 = process.hrtime.bigint();
      const encs = await parseTok.encodeBatch(texts, opts);
      best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
      tokens = encs.reduce((n, e) => n + e.getIds().length, 0);
    }
    hf.encode_parse_batch_1thread = { tokens, seconds: best, MBps: bytes / best / 1e6, Mtokps: tokens / best / 1e6 };
  }
  {
    const ids = hfIds.parse;
    const tokens = ids.reduce((n, v) => n + v.length, 0);
    let best = Infinity;
    for (let r = 0; r < repeats; ++r) {
      const t0 = process.hrtime.bigint();
      for (const v of ids) await parseTok.decode(v, false);
      best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
    }
    hf.decode_Mtokps = tokens / best / 1e6;
  }
  const report = { hf };
  if (oursIdsPath) {
    const ours = readFileSync(oursIdsPath, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
    const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
    const check = {};
    for (const [name, key] of [['parse', 'ids'], ['text', 'ids_text']]) {
      let equal = 0;
      const firstDiff = [];
      for (let i = 0; i < texts.length; ++i) {
        if (ours[i] && same(ours[i][key], hfIds[name][i])) ++equal;
        else if (firstDiff.length < 5) firstDiff.push(i);
      }
      check[name] = { docs: texts.length, identical: equal, first_different_docs: firstDiff };
    }
    report.identical_ids = check;
    report.identical = check.parse.identical === texts.length && check.text.identical === texts.length;
  }
  if (oursBenchPath) {
    const o = JSON.parse(readFileSync(oursBenchPath, 'utf8'));
    report.ours = o;
    const ratio = (a, b) => Math.round((a / b) * 100) / 100;
    report.ratio_ours_over_hf = {
      encode_parse_cold: ratio(o.encode_parse.cold_MBps, hf.encode_parse.MBps),
      encode_parse_warm: ratio(o.encode_parse.warm_MBps, hf.encode_parse.MBps),
      encode_text_cold: ratio(o.encode_text.cold_MBps, hf.encode_text.MBps),
      encode_text_warm: ratio(o.encode_text.warm_MBps, hf.encode_text.MBps),
      encode_parse_warm_vs_hf_batch: ratio(o.encode_parse.warm_MBps, hf.encode_parse_batch_1thread.MBps),
      decode: ratio(o.decode_Mtokps, hf.decode_Mtokps),
    };
  }
  process.stdout.write(JSON.stringify(report, null, 2) + '\n');
  if (report.identical === false) process.exitCode = 1;
} else {
  console.error(`hf_tokenize: unknown mode ${mode}`);
  process.exit(2);
}
