// E2E: structured outputs over HTTP on loopback, `deepinfer serve` on tiny-v4-b (random weights,
// so the text is whatever the grammar lets a random model say) with the official `openai` npm
// client, plus one offline `deepinfer generate` line. Every constraint kind is sent: response_format
// json_schema (validated with ajv, an independent JSON Schema validator), json_object, regex and
// grammar (EBNF) (checked with a JS RegExp of the same language), the JSON options
// (structured_outputs.whitespace / key_order), thinking mode (the constraint starts after
// </think>), and invalid constraints (HTTP 400 naming the problem).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { args, dataDir, postJson, requirePackage, runChecks, startServer } from './lib.mjs';

const OpenAI = requirePackage('openai').default;
const Ajv2020 = requirePackage('ajv/dist/2020').default;
const addFormats = requirePackage('ajv-formats').default;
const { bin } = args();
const modelB = path.join(dataDir, 'tiny-v4-b');
const model = 'tiny-v4-b';
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

const srv = await startServer(bin, modelB);
const client = new OpenAI({ baseURL: srv.v1, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const messages = [{ role: 'user', content: 'Answer in JSON.' }];
const thinkEnd = JSON.parse(readFileSync(path.join(modelB, 'tokenizer.json'), 'utf8'))
  .added_tokens.find((t) => t.content === '</think>').id;

// Bounded schemas (every string, number and array is bounded) so that a random model ends them
// within max_tokens; each is closed (strict or additionalProperties: false).
const schemas = {
  person: {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 8 },
      age: { type: 'integer', minimum: 0, maximum: 120 },
      tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 },
      born: { type: 'string', format: 'date' },
    },
    required: ['name', 'age', 'born'],
    additionalProperties: false,
  },
  point: {
    type: 'object',
    properties: {
      kind: { const: 'point' },
      xy: { type: 'array', prefixItems: [{ type: 'integer', minimum: -9, maximum: 9 }, { type: 'integer', minimum: -9, maximum: 9 }],
            items: false, minItems: 2 },
      label: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 4 }] },
      size: { type: 'number', minimum: 0, maximum: 1 },
    },
    required: ['kind', 'xy'],
  },
  colours: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, minItems: 1, maxItems: 4 },
  tree: {
    $defs: { node: { type: 'object', properties: { v: { type: 'integer', minimum: 0, maximum: 9 },
                                                    kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 1 } },
                     required: ['v'], additionalProperties: false } },
    $ref: '#/$defs/node',
  },
};
// Only enums, integers and booleans: the compact / spaced spelling is fully determined.
const flat = {
  type: 'object',
  properties: { c: { enum: ['red', 'green'] }, n: { type: 'integer', minimum: 0, maximum: 99 }, ok: { type: 'boolean' },
                l: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 9 }, maxItems: 3 } },
  required: ['c', 'n', 'ok', 'l'],
  additionalProperties: false,
};

function validates(name, schema, text) {
  let v;
  try { v = JSON.parse(text); } catch (e) { assert.fail(`${name}: not JSON (${e.message}): ${JSON.stringify(text)}`); }
  const validate = ajv.compile(schema);
  assert.ok(validate(v), `${name}: ajv rejects ${text}: ${JSON.stringify(validate.errors)}`);
  return v;
}

const rf = (name, schema, strict = true) => ({ type: 'json_schema', json_schema: { name, strict, schema } });
const base = { model, n: 3, temperature: 1.0, max_tokens: 700 };

