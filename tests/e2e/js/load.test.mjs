// E2E load: 64 concurrent streaming clients, 3 requests each (greedy, ignore_eos, varied prompt
// and output lengths, completions and chat). Every request must finish with exactly max_tokens
// tokens, the same token ids / text as the same request run alone, a unique id, one [DONE], and
// usage that adds up; /metrics must count exactly the requests and tokens sent, and end with
// running 0, waiting 0 and state memory back to its idle level (prefix cache off: idle is 0).
// A second pass on a server with little state memory forces preemption (recompute) and must
// give the same results.
import assert from 'node:assert/strict';
import path from 'node:path';
import { args, dataDir, metrics, postJson, runChecks, startServer, streamSse, waitMetrics } from './lib.mjs';

const { bin } = args();
const modelB = path.join(dataDir, 'tiny-v4-b');
const CLIENTS = 64, PER_CLIENT = 3, SPECS = 24;

// Deterministic specs: prompt of 3..60 token ids, 4..40 output tokens; every 4th is a chat.
let rng = 12345;
const rand = (n) => { rng = (rng * 1103515245 + 12345) % 2147483648; return rng % n; };
const specs = Array.from({ length: SPECS }, (_, i) => {
  const len = 3 + rand(58);
  const maxTokens = 4 + rand(37);
  if (i % 4 === 3) {
    return { kind: 'chat', maxTokens, body: { messages: [{ role: 'user', content: `request ${i}: ${'lorem ipsum '.repeat(1 + rand(6))}` }],
                                           max_tokens: maxTokens, temperature: 0, ignore_eos: true } };
  }
  return { kind: 'cmpl', maxTokens, body: { prompt: Array.from({ length: len }, () => 3 + rand(1000)), max_tokens: maxTokens,
                                           temperature: 0, ignore_eos: true, return_token_ids: true } };
});
const route = (s) => (s.kind === 'chat' ? '/v1/chat/completions' : '/v1/completions');

/// One streamed request -> {id, ids, text, finish, usage, dones}.
async function runStreamed(srv, spec) {
  const r = await streamSse(`${srv.base}${route(spec)}`, { ...spec.body, stream: true, stream_options: { include_usage: true } });
  const out = { ids: [], text: '', finish: null, usage: null, done: r.done, idSet: new Set() };
  for (const ev of r.events) {
    out.idSet.add(ev.id);
    if (ev.usage) out.usage = ev.usage;
    for (const c of ev.choices) {
      assert.equal(c.index, 0);
      if (c.token_ids) out.ids.push(...c.token_ids);
      out.text += spec.kind === 'chat' ? (c.delta?.content ?? '') : (c.text ?? '');
      if (c.finish_reason) { assert.equal(out.finish, null, 'one finish_reason'); out.finish = c.finish_reason; }
    }
  }
  assert.equal(out.idSet.size, 1, 'one id per stream');
  out.id = [...out.idSet][0];
  return out;
}

async function alone(srv) {
  const ref = [];
  for (const s of specs) {
    const r = await postJson(srv.base, route(s), s.body);
    assert.equal(r.status, 200, r.text);
    const c = r.json.choices[0];
    ref.push({ text: s.kind === 'chat' ? c.message.content : c.text, ids: c.token_ids ?? [], usage: r.json.usage });
    assert.equal(r.json.usage.completion_tokens, s.maxTokens);
  }
  return ref;
}

