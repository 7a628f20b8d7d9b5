// E2E: `deepinfer serve` on tiny-v4-b (and tiny-v4-a, no tokenizer) with the official `openai` npm
// package as the client. Random weights: outputs are gibberish, so the checks are structural and
// relational (stream == non-stream, same seed == same text, stop cuts where the unstopped text
// has the stop string, usage == an independent HF tokenizer's count of the rendered prompt).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { args, dataDir, requirePackage, runChecks, startServer } from './lib.mjs';

const OpenAI = requirePackage('openai').default;
const { Tokenizer } = requirePackage('@anush008/tokenizers');
const { bin } = args();
const modelB = path.join(dataDir, 'tiny-v4-b');
const modelA = path.join(dataDir, 'tiny-v4-a');

const hf = Tokenizer.fromString(readFileSync(path.join(modelB, 'tokenizer.json'), 'utf8'));
const hfCount = async (text) => (await hf.encode(text, null, { addSpecialTokens: false })).getIds().length;
// V4 chat encoding, non-thinking: BOS, system text, <｜User｜>text, <｜Assistant｜></think>.
const renderV4 = (system, user) =>
  `<｜begin▁of▁sentence｜>${system}<｜User｜>${user}<｜Assistant｜></think>`;

const [srvB, srvA] = await Promise.all([startServer(bin, modelB), startServer(bin, modelA)]);
const client = new OpenAI({ baseURL: srvB.v1, apiKey: 'unused', maxRetries: 0, timeout: 30000 });
const clientA = new OpenAI({ baseURL: srvA.v1, apiKey: 'unused', maxRetries: 0, timeout: 30000 });
const model = 'tiny-v4-b';
const SYS = 'You are a terse assistant.';
const USER = 'Name three colours, please.';
const messages = [{ role: 'system', content: SYS }, { role: 'user', content: USER }];

async function collectChat(stream) {
  const byIndex = new Map();
  let usage;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const e = byIndex.get(c.index) ?? { content: '', finish: null, chunks: 0 };
      e.content += c.delta?.content ?? '';
      if (c.finish_reason) e.finish = c.finish_reason;
      ++e.chunks;
      byIndex.set(c.index, e);
    }
  }
  return { byIndex, usage };
}

async function collectCompletion(stream) {
  const byIndex = new Map();
  let usage;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'text_completion');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const e = byIndex.get(c.index) ?? { text: '', finish: null, ids: [] };
      e.text += c.text ?? '';
      if (c.token_ids) e.ids.push(...c.token_ids);
      if (c.finish_reason) e.finish = c.finish_reason;
      byIndex.set(c.index, e);
    }
  }
  return { byIndex, usage };
}

/// A stop string cut from an ASCII run of `text`, first occurring at index k > 0.
function pickStop(text) {
  for (let k = 1; k + 2 <= text.length; ++k) {
    const s = text.slice(k, k + 2);
    if (/^[A-Za-z]{2}$/.test(s) && text.indexOf(s) === k) return { stop: s, k };
  }
  return undefined;
}

