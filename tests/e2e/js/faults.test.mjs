// E2E faults while serving (tiny-v4-b, --max-context 256, --max-n 8): a client that disconnects
// mid-stream (its request is cancelled: generation stops, running and state memory return to
// idle), malformed JSON, wrong types, a prompt longer than the context, max_tokens beyond it,
// an unknown model, n too large, a body over the limit, a full queue (429): each gets its status
// and an OpenAI error object, and the server keeps serving after each one.
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { args, dataDir, metrics, postJson, runChecks, sleep, startServer, waitMetrics } from './lib.mjs';

const { bin } = args();
const modelB = path.join(dataDir, 'tiny-v4-b');
const MAX_CTX = 256;
const srv = await startServer(bin, modelB, ['--max-context', String(MAX_CTX), '--max-n', '8', '--max-body-mib', '1',
                                            '--prefix-cache-mib', '0']);
const busy = await startServer(bin, modelB, ['--max-running', '1', '--max-queue', '1', '--prefix-cache-mib', '0']);
const idle = await metrics(srv.base);
const idleBytes = idle.get('deepinfer_state_memory_used_bytes');
assert.equal(idleBytes, 0, 'no state before any request');

function assertError(res, status, { param, code } = {}) {
  assert.equal(res.status, status, `status ${res.status}: ${res.text}`);
  assert.ok(res.json && typeof res.json.error === 'object', `an OpenAI error object: ${res.text}`);
  const e = res.json.error;
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(typeof e.type, 'string');
  assert.ok('param' in e && 'code' in e, `error has param and code: ${res.text}`);
  if (param !== undefined) assert.equal(e.param, param);
  if (code !== undefined) assert.equal(e.code, code);
}

/// After each fault: a normal request still works, exactly.
let reference;
async function stillServing(base = srv.base) {
  const r = await postJson(base, '/v1/completions', { prompt: [9, 8, 7], max_tokens: 5, temperature: 0, ignore_eos: true });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.usage.completion_tokens, 5);
  if (base === srv.base) {
    if (reference === undefined) reference = r.json.choices[0].text;
    assert.equal(r.json.choices[0].text, reference);
  }
}