async function loadPass(srv, ref, label) {
  const idle = await metrics(srv.base);
  const idleBytes = idle.get('deepinfer_state_memory_used_bytes');
  const jobs = [];
  for (let c = 0; c < CLIENTS; ++c) {
    jobs.push((async () => {
      const results = [];
      for (let k = 0; k < PER_CLIENT; ++k) {
        const si = (c * PER_CLIENT + k * 7) % SPECS;
        results.push({ si, r: await runStreamed(srv, specs[si]) });
      }
      return results;
    })());
  }
  let peakRunning = 0, peakBytes = 0, polling = true;
  const poller = (async () => {
    while (polling) {
      const m = await metrics(srv.base);
      peakRunning = Math.max(peakRunning, m.get('deepinfer_num_requests_running'));
      peakBytes = Math.max(peakBytes, m.get('deepinfer_state_memory_used_bytes'));
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const all = (await Promise.all(jobs)).flat();
  polling = false;
  await poller;
  assert.equal(all.length, CLIENTS * PER_CLIENT);
  const ids = new Set();
  let tokens = 0, promptTokens = 0;
  const perRoute = { '/v1/completions': 0, '/v1/chat/completions': 0 };
  for (const { si, r } of all) {
    const s = specs[si];
    assert.ok(r.done, 'stream ended with [DONE]');
    assert.ok(!ids.has(r.id), `duplicate response id ${r.id}`);
    ids.add(r.id);
    assert.equal(r.finish, 'length');
    assert.equal(r.usage.completion_tokens, s.maxTokens, `spec ${si}: token count`);
    assert.equal(r.usage.prompt_tokens, ref[si].usage.prompt_tokens);
    if (s.kind === 'cmpl') {
      assert.equal(r.ids.length, s.maxTokens);
      assert.deepEqual(r.ids, ref[si].ids, `spec ${si}: same tokens as alone`);
    }
    assert.equal(r.text, ref[si].text, `spec ${si}: same text as alone`);
    tokens += s.maxTokens;
    promptTokens += r.usage.prompt_tokens;
    ++perRoute[route(s)];
  }
  const m = await waitMetrics(srv.base, (x) => x.get('deepinfer_num_requests_running') === 0 &&
                                               x.get('deepinfer_num_requests_waiting') === 0 &&
                                               x.get('deepinfer_state_memory_used_bytes') === idleBytes,
                              'running 0, waiting 0, state memory idle after the load');
  for (const [rt, n] of Object.entries(perRoute)) {
    const before = idle.get('deepinfer_requests_total', `endpoint="${rt}"`, 'status="200"') ?? 0;
    assert.equal(m.get('deepinfer_requests_total', `endpoint="${rt}"`, 'status="200"') - before, n, `${rt} requests counted once`);
  }
  assert.equal(m.get('deepinfer_request_generation_tokens_total') - idle.get('deepinfer_request_generation_tokens_total'), tokens);
  assert.equal(m.get('deepinfer_request_prompt_tokens_total') - idle.get('deepinfer_request_prompt_tokens_total'), promptTokens);
  const preempt = m.get('deepinfer_num_preemptions_total') - idle.get('deepinfer_num_preemptions_total');
  console.log(`  ${label}: ${all.length} requests, ${tokens} tokens, peak running ${peakRunning}, ` +
              `peak state ${(peakBytes / 1024).toFixed(0)} KiB, preemptions ${preempt}`);
  return { peakRunning, peakBytes, preempt };
}

const srv = await startServer(bin, modelB, ['--prefix-cache-mib', '0', '--http-threads', '160']);
let ref, big;
const checks = [
  ['reference: every spec alone', async () => { ref = await alone(srv); }],
  ['64 concurrent streaming clients x 3 requests == alone', async () => {
    big = await loadPass(srv, ref, 'default memory');
    assert.ok(big.peakRunning >= 16, `requests ran together (peak running ${big.peakRunning})`);
  }],
  ['again on a server with little state memory: preemption by recompute, same results', async () => {
    // --state-memory-mib is in MiB: 1 MiB holds only a part of the 64 streams' state.
    const small = await startServer(bin, modelB, ['--prefix-cache-mib', '0', '--http-threads', '160', '--state-memory-mib', '1']);
    try {
      const r = await loadPass(small, ref, '1 MiB state memory');
      // The gauge is the engine's reservation (each running sequence's state for one more token),
      // published after a step and re-fitted by preemption before the next forward: it may pass
      // the capacity by a token's worth per running sequence between two steps.
      assert.ok(r.preempt > 0, 'the small server preempted');
      assert.ok(r.peakBytes <= 1.02 * 1024 * 1024, `state memory within capacity (${r.peakBytes})`);
    } finally {
      await small.stop();
    }
  }],
];
await runChecks('load', checks, () => srv.stop());