const checks = [
  ['chat response_format json_schema: every choice ends (stop) and validates with ajv', async () => {
    for (const [name, schema] of Object.entries(schemas)) {
      for (const seed of [1, 2]) {
        const r = await client.chat.completions.create({ ...base, seed, messages, response_format: rf(name, schema) });
        assert.equal(r.choices.length, 3);
        for (const c of r.choices) {
          assert.equal(c.finish_reason, 'stop', `${name}: ${JSON.stringify(c)}`);
          validates(name, schema, c.message.content);
        }
      }
    }
  }],

  ['completions response_format json_schema (strict absent) and the JSON options: compact, spaced, key_order any', async () => {
    const prompt = 'JSON:';
    const seen = new Set();
    for (const seed of [3, 4, 5]) {
      const compact = await client.completions.create({ ...base, seed, prompt, response_format: rf('flat', flat, undefined),
                                                        structured_outputs: { whitespace: 'compact' } });
      for (const c of compact.choices) {
        assert.equal(c.finish_reason, 'stop');
        const v = validates('flat compact', flat, c.text);
        assert.equal(c.text, JSON.stringify(v), 'compact: no whitespace at all');
      }
      // vLLM's spelling of compact, on the chat endpoint.
      const vllm = await client.chat.completions.create({ ...base, seed, messages, response_format: rf('flat', flat),
                                                          structured_outputs: { disable_any_whitespace: true } });
      for (const c of vllm.choices) assert.equal(c.message.content, JSON.stringify(validates('flat vllm', flat, c.message.content)));
      const spaced = await client.chat.completions.create({ ...base, seed, messages, response_format: rf('flat', flat),
                                                            structured_outputs: { whitespace: 'spaced' } });
      for (const c of spaced.choices) {
        const v = validates('flat spaced', flat, c.message.content);
        // Python json.dumps spelling (", " and ": "; no string here holds ',' or ':').
        assert.equal(c.message.content, JSON.stringify(v).replaceAll(',', ', ').replaceAll(':', ': '));
      }
      const any = await client.chat.completions.create({ ...base, seed, messages, response_format: rf('flat', flat),
                                                         structured_outputs: { whitespace: 'compact', key_order: 'any' } });
      for (const c of any.choices) {
        validates('flat any order', flat, c.message.content);
        seen.add(Object.keys(JSON.parse(c.message.content)).join(','));
      }
    }
    // Schema order is c,n,ok,l; a random model under "any" order leaves it at least once in 9 tries.
    assert.ok([...seen].some((k) => k !== 'c,n,ok,l'), `key orders seen: ${[...seen]}`);
  }],

  ['response_format json_object: every finished choice is a JSON object', async () => {
    let stopped = 0;
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({ ...base, seed, messages, max_tokens: 400, response_format: { type: 'json_object' },
                                                       structured_outputs: { whitespace: 'compact' } });
      for (const c of r.choices) {
        if (c.finish_reason !== 'stop') continue;  // an unbounded grammar may run out of tokens
        ++stopped;
        const v = JSON.parse(c.message.content);
        assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), c.message.content);
      }
    }
    assert.ok(stopped > 0, 'no json_object answer finished in 400 tokens');
  }],

  ['regex and grammar (EBNF), on both endpoints: the output is in the language', async () => {
    const re = '[a-z]{2,5}-[0-9]{1,3}( ok)?';
    const grammar = 'root ::= item ("," item){0,3}\nitem ::= "yes" | "no" | [0-9] | "(" item ")"';
    const grammarRe = /^(?:(\()*(yes|no|[0-9])\)*)(,(\()*(yes|no|[0-9])\)*){0,3}$/;
    const balanced = (s) => s.split(',').every((it) => (it.match(/\(/g) || []).length === (it.match(/\)/g) || []).length);
    for (const seed of [1, 2]) {
      for (const [field, test] of [[{ regex: re }, (s) => new RegExp(`^(?:${re})$`).test(s)],
                                   [{ guided_regex: re }, (s) => new RegExp(`^(?:${re})$`).test(s)],
                                   [{ grammar }, (s) => grammarRe.test(s) && balanced(s)],
                                   [{ structured_outputs: { grammar } }, (s) => grammarRe.test(s) && balanced(s)]]) {
        const chat = await client.chat.completions.create({ ...base, seed, messages, ...field });
        for (const c of chat.choices) {
          assert.equal(c.finish_reason, 'stop', JSON.stringify(c));
          assert.ok(test(c.message.content), `${JSON.stringify(field)}: ${JSON.stringify(c.message.content)}`);
        }
        const comp = await client.completions.create({ ...base, seed, prompt: 'x', ...field });
        for (const c of comp.choices) assert.ok(test(c.text), `${JSON.stringify(field)}: ${JSON.stringify(c.text)}`);
      }
    }
  }],

  ['thinking mode: the reasoning is free, the content after </think> validates', async () => {
    let reasoned = 0;
    for (const seed of [1, 2, 3]) {
      // A bias on </think> (added token here) ends the reasoning of a random model early.
      const r = await client.chat.completions.create({ ...base, seed, messages, response_format: rf('person', schemas.person),
                                                       chat_template_kwargs: { thinking: true }, logit_bias: { [thinkEnd]: 4 } });
      for (const c of r.choices) {
        assert.equal(c.finish_reason, 'stop', JSON.stringify(c));
        validates('person after reasoning', schemas.person, c.message.content);
        assert.equal(typeof c.message.reasoning_content, 'string');
        if (c.message.reasoning_content.length > 0) ++reasoned;
      }
    }
    assert.ok(reasoned > 0, 'no choice had any reasoning before </think>');
  }],

  ['invalid constraints are HTTP 400 with the reason', async () => {
    const cases = [
      [{ response_format: rf('bad', { type: 'object', patternProperties: { '^a': {} } }) }, "unsupported keyword 'patternProperties'"],
      [{ response_format: rf('bad', { enum: [1], type: 'string' }) }, "no 'enum' value satisfies"],
      [{ response_format: rf('bad', { type: 'integer', minimum: 5, maximum: 1 }) }, 'range is empty'],
      [{ regex: '(a' }, 'regex'],
      [{ grammar: 'root ::= undefined_rule' }, 'undefined_rule'],
      [{ regex: 'a+', structured_outputs: { whitespace: 'compact' } }, 'JSON constraints only'],
      [{ response_format: rf('x', { type: 'object' }), structured_outputs: { whitespace: 'tabs' } }, 'whitespace'],
    ];
    for (const [field, reason] of cases) {
      for (const route of ['/v1/chat/completions', '/v1/completions']) {
        const body = route.includes('chat') ? { model, messages, max_tokens: 4, ...field } : { model, prompt: 'x', max_tokens: 4, ...field };
        const r = await postJson(srv.base, route, body);
        assert.equal(r.status, 400, `${route} ${JSON.stringify(field)}: ${r.text}`);
        assert.ok(r.json?.error?.message?.toLowerCase().includes(reason.toLowerCase()),
                  `${route} ${JSON.stringify(field)}: '${reason}' not in ${r.text}`);
      }
    }
    await assert.rejects(client.chat.completions.create({ model, messages, max_tokens: 4,
      response_format: rf('bad', { type: 'integer', multipleOf: 3 }) }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.message.includes('multipleOf'));
  }],

  ['offline deepinfer generate: a response_format line validates with ajv', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'di-structured-'));
    try {
      const input = path.join(dir, 'in.jsonl'), output = path.join(dir, 'out.jsonl');
      const lines = [
        { id: 'chat', messages, seed: 5, temperature: 1.0, max_tokens: 700, response_format: rf('person', schemas.person),
          structured_outputs: { whitespace: 'compact' } },
        { id: 'comp', prompt: 'JSON:', seed: 6, temperature: 1.0, max_tokens: 700, response_format: rf('point', schemas.point) },
      ];
      writeFileSync(input, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
      const run = spawnSync(bin, ['generate', modelB, '--input', input, '--output', output, '--threads', '2', '--no-progress'],
                            { encoding: 'utf8', timeout: 90000 });
      assert.equal(run.status, 0, `generate failed: ${run.stderr}`);
      const out = new Map(readFileSync(output, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).map((j) => [j.id, j]));
      assert.equal(out.get('chat').finish_reason, 'stop');
      const v = validates('generate chat', schemas.person, out.get('chat').text);
      assert.equal(out.get('chat').text, JSON.stringify(v));  // compact
      assert.equal(out.get('comp').finish_reason, 'stop');
      validates('generate completion', schemas.point, out.get('comp').text);
      // An invalid schema fails the run before any work, naming the keyword.
      writeFileSync(input, JSON.stringify({ id: 'bad', prompt: 'x', response_format: rf('b', { not: {} }) }) + '\n');
      const bad = spawnSync(bin, ['generate', modelB, '--input', input, '--output', path.join(dir, 'bad.jsonl'), '--threads', '2',
                                  '--no-progress'], { encoding: 'utf8', timeout: 60000 });
      assert.notEqual(bad.status, 0);
      assert.match(bad.stderr, /unsupported keyword 'not'/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }],
];

await runChecks('structured outputs e2e', checks, () => srv.stop());