const chat = (extra) => ({ model: 'tiny-v4-b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...extra });

const checks = [
  ['baseline', () => stillServing()],

  ['disconnect mid-stream: the request is cancelled, state freed, server keeps serving', async () => {
    const before = await metrics(srv.base);
    const ac = new AbortController();
    let chunks = 0;
    const body = { prompt: [5, 6, 7], max_tokens: 240, temperature: 0, ignore_eos: true, stream: true };
    const res = await fetch(`${srv.v1}/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
                                                         body: JSON.stringify(body), signal: ac.signal });
    assert.equal(res.status, 200);
    try {
      for await (const _ of res.body) { if (++chunks >= 5) { ac.abort(); } }
    } catch (e) { assert.equal(e.name, 'AbortError'); }
    const m = await waitMetrics(srv.base, (x) => x.get('deepinfer_num_requests_running') === 0 &&
                                                  x.get('deepinfer_state_memory_used_bytes') === idleBytes,
                                'running 0 and state memory idle after the disconnect');
    await sleep(100);
    const after = await metrics(srv.base);
    const generated = after.get('deepinfer_generation_tokens_total') - before.get('deepinfer_generation_tokens_total');
    assert.ok(generated < 200, `generation stopped after the disconnect (${generated} of 240 tokens)`);
    assert.equal(after.get('deepinfer_generation_tokens_total'), m.get('deepinfer_generation_tokens_total'), 'no more tokens');
    await stillServing();
  }],

  ['disconnect of many streams at once', async () => {
    const acs = [];
    await Promise.all(Array.from({ length: 8 }, async (_, i) => {
      const ac = new AbortController();
      acs.push(ac);
      const res = await fetch(`${srv.v1}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify(chat({ max_tokens: 200, ignore_eos: true, stream: true, seed: i, temperature: 1 })), signal: ac.signal });
      let n = 0;
      try { for await (const _ of res.body) if (++n >= 3 + i) ac.abort(); } catch { /* aborted */ }
    }));
    await waitMetrics(srv.base, (x) => x.get('deepinfer_num_requests_running') === 0 &&
                                       x.get('deepinfer_num_requests_waiting') === 0 &&
                                       x.get('deepinfer_state_memory_used_bytes') === idleBytes, 'idle after 8 disconnects');
    await stillServing();
  }],

  ['disconnect while waiting for a NON-streaming answer: cancelled, counted, state freed', async () => {
    // busy (default context): 20000 tokens take far longer than the test waits.
    const before = await metrics(busy.base);
    const cancelled0 = before.get('deepinfer_requests_cancelled_total', 'reason="client_disconnect"');
    assert.equal(typeof cancelled0, 'number', 'deepinfer_requests_cancelled_total is exported');
    const body = JSON.stringify({ prompt: [3, 1, 4], max_tokens: 20000, temperature: 0, ignore_eos: true });
    const req = http.request(`${busy.base}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
    const ended = new Promise((resolve) => { req.on('error', resolve); req.on('close', resolve); });
    req.on('response', (res) => res.resume());
    req.end(body);
    await waitMetrics(busy.base, (x) => x.get('deepinfer_num_requests_running') === 1, 'the request running');
    await sleep(1200);  // past the server's in-handler wait: now it is answering chunked, probing
    req.destroy();
    await ended;
    const t0 = Date.now();
    const m = await waitMetrics(busy.base, (x) => x.get('deepinfer_num_requests_running') === 0 &&
                                                   x.get('deepinfer_state_memory_used_bytes') === 0 &&
                                                   x.get('deepinfer_requests_cancelled_total', 'reason="client_disconnect"') === cancelled0 + 1,
                                'running 0, state freed and the cancellation counted after the hang-up', 4000);
    assert.ok(Date.now() - t0 < 3000, `cancelled within 3 s of the hang-up (${Date.now() - t0} ms)`);
    const generated = m.get('deepinfer_generation_tokens_total') - before.get('deepinfer_generation_tokens_total');
    assert.ok(generated < 20000, `generation stopped (${generated} of 20000 tokens)`);
    await stillServing(busy.base);
  }],

  ['malformed JSON -> 400', async () => {
    assertError(await postJson(srv.base, '/v1/chat/completions', '{"messages": [', { raw: true }), 400);
    assertError(await postJson(srv.base, '/v1/completions', 'not json at all', { raw: true }), 400);
    assertError(await postJson(srv.base, '/v1/completions', '[1, 2, 3]', { raw: true }), 400);
    assertError(await postJson(srv.base, '/v1/completions', '', { raw: true }), 400);
    await stillServing();
  }],

  ['wrong types -> 400 naming the parameter', async () => {
    assertError(await postJson(srv.base, '/v1/completions', { prompt: 'hi', max_tokens: 'ten' }), 400, { param: 'max_tokens' });
    assertError(await postJson(srv.base, '/v1/completions', { prompt: 'hi', temperature: 'hot' }), 400, { param: 'temperature' });
    assertError(await postJson(srv.base, '/v1/completions', { prompt: 42 }), 400, { param: 'prompt' });
    assertError(await postJson(srv.base, '/v1/chat/completions', { messages: 'hello' }), 400, { param: 'messages' });
    assertError(await postJson(srv.base, '/v1/chat/completions', chat({ stream: 'yes' })), 400, { param: 'stream' });
    assertError(await postJson(srv.base, '/v1/chat/completions', chat({ n: 1.5 })), 400, { param: 'n' });
    assertError(await postJson(srv.base, '/v1/completions', { prompt: [1, 2, 5000] }), 400);
    assertError(await postJson(srv.base, '/v1/completions', { prompt: [1, 2], temperature: -1 }), 400);
    await stillServing();
  }],

  ['prompt longer than the context -> 400', async () => {
    const long = Array.from({ length: MAX_CTX + 10 }, (_, i) => 3 + (i % 1000));
    assertError(await postJson(srv.base, '/v1/completions', { prompt: long, max_tokens: 1 }), 400);
    const exact = Array.from({ length: MAX_CTX }, (_, i) => 3 + (i % 1000));
    assertError(await postJson(srv.base, '/v1/completions', { prompt: exact, max_tokens: 1 }), 400);
    assertError(await postJson(srv.base, '/v1/chat/completions', chat({ messages: [{ role: 'user', content: 'word '.repeat(400) }] })), 400);
    // Streaming requests are validated before the stream starts: a status, not an SSE error.
    assertError(await postJson(srv.base, '/v1/completions', { prompt: long, max_tokens: 1, stream: true }), 400);
    const m = await metrics(srv.base);
    assert.equal(m.get('deepinfer_num_requests_running'), 0);
    await stillServing();
  }],

  ['max_tokens beyond the context -> 400; up to it -> 200', async () => {
    assertError(await postJson(srv.base, '/v1/completions', { prompt: [1, 2, 3, 4], max_tokens: MAX_CTX }), 400);
    assertError(await postJson(srv.base, '/v1/completions', { prompt: [1, 2, 3, 4], max_tokens: 10 ** 9 }), 400);
    const ok = await postJson(srv.base, '/v1/completions', { prompt: [1, 2, 3, 4], max_tokens: MAX_CTX - 4, temperature: 0, ignore_eos: true });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.usage.completion_tokens, MAX_CTX - 4);
    // No max_tokens: generation stops at the context limit.
    const open = await postJson(srv.base, '/v1/completions', { prompt: [1, 2, 3, 4], temperature: 0, ignore_eos: true });
    assert.equal(open.status, 200, open.text);
    assert.equal(open.json.usage.completion_tokens, MAX_CTX - 4);
    assert.equal(open.json.choices[0].finish_reason, 'length');
    await stillServing();
  }],

  ['unknown model -> 404', async () => {
    assertError(await postJson(srv.base, '/v1/chat/completions', chat({ model: 'gpt-4o' })), 404, { code: 'model_not_found' });
    assertError(await postJson(srv.base, '/v1/completions', { model: 'nope', prompt: 'x' }), 404, { code: 'model_not_found' });
    await stillServing();
  }],

  ['n too large -> 400; n at the limit -> 200', async () => {
    assertError(await postJson(srv.base, '/v1/chat/completions', chat({ n: 9 })), 400, { param: 'n' });
    assertError(await postJson(srv.base, '/v1/completions', { prompt: 'x', n: 100000 }), 400);
    assertError(await postJson(srv.base, '/v1/completions', { prompt: 'x', n: 0 }), 400);
    const ok = await postJson(srv.base, '/v1/chat/completions', chat({ n: 8, temperature: 1, seed: 1 }));
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.choices.length, 8);
    await stillServing();
  }],

  ['unknown route -> 404, body over --max-body-mib -> 413', async () => {
    assertError(await postJson(srv.base, '/v1/nothing', {}), 404);
    const big = JSON.stringify({ prompt: 'x'.repeat(1.5 * 1024 * 1024) });
    assertError(await postJson(srv.base, '/v1/completions', big, { raw: true }), 413);
    await stillServing();
  }],

  ['queue full -> 429 (--max-running 1 --max-queue 1), then serving again', async () => {
    const long = () => postJson(busy.base, '/v1/completions', { prompt: [4, 4], max_tokens: 400, temperature: 0, ignore_eos: true });
    const first = long();
    await waitMetrics(busy.base, (x) => x.get('deepinfer_num_requests_running') === 1, 'first request running');
    const second = long();
    await waitMetrics(busy.base, (x) => x.get('deepinfer_num_requests_waiting') === 1, 'second request waiting');
    const third = await postJson(busy.base, '/v1/completions', { prompt: [4, 4], max_tokens: 4 });
    assertError(third, 429);
    const [a, b] = await Promise.all([first, second]);
    assert.equal(a.status, 200);
    assert.equal(b.status, 200);
    assert.equal(a.json.choices[0].text, b.json.choices[0].text);
    await stillServing(busy.base);
  }],

  ['error statuses are counted in /metrics', async () => {
    const m = await metrics(srv.base);
    assert.ok(m.get('deepinfer_requests_total', 'status="400"') >= 10);
    assert.ok(m.get('deepinfer_requests_total', 'status="404"') >= 2);
    assert.equal(m.get('deepinfer_num_requests_running'), 0);
    assert.equal(m.get('deepinfer_state_memory_used_bytes'), idleBytes);
  }],
];

await runChecks('faults', checks, async () => { await Promise.all([srv.stop(), busy.stop()]); });
