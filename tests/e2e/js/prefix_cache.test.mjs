// E2E prefix cache: requests sharing a long system prompt on a server with the prefix cache
// (default) and on one with --prefix-cache-mib 0 (cold). The warm server must report hits in
// /metrics and usage.prompt_tokens_details.cached_tokens, and every output (text, token
// logprobs and top_logprobs, greedy and seeded sampling) must equal the cold run exactly.
import assert from 'node:assert/strict';
import path from 'node:path';
import { args, dataDir, metrics, postJson, runChecks, startServer } from './lib.mjs';

const { bin } = args();
const modelB = path.join(dataDir, 'tiny-v4-b');
const SYSTEM = 'You are the support assistant of a small bakery. ' +
  'Opening hours are seven to seven on weekdays and eight to two on Saturdays. '.repeat(6) +
  'Always answer politely, never invent prices, and mention the daily special when asked about bread.';
const users = ['What time do you open?', 'Do you sell rye bread?', 'Is there a daily special today?',
               'Can I order a cake for Sunday?', 'Where are you located?', 'hi'];
const body = (u, extra = {}) => ({ messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: u }],
  max_tokens: 12, temperature: 0, ignore_eos: true, logprobs: true, top_logprobs: 4, ...extra });
// Token-id prompts sharing a 200-token prefix (prefixes that end inside a block, too).
const prefixIds = Array.from({ length: 200 }, (_, i) => 3 + ((i * 37) % 1000));
const idPrompts = [[1, 2, 3], [4], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34]]
  .map((t) => [...prefixIds, ...t]);

const [warm, cold] = await Promise.all([startServer(bin, modelB), startServer(bin, modelB, ['--prefix-cache-mib', '0'])]);

async function runAll(srv, concurrent) {
  const reqs = [];
  for (const u of users) reqs.push(['/v1/chat/completions', body(u)]);
  for (const u of users.slice(0, 3)) reqs.push(['/v1/chat/completions', body(u, { temperature: 0.9, seed: 77, n: 2 })]);
  for (const p of idPrompts) reqs.push(['/v1/completions', { prompt: p, max_tokens: 10, temperature: 0, logprobs: 3, ignore_eos: true }]);
  const one = async ([route, b]) => {
    const r = await postJson(srv.base, route, b);
    assert.equal(r.status, 200, r.text);
    return r.json;
  };
  if (!concurrent) {
    const out = [];
    for (const r of reqs) out.push(await one(r));
    return out;
  }
  return Promise.all(reqs.map(one));
}

const strip = (resp) => resp.choices.map((c) => ({ message: c.message, text: c.text, logprobs: c.logprobs, finish: c.finish_reason }));

let coldOut;
const checks = [
  ['cold run (--prefix-cache-mib 0)', async () => {
    coldOut = await runAll(cold, false);
    const m = await metrics(cold.base);
    assert.equal(m.get('deepinfer_prefix_cache_hits_total'), 0);
    for (const r of coldOut) assert.equal(r.usage.prompt_tokens_details.cached_tokens, 0);
  }],
  ['warm server, sequential: hits in /metrics and usage; outputs == cold', async () => {
    const before = await metrics(warm.base);
    assert.equal(before.get('deepinfer_prefix_cache_hits_total'), 0);
    const out = await runAll(warm, false);
    const m = await metrics(warm.base);
    const hits = m.get('deepinfer_prefix_cache_hits_total');
    const sysTokens = coldOut[0].usage.prompt_tokens;
    assert.ok(sysTokens > 64, `the shared prompt spans several blocks (${sysTokens} tokens)`);
    // Every request after the first of each family reuses the shared prefix.
    const cached = out.map((r) => r.usage.prompt_tokens_details.cached_tokens);
    assert.equal(cached[0], 0, 'the first request is cold');
    // The first request snapshots only where its chunks end (its last block boundary); the second
    // finds the common prefix with the first and stops its prefill at that block boundary, which
    // is snapshotted (engine share_at_); every later request restores it.
    for (let i = 2; i < users.length; ++i) assert.ok(cached[i] >= 224, `chat ${i} hit the shared prefix (${cached})`);
    assert.ok(cached[cached.length - 1] >= 192 && cached[cached.length - 2] >= 192, `id prompts hit (${cached.slice(-3)})`);
    assert.ok(hits >= cached.reduce((a, b) => a + b, 0) - 1, `metrics hits ${hits} vs usage ${cached}`);
    assert.ok(m.get('deepinfer_state_memory_used_bytes') > 0, 'snapshots held in state memory');
    for (let i = 0; i < out.length; ++i) {
      assert.deepEqual(strip(out[i]), strip(coldOut[i]), `request ${i}: warm == cold`);
      assert.equal(out[i].usage.prompt_tokens, coldOut[i].usage.prompt_tokens);
    }
  }],
  ['warm server, all at once: outputs == cold', async () => {
    const before = (await metrics(warm.base)).get('deepinfer_prefix_cache_hits_total');
    const out = await runAll(warm, true);
    const after = (await metrics(warm.base)).get('deepinfer_prefix_cache_hits_total');
    assert.ok(after > before, 'more hits');
    for (let i = 0; i < out.length; ++i) {
      assert.ok(out[i].usage.prompt_tokens_details.cached_tokens > 0, `request ${i} hit`);
      assert.deepEqual(strip(out[i]), strip(coldOut[i]), `request ${i}: warm (batched) == cold`);
    }
  }],
];
await runChecks('prefix_cache', checks, async () => { await Promise.all([warm.stop(), cold.stop()]); });