const checks = [
  ['a slow non-streaming answer (chunked, JSON-legal leading spaces as disconnect probes) parses', async () => {
    // Long enough to outlast the server's in-handler wait (0.5 s): it then answers chunked.
    const t0 = Date.now();
    const raw = await fetch(`${srvB.v1}/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: [3, 5, 7], max_tokens: 3000, temperature: 0, ignore_eos: true }) });
    const text = await raw.text();
    const slow = Date.now() - t0 > 700;
    if (slow) {
      assert.equal(raw.headers.get('transfer-encoding'), 'chunked');
      assert.equal(raw.headers.get('content-length'), null);
      assert.equal(text[0], ' ', 'leading-space probes');
    }
    const viaRaw = JSON.parse(text);
    assert.equal(viaRaw.usage.completion_tokens, 3000);
    const r = await client.completions.create({ model: 'tiny-v4-b', prompt: [3, 5, 7], max_tokens: 3000, temperature: 0,
                                                ignore_eos: true });
    assert.equal(r.usage.completion_tokens, 3000);
    assert.equal(r.choices[0].text, viaRaw.choices[0].text);
    const c = await client.chat.completions.create({ model: 'tiny-v4-b', messages: [{ role: 'user', content: 'hi' }],
                                                     max_tokens: 2000, temperature: 0, ignore_eos: true });
    assert.equal(c.usage.completion_tokens, 2000);
    assert.equal(c.choices[0].finish_reason, 'length');
    assert.ok(slow, `the request took long enough to be answered chunked (${Date.now() - t0} ms)`);
  }],

  ['models.list', async () => {
    const list = await client.models.list();
    assert.deepEqual(list.data.map((m) => m.id), [model]);
  }],

  ['chat non-streaming: shape, usage == HF count of the rendered prompt', async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, ignore_eos: true });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.prompt_tokens, await hfCount(renderV4(SYS, USER)));
    assert.equal(r.usage.completion_tokens, 12);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
  }],

  ['chat streaming == non-streaming (greedy), include_usage', async () => {
    const body = { model, messages, max_tokens: 20, temperature: 0, ignore_eos: true };
    const full = await client.chat.completions.create(body);
    const { byIndex, usage } = await collectChat(await client.chat.completions.create(
      { ...body, stream: true, stream_options: { include_usage: true } }));
    assert.equal(byIndex.size, 1);
    assert.equal(byIndex.get(0).content, full.choices[0].message.content);
    assert.equal(byIndex.get(0).finish, 'length');
    assert.ok(byIndex.get(0).chunks > 1, 'streamed in several chunks');
    assert.deepEqual({ ...usage, prompt_tokens_details: undefined }, { ...full.usage, prompt_tokens_details: undefined });
  }],

  ['completions: text prompt usage == HF count; stream == non-stream', async () => {
    const prompt = 'The quick brown fox jumps over the lazy dog.';
    const body = { model, prompt, max_tokens: 24, temperature: 0, ignore_eos: true };
    const r = await client.completions.create(body);
    assert.equal(r.object, 'text_completion');
    assert.equal(r.usage.prompt_tokens, await hfCount(prompt));
    assert.equal(r.usage.completion_tokens, 24);
    assert.equal(r.choices[0].finish_reason, 'length');
    const s = await collectCompletion(await client.completions.create(
      { ...body, stream: true, stream_options: { include_usage: true } }));
    assert.equal(s.byIndex.get(0).text, r.choices[0].text);
    assert.equal(s.usage.completion_tokens, 24);
    assert.equal(s.usage.prompt_tokens, r.usage.prompt_tokens);
  }],

  ['completions: token-id prompts (exact prompt_tokens), a batch of prompts', async () => {
    const p1 = [5, 6, 7, 8, 9, 10, 11], p2 = [100, 200, 300];
    const r = await client.completions.create({ model, prompt: [p1, p2], max_tokens: 5, temperature: 0, ignore_eos: true });
    assert.equal(r.choices.length, 2);
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
    assert.equal(r.usage.prompt_tokens, p1.length + p2.length);
    assert.equal(r.usage.completion_tokens, 10);
    const one = await client.completions.create({ model, prompt: p2, max_tokens: 5, temperature: 0, ignore_eos: true });
    assert.equal(one.choices[0].text, r.choices[1].text, 'a prompt in a batch == alone');
  }],

  ['stop strings: cut exactly where the unstopped text has them (non-stream and stream)', async () => {
    const body = { model, prompt: 'Once upon a time', max_tokens: 48, temperature: 0, ignore_eos: true };
    const free = (await client.completions.create(body)).choices[0].text;
    const pick = pickStop(free);
    assert.ok(pick, `no ASCII stop candidate in ${JSON.stringify(free)}`);
    const r = await client.completions.create({ ...body, stop: [pick.stop, 'never-appears-zz'] });
    assert.equal(r.choices[0].text, free.slice(0, pick.k));
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(r.usage.completion_tokens < 48);
    const s = await collectCompletion(await client.completions.create({ ...body, stop: pick.stop, stream: true }));
    assert.equal(s.byIndex.get(0).text, free.slice(0, pick.k));
    assert.equal(s.byIndex.get(0).finish, 'stop');
    // Chat: the same through the chat route.
    const cbody = { model, messages, max_tokens: 48, temperature: 0, ignore_eos: true };
    const cfree = (await client.chat.completions.create(cbody)).choices[0].message.content;
    const cp = pickStop(cfree);
    assert.ok(cp, `no ASCII stop candidate in ${JSON.stringify(cfree)}`);
    const c = await client.chat.completions.create({ ...cbody, stop: cp.stop });
    assert.equal(c.choices[0].message.content, cfree.slice(0, cp.k));
    assert.equal(c.choices[0].finish_reason, 'stop');
  }],

  ['n > 1: n choices, indices, usage; streaming n', async () => {
    const r = await client.chat.completions.create({ model, messages, n: 3, max_tokens: 10, temperature: 1, seed: 11, ignore_eos: true });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    assert.equal(r.usage.completion_tokens, 30);
    assert.equal(new Set(r.choices.map((c) => c.message.content)).size, 3, 'sampled choices differ');
    const s = await collectCompletion(await client.completions.create(
      { model, prompt: 'abc', n: 4, max_tokens: 6, temperature: 1, seed: 5, stream: true, ignore_eos: true,
        stream_options: { include_usage: true } }));
    assert.deepEqual([...s.byIndex.keys()].sort(), [0, 1, 2, 3]);
    for (const e of s.byIndex.values()) assert.equal(e.finish, 'length');
    assert.equal(s.usage.completion_tokens, 24);
  }],

  ['seed: same seed -> same text (also under concurrency), different seed -> different', async () => {
    const body = { model, messages, max_tokens: 24, temperature: 1.0, top_p: 0.95, ignore_eos: true };
    const a = await client.chat.completions.create({ ...body, seed: 1234 });
    // Same seed again, this time with other requests in the batch.
    const [b, , , c] = await Promise.all([
      client.chat.completions.create({ ...body, seed: 1234 }),
      client.chat.completions.create({ ...body, seed: 1 }),
      client.completions.create({ model, prompt: 'noise in the batch', max_tokens: 30, temperature: 1, seed: 2 }),
      client.chat.completions.create({ ...body, seed: 4321 }),
    ]);
    assert.equal(b.choices[0].message.content, a.choices[0].message.content);
    assert.notEqual(c.choices[0].message.content, a.choices[0].message.content);
    const s1 = await client.completions.create({ model, prompt: 'xyz', max_tokens: 16, temperature: 0.8, seed: 99 });
    const s2 = await client.completions.create({ model, prompt: 'xyz', max_tokens: 16, temperature: 0.8, seed: 99 });
    assert.equal(s1.choices[0].text, s2.choices[0].text);
  }],

  ['logprobs: chat top_logprobs and completions logprobs', async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3, ignore_eos: true });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, 8);
    for (const t of content) {
      assert.equal(typeof t.token, 'string');
      assert.ok(t.logprob <= 0);
      assert.ok(Array.isArray(t.bytes));
      assert.equal(t.top_logprobs.length, 3);
      for (let i = 1; i < 3; ++i) assert.ok(t.top_logprobs[i - 1].logprob >= t.top_logprobs[i].logprob);
      // Greedy: the chosen token is the most likely one.
      assert.ok(Math.abs(t.logprob - t.top_logprobs[0].logprob) < 1e-6);
    }
    const joined = Buffer.from(content.flatMap((t) => t.bytes)).toString('utf8');
    assert.equal(joined, r.choices[0].message.content);
    const c = await client.completions.create({ model, prompt: [1, 2, 3, 4], max_tokens: 6, temperature: 0, logprobs: 2, ignore_eos: true });
    const lp = c.choices[0].logprobs;
    assert.equal(lp.tokens.length, 6);
    assert.equal(lp.token_logprobs.length, 6);
    assert.equal(lp.text_offset.length, 6);
    for (let i = 0; i < 6; ++i) {
      const top = Object.values(lp.top_logprobs[i]);
      assert.ok(top.length >= 1 && top.length <= 2);
      assert.ok(Math.abs(Math.max(...top) - lp.token_logprobs[i]) < 1e-6);
    }
    // Streaming logprobs: the same numbers.
    const tokens = [];
    for await (const ch of await client.completions.create({ model, prompt: [1, 2, 3, 4], max_tokens: 6, temperature: 0, logprobs: 2, ignore_eos: true, stream: true })) {
      for (const x of ch.choices) if (x.logprobs) tokens.push(...x.logprobs.token_logprobs);
    }
    assert.deepEqual(tokens, lp.token_logprobs);
  }],

  ['prompt logprobs as lm-eval-harness asks (echo + logprobs, max_tokens 0): decode == prefill, stream == non-stream', async () => {
    const prompt = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43];
    // The greedy continuation and its logprobs, from decode steps.
    const gen = await client.completions.create({ model, prompt, max_tokens: 3, temperature: 0, logprobs: 2, ignore_eos: true,
                                                  return_token_ids: true });
    const next = gen.choices[0].token_ids;
    // The same tokens appended to the prompt and scored by the prefill (lm-eval's loglikelihood request).
    const scored = await client.completions.create({ model, prompt: [...prompt, ...next], max_tokens: 0, echo: true,
                                                     logprobs: 2, temperature: 0 });
    const lp = scored.choices[0].logprobs;
    assert.equal(lp.tokens.length, prompt.length + next.length);
    assert.equal(lp.token_logprobs[0], null);
    assert.equal(scored.usage.completion_tokens, 0);
    assert.equal(scored.choices[0].finish_reason, 'length');
    for (let i = 0; i < next.length; ++i) {
      // The CPU engine is bitwise invariant to batching and chunking: the same float.
      assert.equal(lp.token_logprobs[prompt.length + i], gen.choices[0].logprobs.token_logprobs[i], `token ${i}`);
      assert.deepEqual(lp.top_logprobs[prompt.length + i], gen.choices[0].logprobs.top_logprobs[i]);
    }
    for (let t = 1; t < lp.tokens.length; ++t) {
      const best = Math.max(...Object.values(lp.top_logprobs[t]));
      assert.ok(lp.token_logprobs[t] <= best, `token ${t}: no alternative below the token's own`);
    }
    // Streamed: the echo chunk carries the same prompt logprobs.
    const chunks = [];
    for await (const c of await client.completions.create({ model, prompt: [...prompt, ...next], max_tokens: 0, echo: true,
                                                              logprobs: 2, temperature: 0, stream: true })) chunks.push(c);
    assert.deepEqual(chunks[0].choices[0].logprobs.token_logprobs, lp.token_logprobs);
    // vLLM's prompt_logprobs: the same values keyed by token id.
    const v = await client.completions.create({ model, prompt: [...prompt, ...next], max_tokens: 1, prompt_logprobs: 0 });
    const pl = v.choices[0].prompt_logprobs;
    assert.equal(pl[0], null);
    for (let t = 1; t < pl.length; ++t) assert.equal(pl[t][String([...prompt, ...next][t])].logprob, lp.token_logprobs[t]);
  }],

  ['tools: accepted, rendered into the prompt; tool-call history round-trips', async () => {
    // A random model does not emit a DSML call on its own; the DSML -> tool_calls parser is
    // covered by tests/unit/server/e2e_test.cpp (server_e2e_test, scripted engine).
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const plain = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 });
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'auto', max_tokens: 4, temperature: 0 });
    assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens + 20, 'tool definitions are in the prompt');
    assert.ok(['length', 'stop', 'tool_calls'].includes(r.choices[0].finish_reason));
    const msg = r.choices[0].message;
    if (msg.tool_calls) for (const tc of msg.tool_calls) assert.equal(typeof tc.function.arguments, 'string');
    const history = [...messages,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 21}' }];
    const h = await client.chat.completions.create({ model, messages: history, tools, max_tokens: 4, temperature: 0 });
    assert.equal(h.choices[0].message.role, 'assistant');
    assert.ok(h.usage.prompt_tokens > r.usage.prompt_tokens);
  }],

  ['tool_choice required: a DSML grammar forces tool calls (non-stream and stream), schema-valid', async () => {
    const tools = [{ type: 'function', function: { name: 'set_level', parameters: { type: 'object',
      properties: { level: { type: 'integer', minimum: 0, maximum: 9 }, mode: { type: 'string', enum: ['a', 'b'] } },
      required: ['level', 'mode'] } } }];
    const valid = (args) => {
      const a = JSON.parse(args);
      assert.ok(Number.isInteger(a.level) && a.level >= 0 && a.level <= 9, args);
      assert.ok(['a', 'b'].includes(a.mode), args);
      assert.deepEqual(Object.keys(a).sort(), ['level', 'mode']);
    };
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, n: 2, seed: 3, temperature: 1, max_tokens: 400 });
    for (const c of r.choices) {
      assert.equal(c.finish_reason, 'tool_calls');
      assert.equal(c.message.tool_calls.length, 1);
      for (const tc of c.message.tool_calls) { assert.equal(tc.function.name, 'set_level'); valid(tc.function.arguments); }
    }
    const calls = [];
    let finish = null;
    for await (const ch of await client.chat.completions.create({ model, messages, tools, parallel_tool_calls: false,
      tool_choice: { type: 'function', function: { name: 'set_level' } }, seed: 4, temperature: 1, max_tokens: 400, stream: true })) {
      for (const x of ch.choices) {
        for (const d of x.delta?.tool_calls ?? []) {
          calls[d.index] ??= { name: '', arguments: '' };
          if (d.function?.name) calls[d.index].name += d.function.name;
          if (d.function?.arguments) calls[d.index].arguments += d.function.arguments;
        }
        if (x.finish_reason) finish = x.finish_reason;
      }
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'set_level');
    valid(calls[0].arguments);
    await assert.rejects(client.chat.completions.create({ model, messages, tools, tool_choice: 'required',
      response_format: { type: 'json_object' }, max_tokens: 4 }), (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
  }],

  ['errors through the client: unknown model -> NotFoundError (404)', async () => {
    await assert.rejects(client.chat.completions.create({ model: 'no-such-model', messages, max_tokens: 2 }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && typeof e.error?.message === 'string');
  }],

  ['token-id-only server (tiny-v4-a): choices[i].token_ids, stream == non-stream, text -> 400', async () => {
    const prompt = [3, 14, 15, 92, 65, 35];
    const r = await clientA.completions.create({ model: 'tiny-v4-a', prompt, max_tokens: 9, temperature: 0, ignore_eos: true });
    const ids = r.choices[0].token_ids;
    assert.ok(Array.isArray(ids) && ids.length === 9 && ids.every((x) => Number.isInteger(x) && x >= 0 && x < 1024));
    assert.equal(r.usage.prompt_tokens, prompt.length);
    assert.equal(r.usage.completion_tokens, 9);
    const s = await collectCompletion(await clientA.completions.create({ model: 'tiny-v4-a', prompt, max_tokens: 9, temperature: 0, ignore_eos: true, stream: true }));
    assert.deepEqual(s.byIndex.get(0).ids, ids);
    const n2 = await clientA.completions.create({ model: 'tiny-v4-a', prompt: [prompt, [7, 7, 7]], n: 2, max_tokens: 3, temperature: 0.9, seed: 3 });
    assert.equal(n2.choices.length, 4);
    for (const c of n2.choices) assert.equal(c.token_ids.length, 3);
    await assert.rejects(clientA.completions.create({ model: 'tiny-v4-a', prompt: 'text', max_tokens: 2 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
    await assert.rejects(clientA.chat.completions.create({ model: 'tiny-v4-a', messages, max_tokens: 2 }),
      (e) => e.status === 400);
  }],
];

await runChecks('openai_client', checks, async () => { await Promise.all([srvB.stop(), srvA.stop()]); });
